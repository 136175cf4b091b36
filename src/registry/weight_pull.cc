// A pull: every chunk of a version decoded straight into its place, into tensors (Assemble) or
// into the safetensors file's bytes, written while the rest decode (PullTo).
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/allocator.h"
#include "base/hash.h"
#include "base/sync_point.h"
#include "base/thread_pool.h"
#include "registry/chunk_cache.h"
#include "registry/weight_store.h"

namespace reel::registry {

struct WeightStore::PullPiece {
  std::string what;  // "tensor 'x' chunk 3", for errors
  const ChunkRef* chunk;
  char* out;  // where its raw bytes go
};

// Checks each tensor's chunks against its shape, then gives each chunk its place: `place`
// returns where a tensor's bytes start.
Result<std::vector<WeightStore::PullPiece>> WeightStore::PlanPull(
    const WeightManifest& manifest,
    const std::function<char*(const std::string& name, const TensorEntry& t)>& place) const {
  std::vector<PullPiece> pieces;
  for (const auto& [name, t] : manifest.tensors) {
    if (t.bytes() != t.shape_bytes()) {
      return DataLossError("tensor '" + name + "': its chunks hold " + std::to_string(t.bytes()) +
                           " bytes, not what its shape needs");
    }
    char* out = place(name, t);
    for (size_t i = 0; i < t.chunks.size(); ++i) {
      pieces.push_back({"tensor '" + name + "' chunk " + std::to_string(i), &t.chunks[i], out});
      out += t.chunks[i].size;
    }
  }
  return pieces;
}

// A chunk a recent push kept (the version just registered, its parent: ChunkCache) is copied
// from the cache instead of decoding its chain of up to max_chain + 1 links, when the store still
// holds it and the copy hashes to its address; else the chain decodes as ever.
bool WeightStore::FillFromCache(const PullPiece& p) const {
  ChunkBytes cached = options_.base_cache->Find(p.chunk->sha256);
  if (cached == nullptr || cached->size() != p.chunk->size) return false;
  Result<bool> stored = HasChunk(p.chunk->sha256);
  if (!stored.ok() || !*stored) return false;  // the chain's fetch names what is wrong
  std::memcpy(p.out, cached->data(), cached->size());
  return Sha256Hex(std::string_view(p.out, p.chunk->size)) == p.chunk->sha256;
}

Status WeightStore::FillPiece(const PullPiece& p,
                              const std::map<std::string, std::string_view>& given) const {
  auto it = given.find(p.chunk->sha256);
  if (it == given.end()) {
    if (FillFromCache(p)) return Status::Ok();
    REEL_ASSIGN_OR_RETURN(auto chain, FetchChain(p.chunk->sha256, p.what));
    return DecodeFetched(chain, p.chunk->sha256, p.what, Verify::kAddress, p.out, p.chunk->size);
  }
  if (it->second.size() != p.chunk->size) {
    return InvalidArgumentError(p.what + ": given " + std::to_string(it->second.size()) +
                                " bytes, its manifest says " + std::to_string(p.chunk->size));
  }
  std::memcpy(p.out, it->second.data(), it->second.size());
  return Status::Ok();
}

// Every tensor is laid out at its full size first, so that each chunk decodes straight into its
// place, on `threads` threads: no buffer per chunk and no copy after.
Result<models::SafetensorsFile> WeightStore::Assemble(
    const WeightManifest& manifest, const std::map<std::string, std::string_view>& given) const {
  models::SafetensorsFile file;
  file.metadata = manifest.metadata;
  REEL_ASSIGN_OR_RETURN(std::vector<PullPiece> pieces,
                        PlanPull(manifest, [&](const std::string& name, const TensorEntry& t) {
                          models::TensorBytes& tensor = file.tensors[name];
                          tensor = {t.dtype, t.shape, std::string(t.shape_bytes(), '\0')};
                          return tensor.data.data();
                        }));
  REEL_RETURN_IF_ERROR(
      ParallelFor(Threads(), pieces.size(), [&](size_t i) { return FillPiece(pieces[i], given); }));
  return file;
}

namespace {

// Hands a buffer to a writer front to back, on a thread of its own, while other threads fill
// its pieces in any order: the decoding threads never wait for the disk (the store's write-behind
// blocks a write now and then for as long as a chunk takes to decode).
class FrontWriter {
 public:
  // Piece i ends at byte ends[i] of `data`; each piece's write starts where the one before ends
  // (the first at 0), so bytes between pieces go with the piece after them.
  FrontWriter(const char* data, std::vector<uint64_t> ends, storage::ObjectWriter& out)
      : data_(data), ends_(std::move(ends)), done_(ends_.size(), false), out_(out) {
    thread_ = std::thread([this] { WriteAsDone(); });
  }
  ~FrontWriter() { Stop(/*abandon=*/true); }

