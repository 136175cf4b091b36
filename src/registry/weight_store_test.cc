#include "registry/weight_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/random.h"
#include "base/sync_point.h"
#include "registry/chunk_codec.h"
#include "registry/registry_test_util.h"
#include "storage/listing.h"
#include "storage/memory_store.h"
#include "testing/status_matchers.h"

namespace reel::registry {
namespace {

using models::SafetensorsFile;
using models::TensorBytes;

class WeightStoreTest : public ::testing::Test {
 protected:
  // The tests' pulls decode what their pushes stored, as another process's would: a pull of the
  // version just pushed copies it from the base cache instead, in the tests that give one.
  static WeightStoreOptions Options() {
    WeightStoreOptions o;
    o.chunk_bytes = 10000;  // conv.weight: 3 chunks, the last shorter
    return Uncached(o);
  }
  static WeightStoreOptions Uncached(WeightStoreOptions o) {
    o.base_cache = std::make_shared<ChunkCache>(0);
    return o;
  }
  static WeightStoreOptions Cached(WeightStoreOptions o) {
    o.base_cache = std::make_shared<ChunkCache>(kDefaultBaseCacheBytes);
    return o;
  }
  std::shared_ptr<storage::MemoryStore> mem_ = std::make_shared<storage::MemoryStore>();
  WeightStore store_{mem_, "weights/", Options()};
};

TEST_F(WeightStoreTest, PushThenPullIsBitExact) {
  const SafetensorsFile model = Model(1);
  PushStats stats;
  ASSERT_OK_AND_ASSIGN(WeightManifest m, store_.Push(model, nullptr, &stats));
  EXPECT_EQ(m.tensors.at("conv.weight").chunks.size(), 3u);
  EXPECT_TRUE(m.tensors.at("empty").chunks.empty());
  EXPECT_EQ(stats.chunks, 6);
  EXPECT_EQ(stats.chunks_written, 6);
  EXPECT_EQ(stats.deltas_written, 0);
  EXPECT_LT(stats.stored_bytes, stats.raw_bytes);
  ASSERT_OK_AND_ASSIGN(SafetensorsFile back, store_.Pull(m));
  ExpectSameFile(back, model);
}

TEST_F(WeightStoreTest, AnUnchangedVersionWritesNothing) {
  ASSERT_OK_AND_ASSIGN(WeightManifest first, store_.Push(Model(1), nullptr));
  const uint64_t requests = mem_->request_count();
  PushStats stats;
  ASSERT_OK_AND_ASSIGN(WeightManifest second, store_.Push(Model(1), &first, &stats));
  EXPECT_EQ(stats.chunks_written, 0);
  EXPECT_EQ(stats.stored_bytes, 0u);
  EXPECT_EQ(mem_->request_count(), requests) << "an unchanged chunk needs no request";
  EXPECT_EQ(ManifestToJson(second), ManifestToJson(first));
}

TEST_F(WeightStoreTest, AHeadOnlyFineTuneStoresOnlyTheHead) {
  ASSERT_OK_AND_ASSIGN(WeightManifest parent, store_.Push(Model(1), nullptr));
  SafetensorsFile tuned = Model(1);
  tuned.tensors["fc.weight"] = Moved(tuned.tensors["fc.weight"], 0.05, 9);
  PushStats stats;
  ASSERT_OK_AND_ASSIGN(WeightManifest child, store_.Push(tuned, &parent, &stats));
  EXPECT_EQ(stats.chunks_written, 1);
  EXPECT_LE(stats.stored_bytes, 8 * 16 * 4 + 100u);
  EXPECT_EQ(child.tensors.at("conv.weight").id, parent.tensors.at("conv.weight").id);
  EXPECT_NE(child.tensors.at("fc.weight").id, parent.tensors.at("fc.weight").id);
  ASSERT_OK_AND_ASSIGN(SafetensorsFile back, store_.Pull(child));
  ExpectSameFile(back, tuned);
}

TEST_F(WeightStoreTest, AFullFineTuneIsStoredAsSmallDeltas) {
  SafetensorsFile base;
  base.tensors["w"] = Floats({250000}, 3);  // 1 MB
  WeightStore store(mem_, "", Uncached({}));
  ASSERT_OK_AND_ASSIGN(WeightManifest parent, store.Push(base, nullptr));
  SafetensorsFile tuned = base;
  tuned.tensors["w"] = Moved(tuned.tensors["w"], 1e-3, 4);
  PushStats stats;
  ASSERT_OK_AND_ASSIGN(WeightManifest child, store.Push(tuned, &parent, &stats));
  EXPECT_EQ(stats.deltas_written, stats.chunks);
  EXPECT_LT(stats.stored_bytes, 0.65 * stats.raw_bytes) << stats.stored_bytes;
  ASSERT_OK_AND_ASSIGN(SafetensorsFile back, store.Pull(child));
  ExpectSameFile(back, tuned);
}

// At max_chain deltas a chunk starts a new chain: a delta against the old chain's whole chunk at
// depth 1 (far smaller than a whole copy for a run's checkpoints), so no pull decodes more.
TEST_F(WeightStoreTest, DeltaChainsAreBoundedAndStartAgainFromTheirWholeChunk) {
  WeightStoreOptions o = Options();
  o.max_chain = 2;
  WeightStore store(mem_, "", o);
  SafetensorsFile model = Model(1);
  std::vector<WeightManifest> versions;
  std::vector<SafetensorsFile> files;
  const int expected_depth[] = {0, 1, 2, 1, 2, 1, 2};
  for (int v = 0; v < 7; ++v) {
    if (v > 0) model.tensors["conv.weight"] = Moved(model.tensors["conv.weight"], 1e-3, 100 + v);
    PushStats stats;
    ASSERT_OK_AND_ASSIGN(WeightManifest m,
                         store.Push(model, v > 0 ? &versions.back() : nullptr, &stats));
    const ChunkRef& chunk = m.tensors.at("conv.weight").chunks[0];
    EXPECT_EQ(chunk.depth, expected_depth[v]) << "version " << v;
    if (v > 0) {
      EXPECT_GT(stats.chunks_written, 0) << "version " << v;
      EXPECT_EQ(stats.deltas_written, stats.chunks_written) << "version " << v;
    }
    if (v == 3 || v == 5) {  // a new chain, on version 0's whole chunk
      ASSERT_OK_AND_ASSIGN(std::string base, store.StoredBase(chunk.sha256));
      EXPECT_EQ(base, versions[0].tensors.at("conv.weight").chunks[0].sha256) << "version " << v;
    }
    versions.push_back(m);
    files.push_back(model);
  }
  for (size_t v = 0; v < versions.size(); ++v) {
    ASSERT_OK_AND_ASSIGN(SafetensorsFile back, store.Pull(versions[v]));
    ExpectSameFile(back, files[v]);
  }
}

// A chunk that has nothing in common with its chain's whole chunk is stored whole at the bound.
TEST_F(WeightStoreTest, AChunkUnlikeItsChainsWholeChunkIsStoredWholeAtTheBound) {
  WeightStoreOptions o = Options();
  o.max_chain = 1;
  WeightStore store(mem_, "", o);
  SafetensorsFile model;
  model.tensors["w"] = Floats({4096}, 7);
  ASSERT_OK_AND_ASSIGN(WeightManifest v0, store.Push(model, nullptr));
  model.tensors["w"] = Moved(model.tensors["w"], 1e-3, 8);
  ASSERT_OK_AND_ASSIGN(WeightManifest v1, store.Push(model, &v0));
  EXPECT_EQ(v1.tensors.at("w").chunks[0].depth, 1);
  model.tensors["w"] = Floats({4096}, 9);  // rewritten: random again
  PushStats stats;
  ASSERT_OK_AND_ASSIGN(WeightManifest v2, store.Push(model, &v1, &stats));
  EXPECT_EQ(v2.tensors.at("w").chunks[0].depth, 0);
  EXPECT_EQ(stats.deltas_written, 0);
  ASSERT_OK_AND_ASSIGN(SafetensorsFile back, store.Pull(v2));
  ExpectSameFile(back, model);
}

TEST_F(WeightStoreTest, DamagedOrMissingChunksAreDataLossNamingTheTensor) {
  ASSERT_OK_AND_ASSIGN(WeightManifest m, store_.Push(Model(1), nullptr));
  const WeightStore reader(mem_, "weights/", Options());  // another process
  const ChunkRef& bias = m.tensors.at("conv.bias").chunks[0];
  // Other bytes under the address: a valid chunk, but not this one.
  ASSERT_OK_AND_ASSIGN(std::string other, EncodeChunk(std::string(64, 'x'), 4, nullptr));
  ASSERT_OK(mem_->Put(store_.ChunkKey(bias.sha256), other));
  Result<SafetensorsFile> swapped = reader.Pull(m);
  EXPECT_STATUS(swapped, StatusCode::kDataLoss);
  EXPECT_NE(swapped.status().message().find("conv.bias"), std::string::npos)
      << swapped.status().message();
  ASSERT_OK(mem_->Delete(store_.ChunkKey(bias.sha256)));
  // Missing from the store: DataLoss even where the pushing store still has it in its cache.
  const WeightStore* const both[] = {&reader, &store_};
  for (const WeightStore* s : both) {
    Result<SafetensorsFile> missing = s->Pull(m);
    EXPECT_STATUS(missing, StatusCode::kDataLoss);
    EXPECT_NE(missing.status().message().find("missing"), std::string::npos);
  }
  const ChunkRef& fc = m.tensors.at("fc.weight").chunks[0];
  ASSERT_OK_AND_ASSIGN(std::string enc, mem_->Get(store_.ChunkKey(fc.sha256)));
  enc[enc.size() / 2] = static_cast<char>(enc[enc.size() / 2] ^ 8);
  ASSERT_OK(mem_->Put(store_.ChunkKey(fc.sha256), enc));
  EXPECT_STATUS(reader.Pull(m), StatusCode::kDataLoss);
}

// Three versions of one tensor "w", each a small move (seeded from `seed`) of the one before, so
// the last is a chain of two deltas: their manifests and the tensor's bytes.
struct PushedChain {
  std::vector<WeightManifest> versions;
  std::vector<std::string> raws;
};
Result<PushedChain> PushChainOfThree(const WeightStore& store, uint64_t seed) {
  SafetensorsFile model;
  model.tensors["w"] = Floats({1000}, 5);
  PushedChain chain;
  for (int v = 0; v < 3; ++v) {
    if (v > 0) model.tensors["w"] = Moved(model.tensors["w"], 1e-3, seed + v);
    REEL_ASSIGN_OR_RETURN(WeightManifest m,
                          store.Push(model, v > 0 ? &chain.versions.back() : nullptr));
    chain.versions.push_back(std::move(m));
    chain.raws.push_back(model.tensors["w"].data);
  }
  return chain;
}

// The pulls of the versions above the damaged middle link are DataLoss whose message has `says`.
void ExpectBothPullsName(const WeightStore& store, const PushedChain& chain,
                         const std::string& says) {
  for (int v : {1, 2}) {
    Result<SafetensorsFile> r = store.Pull(chain.versions[v]);
    EXPECT_STATUS(r, StatusCode::kDataLoss);
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  }
}

TEST_F(WeightStoreTest, ADamagedLinkInADeltaChainIsNamed) {
  WeightStore store(mem_, "", Uncached({}));
  ASSERT_OK_AND_ASSIGN(const PushedChain chain, PushChainOfThree(store, 200));
  const std::vector<WeightManifest>& versions = chain.versions;
  const std::vector<std::string>& raws = chain.raws;
  const ChunkRef middle = versions[1].tensors.at("w").chunks[0];
  ASSERT_EQ(versions[2].tensors.at("w").chunks[0].depth, 2);
  // A well-formed delta against the right base, but of other bytes: only the address check
  // can tell.
  const DeltaBase base{raws[0], 0, {}, {}};
  ASSERT_OK_AND_ASSIGN(std::string other, EncodeChunk(raws[2], 4, &base));
  ASSERT_OK(mem_->Put(store.ChunkKey(middle.sha256), other));
  ExpectBothPullsName(store, chain, "chunk " + middle.sha256 + " holds other bytes");
  ASSERT_OK_AND_ASSIGN(SafetensorsFile first, store.Pull(versions[0]));
  EXPECT_EQ(first.tensors.at("w").data, raws[0]);
}

// A link whose header no longer fits the links below it (its raw size damaged) is named too,
// as DataLoss: not the InvalidArgument its decode against a base of another size gives.
TEST_F(WeightStoreTest, ALinkThatNoLongerFitsItsChainIsNamed) {
  WeightStore store(mem_, "", Uncached({}));
  ASSERT_OK_AND_ASSIGN(const PushedChain chain, PushChainOfThree(store, 300));
  const ChunkRef middle = chain.versions[1].tensors.at("w").chunks[0];
  ASSERT_OK_AND_ASSIGN(std::string enc, mem_->Get(store.ChunkKey(middle.sha256)));
  enc[8] = static_cast<char>(enc[8] + 4);  // the raw size's low byte: one element more
  ASSERT_OK(mem_->Put(store.ChunkKey(middle.sha256), enc));
  ExpectBothPullsName(store, chain, "chunk " + middle.sha256 + " is damaged");
}

TEST_F(WeightStoreTest, WithCompressionOffChunksAreStoredAsTheyAre) {
  WeightStoreOptions off = Options();
  off.compress = false;
  WeightStore raw_store(mem_, "", off), store(mem_, "", Options());
  PushStats stats;
  ASSERT_OK_AND_ASSIGN(WeightManifest first, raw_store.Push(Model(1), nullptr, &stats));
  EXPECT_EQ(stats.stored_bytes, stats.raw_bytes + 16u * stats.chunks_written);
  SafetensorsFile tuned = Model(1);
  tuned.tensors["conv.weight"] = Moved(tuned.tensors["conv.weight"], 1e-3, 5);
  ASSERT_OK_AND_ASSIGN(WeightManifest second, raw_store.Push(tuned, &first, &stats));
  EXPECT_EQ(stats.deltas_written, 0) << "no deltas without compression";
  ASSERT_OK_AND_ASSIGN(SafetensorsFile back, store.Pull(second));
  ExpectSameFile(back, tuned);
  // Compression back on: deltas against the stored chunks.
  tuned.tensors["conv.weight"] = Moved(tuned.tensors["conv.weight"], 1e-3, 6);
  ASSERT_OK_AND_ASSIGN(WeightManifest third, store.Push(tuned, &second, &stats));
  EXPECT_EQ(stats.deltas_written, 3);
  ASSERT_OK_AND_ASSIGN(back, raw_store.Pull(third));
  ExpectSameFile(back, tuned);
}

TEST_F(WeightStoreTest, PullsOnManyThreadsKeepTheOrder) {
  const SafetensorsFile model = Model(2);
  for (int threads : {1, 3}) {
    WeightStoreOptions o = Uncached({});
    o.chunk_bytes = 256;  // conv.weight: over a hundred chunks
    o.threads = threads;
    WeightStore store(mem_, "t" + std::to_string(threads) + "/", o);
    ASSERT_OK_AND_ASSIGN(WeightManifest m, store.Push(model, nullptr));
    ASSERT_GT(m.tensors.at("conv.weight").chunks.size(), 100u);
    ASSERT_OK_AND_ASSIGN(SafetensorsFile back, store.Pull(m));
    ExpectSameFile(back, model);
  }
}

// Keeps what it is given (the pull's writer thread writes); its write number `fail_at` (from 0)
// fails instead.
class KeepsWrites : public storage::ObjectWriter {
 public:
  explicit KeepsWrites(int fail_at = -1) : fail_at_(fail_at) {}
  Status Write(std::string_view data) override {
    std::lock_guard lock(mu_);
    wrote_.notify_all();
    if (writes_++ == fail_at_) return UnavailableError("the disk is full");
    bytes_.append(data);
    return Status::Ok();
  }
  Status Close() override {
    closed_ = true;
    return Status::Ok();
  }
  // Whether a write came within a minute: a guard against a hang, not a timing.
  bool WaitForAWrite() {
    std::unique_lock lock(mu_);
    return wrote_.wait_for(lock, std::chrono::minutes(1), [&] { return writes_ > 0; });
  }
  // Once the pull has returned:
  const std::string& bytes() const { return bytes_; }
  int writes() const { return writes_; }
  bool closed() const { return closed_; }

