#include "registry/weight_store.h"

#include <algorithm>
#include <cstring>
#include <future>
#include <unordered_map>
#include <utility>

#include "base/hash.h"
#include "base/json.h"
#include "base/sync_point.h"
#include "base/thread_pool.h"
#include "registry/chunk_codec.h"

namespace reel::registry {
namespace {

constexpr int kManifestFormat = 1;

std::string TensorId(const std::vector<ChunkRef>& chunks) {
  std::string addresses;
  for (const ChunkRef& c : chunks) addresses += c.sha256;
  return Sha256Hex(addresses);
}

}  // namespace

bool IsChunkAddress(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

namespace {

Result<ChunkRef> ChunkRefFromJson(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array() || j.size() != 3 || !j[0].is_string() || !j[1].is_number_unsigned() ||
      !j[2].is_number_unsigned()) {
    return DataLossError(where + ": expected [sha256, size, depth]");
  }
  ChunkRef c{j[0].get<std::string>(), j[1].get<uint64_t>(), 0};
  const uint64_t depth = j[2].get<uint64_t>();
  if (!IsChunkAddress(c.sha256) || depth > kMaxChunkDepth) {
    return DataLossError(where + ": bad chunk address or depth");
  }
  c.depth = static_cast<int>(depth);
  return c;
}

Result<TensorEntry> TensorFromJson(const nlohmann::json& j, const std::string& where) {
  JsonFields f(j, where);
  TensorEntry t;
  t.dtype = f.String("dtype");
  t.id = f.String("id");
  const nlohmann::json& shape = f.Array("shape");
  const nlohmann::json& chunks = f.Array("chunks");
  if (!f.ok()) return DataLossError(f.error());
  for (const nlohmann::json& d : shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return DataLossError(where + ".shape: expected non-negative integers");
    }
    t.shape.push_back(d.get<int64_t>());
  }
  for (size_t i = 0; i < chunks.size(); ++i) {
    REEL_ASSIGN_OR_RETURN(
        ChunkRef c, ChunkRefFromJson(chunks[i], where + ".chunks[" + std::to_string(i) + "]"));
    t.chunks.push_back(std::move(c));
  }
  if (models::DtypeSize(t.dtype) == 0)
    return DataLossError(where + ".dtype: unknown '" + t.dtype + "'");
  if (t.id != TensorId(t.chunks)) return DataLossError(where + ".id: does not match its chunks");
  return t;
}

// Bytes per element of a tensor to push. InvalidArgument for a dtype safetensors does not know.
Result<int> ElementWidth(const std::string& name, const models::TensorBytes& tensor) {
  const int width = static_cast<int>(models::DtypeSize(tensor.dtype));
  if (width == 0) {
    return InvalidArgumentError("tensor '" + name + "': unknown dtype '" + tensor.dtype + "'");
  }
  return width;
}

}  // namespace

uint64_t TensorEntry::shape_bytes() const {
  uint64_t n = models::DtypeSize(dtype);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

uint64_t TensorEntry::bytes() const {
  uint64_t n = 0;
  for (const ChunkRef& c : chunks) n += c.size;
  return n;
}

nlohmann::json ManifestJson(const WeightManifest& manifest) {
  nlohmann::json tensors = nlohmann::json::object();
  for (const auto& [name, t] : manifest.tensors) {
    nlohmann::json chunks = nlohmann::json::array();
    for (const ChunkRef& c : t.chunks) chunks.push_back({c.sha256, c.size, c.depth});
    tensors[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"id", t.id}, {"chunks", chunks}};
  }
  return {{"format", kManifestFormat}, {"tensors", tensors}, {"metadata", manifest.metadata}};
}

std::string ManifestToJson(const WeightManifest& manifest) { return ManifestJson(manifest).dump(); }

Result<WeightManifest> ManifestFromJson(std::string_view text, std::string_view what) {
  REEL_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(text, what));
  return ManifestFromJsonValue(doc, what);
}

