// A registry version's weights on any ObjectStore, stored once and changed small.
//
// Every tensor is cut into chunks of whole elements, at most `chunk_bytes` each. A chunk is kept
// under its content address, `chunks/<SHA-256 of its raw bytes>`, so a chunk that did not change
// is stored once wherever it sits. A new chunk is stored as a delta (chunk_codec.h) against the
// parent version's chunk at the same place of the same tensor (same name, dtype and shape),
// unless that base is already `max_chain` deltas deep: then it starts a new chain, as a delta
// against the whole chunk the base's chain starts from (or whole, where that is smaller), so any
// pull decodes at most max_chain + 1 chunks for one. Every pulled chunk is checked against its
// address. A push hashes, encodes and stores chunks on `threads` threads, taking the delta bases
// it stored last from a cache (chunk_cache.h) instead of decoding them again; a pull reads and
// decodes chunks on `threads` threads, each straight into its place in the tensor.
//
// The WeightManifest is what a version records (the registry keeps it in its metadata): per
// tensor its dtype, shape, chunk list and an identity, the SHA-256 of its chunks' addresses (two
// tensors with the same identity hold the same bytes).
//
// Crash safety: each chunk is one object put whole, under the address of its content, in groups
// made durable together (at most 64 chunks and 64 MiB: a folder pays its fsyncs per group, not
// per chunk); a push killed halfway leaves only complete chunks, those of the groups it finished,
// which the rerun finds and does not write again.
// Thread-safety: a WeightStore's only mutable state is its thread-safe cache; share it across
// threads.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "models/safetensors.h"
#include "registry/chunk_cache.h"
#include "storage/object_store.h"

namespace reel::registry {

struct ChunkHeader;  // chunk_codec.h
struct ChunkEncodeOptions;

struct ChunkRef {
  std::string sha256;  // address: SHA-256 of the raw bytes, 64 hex digits
  uint64_t size = 0;   // raw bytes
  int depth = 0;       // how many deltas its read decodes (0: stored whole)
};

struct TensorEntry {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string id;  // SHA-256 of the chunks' addresses, in order
  std::vector<ChunkRef> chunks;
  uint64_t bytes() const;        // its chunks' raw bytes
  uint64_t shape_bytes() const;  // what its dtype and shape need (0 for an unknown dtype)
};

struct WeightManifest {
  std::map<std::string, TensorEntry> tensors;
  std::map<std::string, std::string> metadata;  // the safetensors file's __metadata__
};

// Whether `s` is a chunk address: 64 lower-case hex digits.
bool IsChunkAddress(std::string_view s);

std::string ManifestToJson(const WeightManifest& manifest);
// The same as a JSON value, for documents that embed a manifest (views.h, the upload of
// service.h) without printing and parsing it again.
nlohmann::json ManifestJson(const WeightManifest& manifest);
// Errors: DataLoss naming `what` and the field for anything malformed.
Result<WeightManifest> ManifestFromJson(std::string_view text, std::string_view what);
Result<WeightManifest> ManifestFromJsonValue(const nlohmann::json& doc, std::string_view what);

struct WeightStoreOptions {
  uint64_t chunk_bytes = 4 << 20;  // at most this many raw bytes per chunk (whole elements)
  int max_chain = 8;               // deltas in a row before a chain starts again (0: none)
  int zstd_level = 1;
  bool compress = true;  // false: chunks stored as they are (no zstd, no deltas, none cached)
  int threads = 0;       // threads a push or a pull works on (0: one per core)
  // The raw chunks of the last pushes, the likely delta bases of the next (chunk_cache.h); null:
  // a cache of kDefaultBaseCacheBytes of the store's own, in memory only (a folder registry
  // gives its store one that persists in the folder's cache/bases). Capacity 0 keeps none.
  std::shared_ptr<ChunkCache> base_cache;
};

// Two versions of a 126 MB model (R(2+1)D-18): the one pushed last and the one being pushed.
inline constexpr uint64_t kDefaultBaseCacheBytes = 256ull << 20;

struct PushStats {
  uint64_t raw_bytes = 0;     // the tensors' bytes
  uint64_t stored_bytes = 0;  // bytes of the chunks this push wrote
  int chunks = 0;             // chunks in the version
  int chunks_written = 0;     // of which new: not in the store before
  int deltas_written = 0;     // of which stored as deltas
  // Sent over the network (remote.h: only chunks the server lacked); 0 in-process.
  int chunks_uploaded = 0;
  uint64_t uploaded_bytes = 0;
};

// `data` (whole elements of `width` bytes) cut into chunks of at most `chunk_bytes` raw bytes,
// whole elements each: how the store cuts a tensor, and how a client that sends only missing
// chunks (remote.cc) cuts it the same way.
std::vector<std::string_view> SplitIntoChunks(std::string_view data, int width,
                                              uint64_t chunk_bytes);

// The manifest a push of `file` records, computed without a store (every depth 0), its chunks
// hashed on `threads` threads (0: one per core): where a push starts, and what a client that
// sends only the chunks a server lacks (remote.cc) announces. Errors: InvalidArgument for a
// dtype safetensors does not know or chunk_bytes under 8.
Result<WeightManifest> DescribeChunks(const models::SafetensorsFile& file, uint64_t chunk_bytes,
                                      size_t threads = 0);

class WeightStore {
 public:
  struct PushPiece;  // one chunk of a push (weight_store.cc)
  struct PullPiece;  // one chunk of a pull (weight_pull.cc)