 private:
  std::mutex mu_;
  std::condition_variable wrote_;
  std::string bytes_;
  int writes_ = 0;
  bool closed_ = false;
  int fail_at_;
};

class PullToTest : public WeightStoreTest {
 protected:
  void TearDown() override { SyncPoint::Get().Reset(); }
};

// The version just pushed is pulled from the push's cache, not decoded: a stored chunk damaged
// since (which another process's pull reports) does not reach it. A cache entry that does not
// hash to its address is never used.
TEST_F(PullToTest, TheVersionJustPushedIsCopiedFromTheBaseCache) {
  const WeightStore store(mem_, "", Cached(Options()));
  ASSERT_OK_AND_ASSIGN(WeightManifest m1, store.Push(Model(1), nullptr));
  SafetensorsFile moved = Model(1);
  moved.tensors["conv.weight"] = Moved(moved.tensors["conv.weight"], 1e-3, 7);
  ASSERT_OK_AND_ASSIGN(WeightManifest m2, store.Push(moved, &m1));
  const ChunkRef& w = m2.tensors.at("conv.weight").chunks[1];
  ASSERT_EQ(w.depth, 1) << "a delta: its pull would decode a chain";
  ASSERT_OK_AND_ASSIGN(std::string other, EncodeChunk(std::string(w.size, 'x'), 4, nullptr));
  ASSERT_OK(mem_->Put(store.ChunkKey(w.sha256), other));
  ASSERT_OK_AND_ASSIGN(SafetensorsFile back, store.Pull(m2));
  ExpectSameFile(back, moved);
  KeepsWrites out;
  ASSERT_OK(store.PullTo(m2, out));
  ASSERT_OK_AND_ASSIGN(std::string expected, models::WriteSafetensors(moved));
  EXPECT_EQ(out.bytes(), expected);
  const WeightStore reader(mem_, "", Options());
  EXPECT_STATUS(reader.Pull(m2), StatusCode::kDataLoss);

  // Other bytes cached under a sound chunk's address: the chain decodes instead.
  WeightStoreOptions lying = Cached(Options());
  const ChunkRef& bias = m1.tensors.at("conv.bias").chunks[0];
  lying.base_cache->Insert(bias.sha256, std::string(bias.size, 'y'));
  ASSERT_NE(lying.base_cache->Find(bias.sha256), nullptr);
  ASSERT_OK_AND_ASSIGN(back, WeightStore(mem_, "", lying).Pull(m1));
  ExpectSameFile(back, Model(1));
}

TEST_F(PullToTest, WritesTheSafetensorsFileWhileChunksDecodeOutOfOrder) {
  SafetensorsFile model = Model(2);
  model.tensors["odd"] = TensorBytes{"U8", {3}, "abc"};  // the tensor after it starts 5 bytes on
  SafetensorsFile tuned = model;
  tuned.tensors["conv.weight"] = Moved(tuned.tensors["conv.weight"], 1e-3, 9);
  for (int threads : {1, 3}) {
    WeightStoreOptions o = Uncached({});
    o.chunk_bytes = 256;  // over a hundred pieces, which threads finish in any order
    o.threads = threads;
    WeightStore store(mem_, "t" + std::to_string(threads) + "/", o);
    ASSERT_OK_AND_ASSIGN(WeightManifest first, store.Push(model, nullptr));
    PushStats stats;
    ASSERT_OK_AND_ASSIGN(WeightManifest second, store.Push(tuned, &first, &stats));
    ASSERT_GT(stats.deltas_written, 100);
    for (const auto& [manifest, file] : {std::pair{&first, &model}, std::pair{&second, &tuned}}) {
      KeepsWrites out;
      ASSERT_OK(store.PullTo(*manifest, out));
      ASSERT_OK_AND_ASSIGN(std::string expected, models::WriteSafetensors(*file));
      EXPECT_TRUE(out.bytes() == expected) << threads << " threads: the file differs";
      EXPECT_FALSE(out.closed()) << "the caller's Close publishes the file";
    }
  }
}

TEST_F(PullToTest, TheFileIsWrittenBeforeTheLastChunkDecodes) {
  WeightStoreOptions o = Options();
  o.threads = 1;
  WeightStore store(mem_, "", o);
  ASSERT_OK_AND_ASSIGN(WeightManifest m, store.Push(Model(1), nullptr));
  KeepsWrites out;
  std::atomic<int> filling{0};
  bool written_before_the_last = false;
  SyncPoint& sp = SyncPoint::Get();
  sp.SetCallback("WeightStore::PullTo:Filling", [&] {
    if (++filling == 6) written_before_the_last = out.WaitForAWrite();  // Model(1): 6 chunks
  });
  sp.EnableProcessing();
  ASSERT_OK(store.PullTo(m, out));
  EXPECT_EQ(filling.load(), 6);
  EXPECT_TRUE(written_before_the_last);
  ASSERT_OK_AND_ASSIGN(std::string expected, models::WriteSafetensors(Model(1)));
  EXPECT_TRUE(out.bytes() == expected);
}

TEST_F(PullToTest, StopsAtAFailedWriteOrADamagedChunk) {
  WeightStoreOptions o = Options();
  o.threads = 2;
  WeightStore store(mem_, "", o);
  ASSERT_OK_AND_ASSIGN(WeightManifest m, store.Push(Model(1), nullptr));
  KeepsWrites full(/*fail_at=*/0);
  const Status failed = store.PullTo(m, full);
  EXPECT_STATUS(failed, StatusCode::kUnavailable);
  EXPECT_NE(failed.message().find("the disk is full"), std::string::npos) << failed.ToString();
  EXPECT_EQ(full.writes(), 1) << "no write after the one that failed";
  const ChunkRef& bias = m.tensors.at("conv.bias").chunks[0];
  ASSERT_OK_AND_ASSIGN(std::string other, EncodeChunk(std::string(64, 'x'), 4, nullptr));
  ASSERT_OK(mem_->Put(store.ChunkKey(bias.sha256), other));
  KeepsWrites out;
  const Status damaged = store.PullTo(m, out);
  EXPECT_STATUS(damaged, StatusCode::kDataLoss);
  EXPECT_NE(damaged.message().find("conv.bias"), std::string::npos) << damaged.ToString();
  EXPECT_FALSE(out.closed());
}

TEST_F(WeightStoreTest, AnInterruptedPushLeavesWholeChunksAndTheRerunWritesTheRest) {
  auto flaky = std::make_shared<StopsAfterPuts>(4);
  WeightStore store(flaky, "", Options());
  EXPECT_STATUS(store.Push(Model(1), nullptr), StatusCode::kUnavailable);
  flaky->allowed_ = 1000;
  PushStats stats;
  ASSERT_OK_AND_ASSIGN(WeightManifest m, store.Push(Model(1), nullptr, &stats));
  EXPECT_EQ(stats.chunks_written, 2) << "4 of the 6 chunks were already stored";
  ASSERT_OK_AND_ASSIGN(SafetensorsFile back, store.Pull(m));
  ExpectSameFile(back, Model(1));
}

// Every chunk object under `prefix`, by key.
std::map<std::string, std::string> Objects(storage::MemoryStore& store, const std::string& prefix) {
  std::map<std::string, std::string> out;
  Result<std::vector<storage::ObjectInfo>> all = storage::ListAll(store, prefix);
  EXPECT_OK(all.status());
  if (!all.ok()) return out;
  for (const storage::ObjectInfo& o : *all) out[o.key.substr(prefix.size())] = *store.Get(o.key);
  return out;
}

// Counts whole-object reads: a push reads one for each delta base it decodes from the store.
class CountsGets : public storage::MemoryStore {
 public:
  Result<std::string> Get(std::string_view key, storage::ObjectInfo* info) override {
    ++gets_;
    return MemoryStore::Get(key, info);
  }
  std::atomic<int> gets_{0};
};

// Records how many objects each commit of a batch made visible, and whether any Put came first.
class RecordsBatches : public storage::MemoryStore {
 public:
  std::unique_ptr<storage::PutBatch> NewBatch() override { return std::make_unique<Batch>(this); }
  std::vector<int> committed() {
    std::lock_guard<std::mutex> lock(mu_);
    return committed_;
  }