Result<WeightManifest> ManifestFromJsonValue(const nlohmann::json& doc, std::string_view what) {
  JsonFields f(doc, "");
  const int64_t format = f.Int("format");
  const nlohmann::json& tensors = f.Object("tensors");
  const nlohmann::json& metadata = f.Object("metadata");
  if (!f.ok()) return DataLossError(std::string(what) + ": " + f.error());
  if (format != kManifestFormat) {
    return FailedPreconditionError(std::string(what) + ": weight manifest format " +
                                   std::to_string(format) + ", this build reads " +
                                   std::to_string(kManifestFormat));
  }
  WeightManifest m;
  for (const auto& [name, j] : tensors.items()) {
    REEL_ASSIGN_OR_RETURN(TensorEntry t,
                          TensorFromJson(j, std::string(what) + ": tensors." + name));
    m.tensors.emplace(name, std::move(t));
  }
  for (const auto& [key, v] : metadata.items()) {
    if (!v.is_string())
      return DataLossError(std::string(what) + ": metadata." + key + ": expected a string");
    m.metadata.emplace(key, v.get<std::string>());
  }
  return m;
}

std::vector<std::string_view> SplitIntoChunks(std::string_view data, int width,
                                              uint64_t chunk_bytes) {
  const uint64_t per_chunk = std::max<uint64_t>(chunk_bytes / width, 1) * width;
  std::vector<std::string_view> chunks;
  for (uint64_t offset = 0; offset < data.size(); offset += per_chunk) {
    chunks.push_back(data.substr(offset, per_chunk));
  }
  return chunks;
}

Result<WeightManifest> DescribeChunks(const models::SafetensorsFile& file, uint64_t chunk_bytes,
                                      size_t threads) {
  if (chunk_bytes < 8) return InvalidArgumentError("weight store: chunk_bytes must be at least 8");
  WeightManifest out;
  out.metadata = file.metadata;
  std::vector<std::pair<std::string_view, ChunkRef*>> chunks;  // laid out first, hashed after
  for (const auto& [name, tensor] : file.tensors) {
    REEL_ASSIGN_OR_RETURN(const int width, ElementWidth(name, tensor));
    TensorEntry& entry = out.tensors[name];
    entry = {tensor.dtype, tensor.shape, "", {}};
    const std::vector<std::string_view> raws = SplitIntoChunks(tensor.data, width, chunk_bytes);
    entry.chunks.resize(raws.size());
    for (size_t i = 0; i < raws.size(); ++i) {
      entry.chunks[i].size = raws[i].size();
      chunks.emplace_back(raws[i], &entry.chunks[i]);
    }
  }
  REEL_RETURN_IF_ERROR(
      ParallelFor(threads > 0 ? threads : HardwareThreads(), chunks.size(), [&](size_t i) {
        chunks[i].second->sha256 = Sha256Hex(chunks[i].first);
        return Status::Ok();
      }));
  for (auto& [name, entry] : out.tensors) entry.id = TensorId(entry.chunks);
  return out;
}

WeightStore::WeightStore(std::shared_ptr<storage::ObjectStore> store, std::string prefix,
                         WeightStoreOptions options)
    : store_(std::move(store)), prefix_(std::move(prefix)), options_(std::move(options)) {
  if (options_.base_cache == nullptr) {
    options_.base_cache = std::make_shared<ChunkCache>(kDefaultBaseCacheBytes);
  }
}

size_t WeightStore::Threads() const {
  return options_.threads > 0 ? static_cast<size_t>(options_.threads) : HardwareThreads();
}

// One chunk of a push: where it comes from, and what storing it found.
struct WeightStore::PushPiece {
  std::string_view raw;
  int width = 0;
  const ChunkRef* base = nullptr;  // the parent's chunk at the same place, when it has one
  std::string what;
  ChunkRef* ref = nullptr;  // its entry in the manifest the push returns
  PushStats stats;          // what storing it wrote
};