  // Chunks live under `prefix` ("" or ending in '/') of `store`.
  WeightStore(std::shared_ptr<storage::ObjectStore> store, std::string prefix,
              WeightStoreOptions options = {});

  // Stores the tensors of `file`, as deltas against `parent` (may be null) where it has the same
  // tensor. Errors: InvalidArgument for bad options or a dtype safetensors does not know; the
  // store's errors.
  Result<WeightManifest> Push(const models::SafetensorsFile& file, const WeightManifest* parent,
                              PushStats* stats = nullptr) const;

  // The tensors, bit-exact. A chunk still in the base cache (a recent push's) is taken from
  // there while the store holds it, checked against its address, instead of decoding its chain.
  // Errors: DataLoss naming the tensor and chunk for a missing chunk, a damaged one (decoded:
  // not in the cache), or one whose content does not match its address; the store's other
  // errors.
  Result<models::SafetensorsFile> Pull(const WeightManifest& manifest) const {
    return Assemble(manifest, {});
  }
  // Pull, written to `out` as the safetensors file WriteSafetensors makes of it, in order while
  // the chunks decode: the file is in memory once, and its writes overlap the decoding. `out` is
  // not closed (its Close publishes the file). Errors: as Pull; InvalidArgument for a dtype
  // safetensors does not know; out's.
  Status PullTo(const WeightManifest& manifest, storage::ObjectWriter& out) const;
  // Pull, taking the chunks in `given` (raw bytes by address, already checked by the caller)
  // from the caller instead of the store: the server rebuilds an upload that sent only the
  // chunks it lacked (service.cc).
  Result<models::SafetensorsFile> Assemble(
      const WeightManifest& manifest, const std::map<std::string, std::string_view>& given) const;

  uint64_t chunk_bytes() const { return options_.chunk_bytes; }
  const ChunkCache& base_cache() const { return *options_.base_cache; }
  // Keeps the last pushes' chunks for the next process (ChunkCache::Persist).
  Status PersistBaseCache() const { return options_.base_cache->Persist(); }

  // Whether a chunk is stored under `sha256` (reads its header only).
  Result<bool> HasChunk(const std::string& sha256) const;

  std::string ChunkKey(std::string_view sha256) const {
    return prefix_ + "chunks/" + std::string(sha256);
  }

  // For garbage collection (registry_gc.cc): every stored chunk, keyed by its address (the key
  // after ".../chunks/"); the address a stored delta chunk names as its base ("" for a full
  // chunk), reading only its header; and removal.
  Result<std::map<std::string, storage::ObjectInfo>> ListChunks() const;
  Result<std::string> StoredBase(std::string_view sha256) const;
  Status DeleteChunk(std::string_view sha256) const;

 private:
  Result<std::vector<PushPiece>> PlanPush(const models::SafetensorsFile& file,
                                          const WeightManifest* parent,
                                          WeightManifest* described) const;
  Status StoreGroups(std::vector<PushPiece>& pieces, const std::vector<size_t>& storing) const;
  Status PushChunk(PushPiece& piece, storage::PutBatch& batch) const;
  Status PutStored(PushPiece& piece, storage::PutBatch& batch) const;
  Result<std::vector<PullPiece>> PlanPull(
      const WeightManifest& manifest,
      const std::function<char*(const std::string& name, const TensorEntry& t)>& place) const;
  Status PullInto(const WeightManifest& manifest, const models::SafetensorsLayout& layout,
                  char* file, storage::ObjectWriter& out) const;
  Status FillPiece(const PullPiece& piece,
                   const std::map<std::string, std::string_view>& given) const;
  bool FillFromCache(const PullPiece& piece) const;
  Result<std::string> DeltaOnParent(PushPiece& piece, const ChunkEncodeOptions& encode) const;
  Result<std::string> DeltaOnRoot(PushPiece& piece, const ChunkEncodeOptions& encode) const;
  Result<std::string> ChainRoot(const std::string& sha256, const std::string& what) const;
  struct BaseBytes {
    ChunkBytes raw;
    ChunkBytes before;  // the base's base, when at hand
  };
  Result<BaseBytes> ReadDeltaBase(const ChunkRef& base, const std::string& what) const;
  size_t Threads() const;
  enum class Verify { kAddress, kNone };
  Status ReadChunk(const std::string& sha256, const std::string& what, Verify verify,
                   std::string* raw, std::string* before = nullptr) const;
  Status DecodeFetched(const std::vector<std::pair<std::string, std::string>>& chain,
                       const std::string& sha256, const std::string& what, Verify verify, char* out,
                       size_t size, char* before = nullptr) const;
  Result<ChunkHeader> StoredHeader(const std::string& sha256, const std::string& what) const;
  Result<int> StoredDepth(const std::string& sha256, const std::string& what) const;
  enum class Fetch { kWhole, kHeaders };
  Result<std::vector<std::pair<std::string, std::string>>> FetchChain(
      const std::string& sha256, const std::string& what, Fetch fetch = Fetch::kWhole) const;

  std::shared_ptr<storage::ObjectStore> store_;
  std::string prefix_;
  WeightStoreOptions options_;
};

}  // namespace reel::registry