 private:
  class Batch : public storage::PutBatch {
   public:
    explicit Batch(RecordsBatches* store) : store_(store) {}
    Status Put(std::string_view key, std::string_view data) override {
      ++puts_;
      return store_->Put(key, data);
    }
    Status Commit() override {
      std::lock_guard<std::mutex> lock(store_->mu_);
      store_->committed_.push_back(puts_.exchange(0));
      return Status::Ok();
    }

   private:
    RecordsBatches* store_;
    std::atomic<int> puts_{0};
  };
  std::mutex mu_;
  std::vector<int> committed_;
};

// A tensor of `chunks` chunks of `chunk_bytes` each, every chunk different.
TensorBytes DistinctChunks(int chunks, uint64_t chunk_bytes) {
  TensorBytes t{"U8", {static_cast<int64_t>(chunks * chunk_bytes)}, ""};
  for (int i = 0; i < chunks; ++i) t.data += std::string(chunk_bytes, static_cast<char>(i));
  return t;
}

// A push's chunks are made durable in groups (one journal commit each on a folder): at most 64
// chunks, and at most 64 MiB of them, per group.
TEST_F(WeightStoreTest, ChunksAreStoredInGroupsOfAtMost64ChunksAnd64MiB) {
  auto store = std::make_shared<RecordsBatches>();
  WeightStoreOptions small = Options();
  small.chunk_bytes = 64;
  SafetensorsFile many;
  many.tensors["t"] = DistinctChunks(150, 64);
  PushStats stats;
  ASSERT_OK_AND_ASSIGN(WeightManifest m,
                       WeightStore(store, "a/", small).Push(many, nullptr, &stats));
  EXPECT_EQ(store->committed(), (std::vector<int>{64, 64, 22}));
  EXPECT_EQ(stats.chunks_written, 150);

  auto big_store = std::make_shared<RecordsBatches>();
  WeightStoreOptions big = Options();
  big.chunk_bytes = 5 << 20;
  SafetensorsFile large;
  large.tensors["t"] = DistinctChunks(15, 5 << 20);  // 75 MiB: 12 chunks fill 60 MiB
  ASSERT_OK_AND_ASSIGN(WeightManifest l, WeightStore(big_store, "b/", big).Push(large, nullptr));
  EXPECT_EQ(big_store->committed(), (std::vector<int>{12, 3}));
  ASSERT_OK_AND_ASSIGN(SafetensorsFile back, WeightStore(big_store, "b/", big).Pull(l));
  ExpectSameFile(back, large);
}

// Chunks stored as they are read back as fast as copied and take no deltas, so a push with
// compression off caches none; a push with it back on takes its deltas against them from the store.
TEST_F(WeightStoreTest, WithCompressionOffNothingIsCachedAndDeltasReadTheStoredChunks) {
  auto cache = std::make_shared<ChunkCache>(kDefaultBaseCacheBytes);
  auto counting = std::make_shared<CountsGets>();
  WeightStoreOptions off = Options();
  off.compress = false;
  off.base_cache = cache;
  const SafetensorsFile model = Model(1);
  PushStats stats;
  ASSERT_OK_AND_ASSIGN(WeightManifest first,
                       WeightStore(counting, "", off).Push(model, nullptr, &stats));
  EXPECT_EQ(stats.stored_bytes, stats.raw_bytes + 16u * stats.chunks_written);
  EXPECT_EQ(cache->size(), 0u);
  WeightStoreOptions on = Options();
  on.base_cache = cache;
  SafetensorsFile tuned = model;
  tuned.tensors["conv.weight"] = Moved(tuned.tensors["conv.weight"], 1e-3, 5);
  ASSERT_OK_AND_ASSIGN(WeightManifest second,
                       WeightStore(counting, "", on).Push(tuned, &first, &stats));
  EXPECT_EQ(stats.deltas_written, 3);
  EXPECT_EQ(counting->gets_, 3) << "each delta's stored base read once";
  ASSERT_OK_AND_ASSIGN(SafetensorsFile back, WeightStore(counting, "", Options()).Pull(second));
  ExpectSameFile(back, tuned);
}

TEST_F(WeightStoreTest, ASuccessivePushTakesItsDeltaBasesFromTheCache) {
  SafetensorsFile model = Model(1);
  SafetensorsFile tuned = model;
  tuned.tensors["conv.weight"] = Moved(model.tensors["conv.weight"], 1e-3, 7);
  auto counting = std::make_shared<CountsGets>();
  WeightStore cached(counting, "cached/", Cached(Options()));
  WeightStore uncached(counting, "uncached/", Options());
  int reads[2];
  for (WeightStore* store : {&cached, &uncached}) {
    ASSERT_OK_AND_ASSIGN(WeightManifest parent, store->Push(model, nullptr));
    const int before = counting->gets_;
    PushStats stats;
    ASSERT_OK_AND_ASSIGN(WeightManifest child, store->Push(tuned, &parent, &stats));
    reads[store == &cached ? 0 : 1] = counting->gets_ - before;
    EXPECT_EQ(stats.deltas_written, 3);
    ASSERT_OK_AND_ASSIGN(SafetensorsFile back, store->Pull(child));
    ExpectSameFile(back, tuned);
  }
  EXPECT_EQ(reads[0], 0) << "the bases came from the cache";
  EXPECT_EQ(reads[1], 3) << "the uncached push reads its 3 bases";
  EXPECT_EQ(cached.base_cache().size(), 9u) << "both versions' chunks (an empty tensor has none)";
  EXPECT_EQ(uncached.base_cache().size(), 0u);
  EXPECT_EQ(Objects(*counting, "cached/"), Objects(*counting, "uncached/"))
      << "either way the same chunks are stored";
}

// `t` moved by `step` times `direction`, element by element, with a little noise: a training run's
// next checkpoint keeps going the way the last one went.
TensorBytes Stepped(TensorBytes t, const TensorBytes& direction, double step, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> w(t.data.size() / 4), d(w.size());
  std::memcpy(w.data(), t.data.data(), t.data.size());
  std::memcpy(d.data(), direction.data.data(), direction.data.size());
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] += static_cast<float>(step * d[i] * (1.0 + 0.05 * (rng.Uniform() - 0.5)));
  }
  std::memcpy(t.data.data(), w.data(), t.data.size());
  return t;
}