// Every chunk of `described` (DescribeChunks of `file`) beside its bytes and the parent's chunk
// at the same place of the same tensor (same name, dtype and shape) when there is one.
Result<std::vector<WeightStore::PushPiece>> WeightStore::PlanPush(
    const models::SafetensorsFile& file, const WeightManifest* parent,
    WeightManifest* described) const {
  std::vector<PushPiece> pieces;
  for (const auto& [name, tensor] : file.tensors) {
    REEL_ASSIGN_OR_RETURN(const int width, ElementWidth(name, tensor));
    const TensorEntry* base = nullptr;
    if (parent != nullptr) {
      auto it = parent->tensors.find(name);
      if (it != parent->tensors.end() && it->second.dtype == tensor.dtype &&
          it->second.shape == tensor.shape) {
        base = &it->second;
      }
    }
    std::vector<ChunkRef>& refs = described->tensors.at(name).chunks;
    const std::vector<std::string_view> raws =
        SplitIntoChunks(tensor.data, width, options_.chunk_bytes);
    for (size_t i = 0; i < raws.size(); ++i) {
      PushPiece p;
      p.raw = raws[i];
      p.width = width;
      if (base != nullptr && i < base->chunks.size() && base->chunks[i].size == raws[i].size()) {
        p.base = &base->chunks[i];
      }
      p.what = "tensor '" + name + "' chunk " + std::to_string(i);
      p.ref = &refs[i];
      pieces.push_back(std::move(p));
    }
  }
  return pieces;
}

namespace {

// The pieces that store a chunk: the first of each address that is not its base unchanged (a
// file may hold one chunk twice: two such pieces must not race to write it). The others take the
// depth their base or their address's first piece found.
std::vector<size_t> StoringPieces(std::vector<WeightStore::PushPiece>& pieces,
                                  std::vector<size_t>* first_of) {
  std::vector<size_t> storing;
  std::unordered_map<std::string_view, size_t> first;
  first_of->assign(pieces.size(), pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    WeightStore::PushPiece& p = pieces[i];
    if (p.base != nullptr && p.base->sha256 == p.ref->sha256) {
      p.ref->depth = p.base->depth;  // unchanged
      continue;
    }
    auto [it, added] = first.emplace(p.ref->sha256, i);
    if (added) storing.push_back(i);
    (*first_of)[i] = it->second;
  }
  return storing;
}

// A push stores its chunks in groups made durable together (storage::PutBatch): a journal commit
// per group rather than two per chunk, while a push killed halfway keeps the groups it finished
// for its rerun. At most this many chunks and raw bytes per group.
constexpr size_t kGroupChunks = 64;
constexpr uint64_t kGroupBytes = 64 << 20;

// The end of the group of storing[begin, ...).
size_t GroupEnd(const std::vector<WeightStore::PushPiece>& pieces,
                const std::vector<size_t>& storing, size_t begin) {
  size_t end = begin;
  uint64_t bytes = 0;
  while (end < storing.size() && end - begin < kGroupChunks &&
         (end == begin || bytes + pieces[storing[end]].raw.size() <= kGroupBytes)) {
    bytes += pieces[storing[end]].raw.size();
    ++end;
  }
  return end;
}

// Makes the group of storing[begin, end) durable and visible.
Status CommitGroup(storage::PutBatch& batch, const std::vector<WeightStore::PushPiece>& pieces,
                   const std::vector<size_t>& storing, size_t begin, size_t end) {
  REEL_RETURN_IF_ERROR(batch.Commit());
  for (size_t k = begin; k < end; ++k) {
    if (pieces[storing[k]].stats.chunks_written > 0) {
      REEL_SYNC_POINT("WeightStore::Push:ChunkStored");
    }
  }
  return Status::Ok();
}

void AddPushStats(const PushStats& from, PushStats* to) {
  to->chunks_written += from.chunks_written;
  to->deltas_written += from.deltas_written;
  to->stored_bytes += from.stored_bytes;
}

}  // namespace