  // Piece i is filled. Returns the writer's error, if it had one, so the filling stops.
  Status Done(size_t i) {
    std::lock_guard lock(mu_);
    done_[i] = true;
    if (i == next_) ready_.notify_one();
    return error_;
  }

  // After every piece's Done: waits for their writes, then writes the bytes after the last piece
  // (all of them when there was none).
  Status Finish(uint64_t size) {
    Stop(/*abandon=*/false);
    if (!error_.ok() || size == written_) return error_;
    return out_.Write(std::string_view(data_ + written_, size - written_));
  }

 private:
  void WriteAsDone() {
    std::unique_lock lock(mu_);
    while (true) {
      ready_.wait(lock, [&] { return stop_ || (next_ < done_.size() && done_[next_]); });
      size_t end = next_;
      while (end < done_.size() && done_[end]) ++end;
      if (end == next_ || abandon_) return;  // stopped, with nothing left to write
      const uint64_t from = written_, to = ends_[end - 1];
      lock.unlock();
      Status status = out_.Write(std::string_view(data_ + from, to - from));
      lock.lock();
      next_ = end;
      written_ = to;
      error_ = std::move(status);
      if (!error_.ok()) return;
    }
  }

  void Stop(bool abandon) {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      abandon_ = abandon;
    }
    ready_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

  const char* data_;
  const std::vector<uint64_t> ends_;
  std::mutex mu_;
  std::condition_variable ready_;  // the first piece not written is done, or stop_
  std::vector<bool> done_;
  size_t next_ = 0;       // the first piece not written
  uint64_t written_ = 0;  // bytes written
  bool stop_ = false;
  bool abandon_ = false;  // stop without writing what is done
  Status error_;
  storage::ObjectWriter& out_;
  std::thread thread_;
};

// The file's bytes outside its tensors: the header, and zeros between the tensors.
void FillOutsideTensors(const models::SafetensorsLayout& layout, const WeightManifest& manifest,
                        char* file) {
  std::copy(layout.head.begin(), layout.head.end(), file);
  uint64_t at = layout.head.size();
  for (const auto& [name, t] : manifest.tensors) {
    const uint64_t begin = layout.offsets.at(name);
    std::memset(file + at, 0, begin - at);
    at = begin + t.shape_bytes();
  }
}

}  // namespace

// PullTo's work, into `file` (layout.file_size bytes).
Status WeightStore::PullInto(const WeightManifest& manifest,
                             const models::SafetensorsLayout& layout, char* file,
                             storage::ObjectWriter& out) const {
  REEL_ASSIGN_OR_RETURN(std::vector<PullPiece> pieces,
                        PlanPull(manifest, [&](const std::string& name, const TensorEntry&) {
                          return file + layout.offsets.at(name);
                        }));
  FillOutsideTensors(layout, manifest, file);
  std::vector<uint64_t> ends;
  ends.reserve(pieces.size());
  for (const PullPiece& p : pieces) ends.push_back(p.out + p.chunk->size - file);
  FrontWriter writer(file, std::move(ends), out);
  REEL_RETURN_IF_ERROR(ParallelFor(Threads(), pieces.size(), [&](size_t i) -> Status {
    REEL_SYNC_POINT("WeightStore::PullTo:Filling");
    REEL_RETURN_IF_ERROR(FillPiece(pieces[i], {}));
    return writer.Done(i);
  }));
  return writer.Finish(layout.file_size);
}

Status WeightStore::PullTo(const WeightManifest& manifest, storage::ObjectWriter& out) const {
  std::map<std::string, models::TensorSpec> specs;
  for (const auto& [name, t] : manifest.tensors) specs[name] = {t.dtype, t.shape};
  REEL_ASSIGN_OR_RETURN(models::SafetensorsLayout layout,
                        models::LayOutSafetensors(specs, manifest.metadata));
  // The file's bytes, filled in place: AppendInPlace neither zeroes them first (the decodes write
  // every tensor byte, FillOutsideTensors the rest) nor faults them in 4 KiB at a time.
  std::string file;
  Status status;
  AppendInPlace(&file, layout.file_size, [&](char* data, size_t size) -> size_t {
    status = PullInto(manifest, layout, data, out);
    return status.ok() ? size : 0;
  });
  return status;
}

}  // namespace reel::registry