// A run's checkpoints: from the third on, the changed chunks are linear deltas (the base's base
// came from the cache, or from decoding the base's chain without one), stored alike either way,
// and every version pulls bit-exact.
TEST_F(WeightStoreTest, ARunsCheckpointsAreLinearDeltasWithOrWithoutTheCache) {
  WeightStore cached(mem_, "cached/", Cached(Options())), uncached(mem_, "uncached/", Options());
  const TensorBytes direction = Floats({16, 3, 3, 7, 7}, 99);
  for (WeightStore* store : {&cached, &uncached}) {
    SafetensorsFile model = Model(1);
    std::vector<WeightManifest> versions;
    std::vector<SafetensorsFile> files;
    for (int v = 0; v < 5; ++v) {
      if (v > 0) {
        model.tensors["conv.weight"] = Stepped(model.tensors["conv.weight"], direction, 1e-3, v);
      }
      ASSERT_OK_AND_ASSIGN(WeightManifest m,
                           store->Push(model, v > 0 ? &versions.back() : nullptr));
      for (const ChunkRef& c : m.tensors.at("conv.weight").chunks) {
        ASSERT_OK_AND_ASSIGN(std::string stored, mem_->Get(store->ChunkKey(c.sha256)));
        ASSERT_OK_AND_ASSIGN(ChunkHeader h, ReadChunkHeader(stored, "c"));
        EXPECT_EQ(h.form, v == 0   ? ChunkForm::kFull
                          : v == 1 ? ChunkForm::kDifference
                                   : ChunkForm::kLinear)
            << "version " << v;
      }
      versions.push_back(m);
      files.push_back(model);
    }
    for (size_t v = 0; v < versions.size(); ++v) {
      ASSERT_OK_AND_ASSIGN(SafetensorsFile back, store->Pull(versions[v]));
      ExpectSameFile(back, files[v]);
    }
  }
  EXPECT_EQ(Objects(*mem_, "cached/"), Objects(*mem_, "uncached/"));
}