// Describes the file (every chunk hashed), stores the new chunks (each address once, in groups
// made durable together), then keeps the pushed chunks as the next push's delta bases; all three
// on Threads() threads.
Result<WeightManifest> WeightStore::Push(const models::SafetensorsFile& file,
                                         const WeightManifest* parent, PushStats* stats) const {
  if (options_.chunk_bytes < 8 || options_.max_chain < 0 || options_.max_chain > kMaxChunkDepth) {
    return InvalidArgumentError(
        "weight store: chunk_bytes must be at least 8 and max_chain in [0, " +
        std::to_string(kMaxChunkDepth) + "]");
  }
  const size_t threads = Threads();
  REEL_ASSIGN_OR_RETURN(WeightManifest out, DescribeChunks(file, options_.chunk_bytes, threads));
  REEL_ASSIGN_OR_RETURN(std::vector<PushPiece> pieces, PlanPush(file, parent, &out));
  std::vector<size_t> first_of;
  const std::vector<size_t> storing = StoringPieces(pieces, &first_of);
  REEL_RETURN_IF_ERROR(StoreGroups(pieces, storing));
  PushStats local;
  if (stats == nullptr) stats = &local;
  for (size_t i = 0; i < pieces.size(); ++i) {
    PushPiece& p = pieces[i];
    if (first_of[i] < pieces.size()) p.ref->depth = pieces[first_of[i]].ref->depth;
    AddPushStats(p.stats, stats);
    ++stats->chunks;
    stats->raw_bytes += p.raw.size();
  }
  // Chunks stored as they are (compression off) are read back as fast as copied, and take no
  // deltas: caching them would only copy them once more.
  if (!options_.compress) return out;
  REEL_RETURN_IF_ERROR(ParallelFor(threads, pieces.size(), [&](size_t i) {
    options_.base_cache->Insert(pieces[i].ref->sha256, pieces[i].raw);
    return Status::Ok();
  }));
  return out;
}

// Stores the chunks of pieces[storing[...]] group by group, each group's on Threads() threads.
// A group commits on a thread of its own while the next one is written: the commit mostly waits
// on the disk, the writing on the CPUs.
Status WeightStore::StoreGroups(std::vector<PushPiece>& pieces,
                                const std::vector<size_t>& storing) const {
  ThreadPool committer(1);         // on an early return, it finishes the commit it began
  std::future<Status> committing;  // the group before's
  for (size_t begin = 0; begin < storing.size();) {
    const size_t end = GroupEnd(pieces, storing, begin);
    std::shared_ptr<storage::PutBatch> batch = store_->NewBatch();
    const Status written = ParallelFor(Threads(), end - begin, [&](size_t k) {
      return PushChunk(pieces[storing[begin + k]], *batch);
    });
    if (committing.valid()) REEL_RETURN_IF_ERROR(committing.get());
    REEL_RETURN_IF_ERROR(written);
    committing = committer.Submit([&pieces, &storing, batch, begin, end] {
      return CommitGroup(*batch, pieces, storing, begin, end);
    });
    begin = end;
  }
  return committing.valid() ? committing.get() : Status::Ok();
}

// Stores one piece's chunk unless the store has it (from another tensor or version, or an
// interrupted push): as a delta when there is a base to take it against; whole when there is
// none or the delta left nothing to gain (no smaller than the raw bytes).
Status WeightStore::PushChunk(PushPiece& p, storage::PutBatch& batch) const {
  Result<int> stored_depth = StoredDepth(p.ref->sha256, p.what);
  if (stored_depth.ok()) {
    p.ref->depth = *stored_depth;
    return Status::Ok();
  }
  if (stored_depth.status().code() != StatusCode::kNotFound) return stored_depth.status();

  if (!options_.compress) return PutStored(p, batch);
  const ChunkEncodeOptions encode{options_.zstd_level, options_.compress};
  std::string encoded;
  if (p.base != nullptr && options_.max_chain > 0) {
    REEL_ASSIGN_OR_RETURN(encoded, p.base->depth < options_.max_chain ? DeltaOnParent(p, encode)
                                                                      : DeltaOnRoot(p, encode));
  }
  if (encoded.empty()) {
    REEL_ASSIGN_OR_RETURN(encoded, EncodeChunk(p.raw, p.width, nullptr, encode));
  }
  REEL_RETURN_IF_ERROR(batch.Put(ChunkKey(p.ref->sha256), encoded));
  p.stats.chunks_written = 1;
  p.stats.stored_bytes = encoded.size();
  return Status::Ok();
}

// Compression off: the piece's header and then its raw bytes, sent as they are rather than
// copied into one string first (a copy into fresh memory costs a page fault per 4 KiB).
Status WeightStore::PutStored(PushPiece& p, storage::PutBatch& batch) const {
  REEL_ASSIGN_OR_RETURN(const std::string header, StoredChunkHeader(p.raw, p.width));
  REEL_RETURN_IF_ERROR(batch.PutJoined(ChunkKey(p.ref->sha256), {header, p.raw}));
  p.stats.chunks_written = 1;
  p.stats.stored_bytes = header.size() + p.raw.size();
  return Status::Ok();
}

// The piece as a delta against the parent's chunk (one deeper than it), or "" when that is no
// smaller than the raw bytes.
Result<std::string> WeightStore::DeltaOnParent(PushPiece& p,
                                               const ChunkEncodeOptions& encode) const {
  REEL_ASSIGN_OR_RETURN(const BaseBytes base, ReadDeltaBase(*p.base, p.what + " (delta base)"));
  const DeltaBase delta_base{*base.raw, p.base->depth, p.base->sha256,
                             base.before != nullptr ? *base.before : std::string_view()};
  REEL_ASSIGN_OR_RETURN(std::string encoded, EncodeChunk(p.raw, p.width, &delta_base, encode));
  if (encoded.size() >= p.raw.size()) return std::string();
  p.ref->depth = p.base->depth + 1;
  p.stats.deltas_written = 1;
  return encoded;
}

// The parent's chain is max_chain deep: the piece starts a new chain as a delta against the whole
// chunk that chain starts from (its root), at depth 1, rather than as another whole copy. A run's
// checkpoint nine saves apart still differs from it by much less than a whole copy costs
// (R(2+1)D-18 under AdamW: about 66% of the raw bytes against 84% whole), and a pull still decodes
// at most max_chain deltas. "" when the whole chunk would be no larger (a tensor rewritten).
Result<std::string> WeightStore::DeltaOnRoot(PushPiece& p, const ChunkEncodeOptions& encode) const {
  const std::string what = p.what + " (its chain's whole chunk)";
  REEL_ASSIGN_OR_RETURN(const std::string root, ChainRoot(p.base->sha256, what));
  std::string root_raw;
  REEL_RETURN_IF_ERROR(ReadChunk(root, what, Verify::kNone, &root_raw));
  if (root_raw.size() != p.raw.size()) return std::string();
  const DeltaBase delta_base{root_raw, 0, root, {}};
  REEL_ASSIGN_OR_RETURN(std::string delta, EncodeChunk(p.raw, p.width, &delta_base, encode));
  REEL_ASSIGN_OR_RETURN(std::string whole, EncodeChunk(p.raw, p.width, nullptr, encode));
  if (delta.size() >= whole.size()) return whole;
  p.ref->depth = 1;
  p.stats.deltas_written = 1;
  return delta;
}

// The address of the whole chunk a stored chunk's chain starts from, reading headers only.
Result<std::string> WeightStore::ChainRoot(const std::string& sha256,
                                           const std::string& what) const {
  REEL_ASSIGN_OR_RETURN(auto chain, FetchChain(sha256, what, Fetch::kHeaders));
  return chain.back().first;
}