TEST_F(WeightStoreTest, ACachedBaseTheStoreLostIsNotADeltaBase) {
  ASSERT_OK_AND_ASSIGN(WeightManifest parent, store_.Push(Model(1), nullptr));
  SafetensorsFile tuned = Model(1);
  tuned.tensors["fc.weight"] = Moved(tuned.tensors["fc.weight"], 1e-3, 8);
  const ChunkRef& fc = parent.tensors.at("fc.weight").chunks[0];
  ASSERT_OK(mem_->Delete(store_.ChunkKey(fc.sha256)));  // collected after its version's removal
  Result<WeightManifest> child = store_.Push(tuned, &parent);
  EXPECT_STATUS(child, StatusCode::kDataLoss);
  EXPECT_NE(child.status().message().find("fc.weight"), std::string::npos)
      << child.status().message();
}

TEST_F(WeightStoreTest, PushesOnManyThreadsStoreARepeatedChunkOnce) {
  SafetensorsFile model = Model(3);
  model.tensors["copy.weight"] = model.tensors["conv.weight"];
  for (int threads : {1, 3}) {
    WeightStoreOptions o = Uncached({});
    o.chunk_bytes = 256;  // conv.weight and its copy: over a hundred chunks each
    o.threads = threads;
    WeightStore store(mem_, "t" + std::to_string(threads) + "/", o);
    PushStats stats;
    ASSERT_OK_AND_ASSIGN(WeightManifest m, store.Push(model, nullptr, &stats));
    const size_t conv = m.tensors.at("conv.weight").chunks.size();
    EXPECT_EQ(stats.chunks_written, stats.chunks - static_cast<int>(conv)) << threads;
    EXPECT_EQ(m.tensors.at("copy.weight").id, m.tensors.at("conv.weight").id);
    ASSERT_OK_AND_ASSIGN(SafetensorsFile back, store.Pull(m));
    ExpectSameFile(back, model);
  }
}