// The bytes a delta against `base` is taken against: the cached ones when a recent push kept
// them and the store still holds that chunk at the manifest's depth (a removed version's chunks
// may have been collected since), else its chain decoded from the store. With them, the bytes of
// the base's own base where it has one and they are at hand (cached, or decoded on the way), for
// a linear delta. Neither is checked against its address: the delta is taken against the bytes
// the base's chain decodes to, so a read through that same chain gets the new chunk back, and the
// pull checks that.
Result<WeightStore::BaseBytes> WeightStore::ReadDeltaBase(const ChunkRef& base,
                                                          const std::string& what) const {
  if (ChunkBytes cached = options_.base_cache->Find(base.sha256)) {
    Result<ChunkHeader> h = StoredHeader(base.sha256, what);
    if (h.ok() && h->depth == base.depth) {
      return BaseBytes{cached,
                       IsDelta(h->form) ? options_.base_cache->Find(h->base_sha256) : nullptr};
    }
    if (!h.ok() && h.status().code() != StatusCode::kNotFound) return h.status();
  }
  std::string raw, before;
  REEL_RETURN_IF_ERROR(ReadChunk(base.sha256, what, Verify::kNone, &raw, &before));
  return BaseBytes{OwnedChunkBytes(std::move(raw)),
                   before.empty() ? nullptr : OwnedChunkBytes(std::move(before))};
}

// Reads the chain from `sha256` down to its full chunk, newest first (each link one less deep: a
// damaged store cannot make it loop); with kHeaders, only each link's header.
Result<std::vector<std::pair<std::string, std::string>>> WeightStore::FetchChain(
    const std::string& sha256, const std::string& what, Fetch fetch) const {
  std::vector<std::pair<std::string, std::string>> chain;  // (address, encoded)
  std::string address = sha256;
  int depth = kMaxChunkDepth + 1;
  while (true) {
    Result<std::string> encoded = fetch == Fetch::kHeaders
                                      ? store_->GetRange(ChunkKey(address), 0, kMaxChunkHeaderBytes)
                                      : store_->Get(ChunkKey(address));
    if (!encoded.ok()) {
      if (encoded.status().code() != StatusCode::kNotFound) return encoded.status();
      return DataLossError(what + ": chunk " + address + " is missing from " + store_->uri());
    }
    REEL_ASSIGN_OR_RETURN(ChunkHeader h, ReadChunkHeader(*encoded, what));
    if (h.depth >= depth) {
      return DataLossError(what + ": chunk " + address + " has depth " + std::to_string(h.depth) +
                           ", not less than the chunk that names it as its base");
    }
    depth = h.depth;
    chain.emplace_back(address, std::move(encoded).value());
    if (!IsDelta(h.form)) return chain;
    address = h.base_sha256;
  }
}

namespace {

// The link nearest the full chunk whose decoded bytes do not match its address: what a read
// whose result failed its check names.
Status FindDamagedLink(const std::vector<std::pair<std::string, std::string>>& chain,
                       const std::string& what) {
  std::string raw, base, before;  // this link's, the one before's, and the one before that's
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    // A link that does not decode against the links below it (a damaged frame or header) is the
    // damaged one as much as a link that decodes to other bytes.
    Result<ChunkHeader> h = ReadChunkHeader(it->second, what);
    Result<std::string> decoded =
        h.ok() ? DecodeChunk(it->second, base, what, NeedsBaseBefore(*h) ? before : "")
               : Result<std::string>(h.status());
    if (!decoded.ok()) {
      return DataLossError(what + ": chunk " + it->first + " is damaged (" +
                           std::string(decoded.status().message()) + ")");
    }
    raw = std::move(decoded).value();
    const std::string got = Sha256Hex(raw);
    if (got != it->first) {
      return DataLossError(what + ": chunk " + it->first + " holds other bytes (SHA-256 " + got +
                           ")");
    }
    before = std::exchange(base, std::move(raw));
  }
  return DataLossError(what + ": chunk " + chain.front().first +
                       " decodes to other bytes through its chain, though every link matches");
}

}  // namespace

// Decodes a fetched chain (DecodeChainInto) into out[0, size), and the link before the last into
// `before` when given, and checks only the result; only a damaged chain pays for decoding link by
// link to name the damaged chunk.
Status WeightStore::DecodeFetched(const std::vector<std::pair<std::string, std::string>>& chain,
                                  const std::string& sha256, const std::string& what, Verify verify,
                                  char* out, size_t size, char* before) const {
  std::vector<std::string_view> links;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) links.emplace_back(it->second);
  // A chain whose result is checked against its address needs no zstd checksums on the way.
  const ZstdChecksum checksum =
      verify == Verify::kAddress ? ZstdChecksum::kSkip : ZstdChecksum::kVerify;
  Status decoded = DecodeChainInto(links, what, out, size, before, checksum);
  // A damaged link can show as such (a frame zstd refuses, a grouped link's class counts that
  // are not its base's) or as other bytes: either way the link is named.
  if (decoded.code() == StatusCode::kDataLoss ||
      (decoded.ok() && verify == Verify::kAddress &&
       Sha256Hex(std::string_view(out, size)) != sha256)) {
    return FindDamagedLink(chain, what);
  }
  return decoded;
}

Status WeightStore::ReadChunk(const std::string& sha256, const std::string& what, Verify verify,
                              std::string* raw, std::string* before) const {
  REEL_ASSIGN_OR_RETURN(auto chain, FetchChain(sha256, what));
  REEL_ASSIGN_OR_RETURN(ChunkHeader h, ReadChunkHeader(chain.front().second, what));
  raw->resize(h.raw_size);
  const bool with_before = before != nullptr && chain.size() > 1;
  if (with_before) before->resize(h.raw_size);
  return DecodeFetched(chain, sha256, what, verify, raw->data(), raw->size(),
                       with_before ? before->data() : nullptr);
}

// NotFound when no chunk is stored under the address.
Result<ChunkHeader> WeightStore::StoredHeader(const std::string& sha256,
                                              const std::string& what) const {
  REEL_ASSIGN_OR_RETURN(std::string head,
                        store_->GetRange(ChunkKey(sha256), 0, kMaxChunkHeaderBytes));
  return ReadChunkHeader(head, what);
}

// NotFound when no chunk is stored under the address.
Result<int> WeightStore::StoredDepth(const std::string& sha256, const std::string& what) const {
  REEL_ASSIGN_OR_RETURN(ChunkHeader h, StoredHeader(sha256, what));
  return h.depth;
}

Result<bool> WeightStore::HasChunk(const std::string& sha256) const {
  Result<int> depth = StoredDepth(sha256, "chunk " + sha256);
  if (depth.ok()) return true;
  if (depth.status().code() == StatusCode::kNotFound) return false;
  return depth.status();
}

Result<std::map<std::string, storage::ObjectInfo>> WeightStore::ListChunks() const {
  const std::string prefix = prefix_ + "chunks/";
  REEL_ASSIGN_OR_RETURN(std::vector<storage::ObjectInfo> objects,
                        storage::ListAll(*store_, prefix));
  std::map<std::string, storage::ObjectInfo> chunks;
  for (storage::ObjectInfo& o : objects) {
    std::string address = o.key.substr(prefix.size());
    // Anything else under chunks/ (a writer's temp file) is not the collector's to judge.
    if (IsChunkAddress(address)) chunks.emplace(std::move(address), std::move(o));
  }
  return chunks;
}

Result<std::string> WeightStore::StoredBase(std::string_view sha256) const {
  const std::string address(sha256);
  REEL_ASSIGN_OR_RETURN(ChunkHeader h, StoredHeader(address, "chunk " + address));
  return h.base_sha256;
}

Status WeightStore::DeleteChunk(std::string_view sha256) const {
  return store_->Delete(ChunkKey(sha256));
}

}  // namespace reel::registry