TEST_F(WeightStoreTest, ManifestsRoundTripAndRejectDamage) {
  ASSERT_OK_AND_ASSIGN(WeightManifest m, store_.Push(Model(1), nullptr));
  const std::string json = ManifestToJson(m);
  ASSERT_OK_AND_ASSIGN(WeightManifest back, ManifestFromJson(json, "v1"));
  EXPECT_EQ(ManifestToJson(back), json);
  EXPECT_STATUS(ManifestFromJson("{", "v1"), StatusCode::kDataLoss);
  std::string newer = json;
  newer.replace(newer.find("\"format\":1"), 10, "\"format\":2");
  EXPECT_STATUS(ManifestFromJson(newer, "v1"), StatusCode::kFailedPrecondition);
  std::string bad_id = json;
  const std::string id = m.tensors.at("conv.bias").id;
  bad_id.replace(bad_id.find(id), 2, id[0] == '0' ? "11" : "00");
  Result<WeightManifest> r = ManifestFromJson(bad_id, "v1");
  EXPECT_STATUS(r, StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("conv.bias"), std::string::npos) << r.status().message();
  std::string bad_dtype = json;
  bad_dtype.replace(bad_dtype.find("\"F32\""), 5, "\"F99\"");
  EXPECT_STATUS(ManifestFromJson(bad_dtype, "v1"), StatusCode::kDataLoss);
}

TEST_F(WeightStoreTest, BadInputIsRefused) {
  SafetensorsFile f;
  f.tensors["x"] = TensorBytes{"Q7", {1}, "a"};
  EXPECT_STATUS(store_.Push(f, nullptr), StatusCode::kInvalidArgument);
  WeightStoreOptions o;
  o.chunk_bytes = 0;
  EXPECT_STATUS(WeightStore(mem_, "", o).Push(Model(1), nullptr), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace reel::registry
