// CachingStore's cache directory: corrupted and truncated entries are detected and fetched
// again, least recently used entries are evicted within the bound, a size mismatch is never
// cached, and processes sharing the directory never get wrong bytes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "storage/caching_store.h"
#include "storage/caching_store_test_util.h"
#include "storage/memory_store.h"
#include "storage/object_store.h"
#include "storage/testing/temp_dir.h"
#include "testing/status_matchers.h"

namespace reel::storage {
namespace {

using testing::CachingStoreTest;
using testing::EntryFiles;
using testing::RandomBytes;
using testing::ReadAll;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

// Entries are ordered for eviction by mtime, which the kernel keeps at timer-tick precision:
// moving every entry ten seconds into the past makes the next touch strictly the newest,
// without waiting for the clock to tick.
void AgeEntries(const std::string& directory) {
  for (const std::string& name : EntryFiles(directory)) {
    const std::string path = directory + "/" + name;
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
    struct timespec times[2] = {st.st_atim, st.st_mtim};
    times[1].tv_sec -= 10;
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
  }
}

TEST_F(CachingStoreTest, FlippedByteInAnEntryIsDetected) {
  std::string data = RandomBytes(20000, 34);
  ASSERT_OK(inner_->Put("k", data));
  ASSERT_OK(cache_->Get("k"));
  auto entries = EntryFiles(directory_);
  ASSERT_EQ(entries.size(), 1u);
  std::string path = directory_ + "/" + entries[0];
  std::string bytes = ReadFile(path);
  ASSERT_GT(bytes.size(), data.size());  // data, then a trailer
  // A byte of the data, then a byte of the trailer's magic.
  for (size_t offset : {size_t{12345}, bytes.size() - 1}) {
    SCOPED_TRACE("flipped byte at " + std::to_string(offset));
    std::string corrupted = ReadFile(path);
    ASSERT_EQ(corrupted.size(), bytes.size());
    corrupted[offset] = static_cast<char>(corrupted[offset] ^ 0x40);
    WriteFile(path, corrupted);
    uint64_t corrupt_before = cache_->stats().corrupt_entries;
    EXPECT_EQ(RequestsOf([&] { EXPECT_EQ(*cache_->Get("k"), data); }), 1u);
    EXPECT_EQ(cache_->stats().corrupt_entries, corrupt_before + 1);
    // Fetched again and re-cached: the next read is a good hit.
    EXPECT_EQ(ReadFile(path), bytes);
    EXPECT_EQ(RequestsOf([&] { EXPECT_EQ(*cache_->Get("k"), data); }), 0u);
    EXPECT_EQ(cache_->stats().corrupt_entries, corrupt_before + 1);
  }
}

TEST_F(CachingStoreTest, TruncatedEntryIsDetected) {
  std::string data = RandomBytes(20000, 35);
  ASSERT_OK(inner_->Put("k", data));
  ASSERT_OK(cache_->Get("k"));
  auto entries = EntryFiles(directory_);
  ASSERT_EQ(entries.size(), 1u);
  std::string path = directory_ + "/" + entries[0];
  std::string whole = ReadFile(path);
  int expected_corrupt = 0;
  for (size_t keep : {whole.size() - 1, whole.size() / 2, size_t{10}, size_t{0}}) {
    SCOPED_TRACE("truncated to " + std::to_string(keep));
    ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(keep)), 0);
    EXPECT_EQ(RequestsOf([&] { EXPECT_EQ(*cache_->Get("k"), data); }), 1u);
    EXPECT_EQ(cache_->stats().corrupt_entries, static_cast<uint64_t>(++expected_corrupt));
    EXPECT_EQ(ReadFile(path), whole);
  }
  // A truncated entry is not served by GetRange, Head or OpenReader either.
  auto truncate_entry = [&] {
    ASSERT_OK(cache_->Get("k"));  // a good entry, then cut it
    ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(whole.size() / 2)), 0);
  };
  ASSERT_NO_FATAL_FAILURE(truncate_entry());
  EXPECT_EQ(*cache_->GetRange("k", 15000, 10), data.substr(15000, 10));
  EXPECT_EQ(cache_->stats().corrupt_entries, static_cast<uint64_t>(++expected_corrupt));
  ASSERT_NO_FATAL_FAILURE(truncate_entry());
  EXPECT_EQ(cache_->Head("k")->size, data.size());
  EXPECT_EQ(cache_->stats().corrupt_entries, static_cast<uint64_t>(++expected_corrupt));
  ASSERT_NO_FATAL_FAILURE(truncate_entry());
  auto reader = cache_->OpenReader("k");
  ASSERT_OK(reader);
  Status error;
  EXPECT_EQ(ReadAll(**reader, 999, &error), data);
  EXPECT_OK(error);
  EXPECT_EQ(cache_->stats().corrupt_entries, static_cast<uint64_t>(++expected_corrupt));
  EXPECT_EQ(ReadFile(path), whole);  // the stream re-cached it
}

TEST_F(CachingStoreTest, StreamingReadOfACorruptedEntryFailsInsteadOfLying) {
  std::string data = RandomBytes(20000, 36);
  ASSERT_OK(inner_->Put("k", data));
  ASSERT_OK(cache_->Get("k"));
  std::string path = directory_ + "/" + EntryFiles(directory_).at(0);
  std::string corrupted = ReadFile(path);
  corrupted[777] = static_cast<char>(corrupted[777] ^ 1);
  WriteFile(path, corrupted);
  auto reader = cache_->OpenReader("k");
  ASSERT_OK(reader);
  Status error;
  std::string got = ReadAll(**reader, 4096, &error);
  EXPECT_STATUS(error, StatusCode::kDataLoss) << "read " << got.size() << " bytes";
  EXPECT_EQ(cache_->stats().corrupt_entries, 1u);
  // The bad entry is gone: the next read fetches the object again.
  EXPECT_EQ(RequestsOf([&] { EXPECT_EQ(*cache_->Get("k"), data); }), 1u);
}

TEST_F(CachingStoreTest, LeastRecentlyUsedEntryIsEvictedFirst) {
  constexpr size_t kSize = 100000;
  CacheOptions options;
  options.max_bytes = kSize * 7 / 2;  // room for three entries, not four
  ASSERT_NO_FATAL_FAILURE(Open(options));
  for (std::string key : {"A", "B", "C", "D"}) {
    ASSERT_OK(inner_->Put(key, RandomBytes(kSize, key[0])));
  }
  for (std::string key : {"A", "B", "C"}) {
    ASSERT_EQ(*cache_->Get(key), RandomBytes(kSize, key[0]));
    AgeEntries(directory_);
  }
  EXPECT_EQ(cache_->stats().evictions, 0u);
  EXPECT_EQ(EntryFiles(directory_).size(), 3u);
  EXPECT_EQ(RequestsOf([&] { ASSERT_OK(cache_->Get("A")); }), 0u);  // A is now newest
  AgeEntries(directory_);
  ASSERT_EQ(*cache_->Get("D"), RandomBytes(kSize, 'D'));
  EXPECT_EQ(cache_->stats().evictions, 1u);
  EXPECT_EQ(EntryFiles(directory_).size(), 3u);
  EXPECT_LE(cache_->DiskUsage(), options.max_bytes);

  EXPECT_EQ(RequestsOf([&] { EXPECT_EQ(*cache_->Get("A"), RandomBytes(kSize, 'A')); }), 0u);
  EXPECT_EQ(RequestsOf([&] { EXPECT_EQ(*cache_->Get("D"), RandomBytes(kSize, 'D')); }), 0u);
  EXPECT_EQ(RequestsOf([&] { EXPECT_EQ(*cache_->Get("B"), RandomBytes(kSize, 'B')); }), 1u);
  EXPECT_LE(cache_->DiskUsage(), options.max_bytes);
}

TEST_F(CachingStoreTest, ManySmallEntriesStayWithinTheBound) {
  // Entries carry a trailer (ETag, key, footer): the bound is on what the files take.
  CacheOptions options;
  options.max_bytes = 4000;
  ASSERT_NO_FATAL_FAILURE(Open(options));
  for (int i = 0; i < 200; ++i) {
    std::string key = "small/object-with-a-longish-key-" + std::to_string(i);
    ASSERT_OK(inner_->Put(key, RandomBytes(20, i)));
    ASSERT_OK(cache_->Get(key));
    ASSERT_LE(cache_->DiskUsage(), options.max_bytes) << "after " << i + 1 << " objects";
  }
  EXPECT_GT(cache_->stats().evictions, 0u);
}

TEST_F(CachingStoreTest, EntriesLeftByAnEarlierRunCountTowardTheBound) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK(inner_->Put("k" + std::to_string(i), RandomBytes(10000, i)));
    ASSERT_OK(cache_->Get("k" + std::to_string(i)));
  }
  ASSERT_GT(cache_->DiskUsage(), 50000u);
  CacheOptions smaller;
  smaller.max_bytes = 25000;
  ASSERT_NO_FATAL_FAILURE(Open(smaller));
  ASSERT_OK(inner_->Put("new", RandomBytes(10000, 9)));
  ASSERT_OK(cache_->Get("new"));
  EXPECT_LE(cache_->DiskUsage(), smaller.max_bytes);
}

// Stores wrap an inner store but report a size that does not match the bytes (a proxy that
// truncated the body, say).
class LyingStore : public MemoryStore {
 public:
  LyingStore() : MemoryStore("liar") {}
  Result<std::string> Get(std::string_view key, ObjectInfo* info) override {
    auto data = MemoryStore::Get(key, info);
    if (data.ok() && info) info->size += 1;
    return data;
  }
};

TEST(CachingStoreStandaloneTest, SizeMismatchIsDataLossAndNotCached) {
  TempDir dir;
  auto liar = std::make_unique<LyingStore>();
  ASSERT_OK(liar->Put("k", "12345"));
  CacheOptions options;
  options.directory = dir.Join("cache");
  auto cache = CachingStore::Open(std::move(liar), options);
  ASSERT_OK(cache);
  EXPECT_STATUS((*cache)->Get("k"), StatusCode::kDataLoss);
  EXPECT_EQ(EntryFiles(options.directory).size(), 0u);
}

// A child process fills and evicts in the same directory while the parent does the same; every
// answer must still be the right bytes, and no entry may look corrupt.
TEST(CachingStoreStandaloneTest, ForkedProcessSharingTheDirectoryNeverGetsWrongBytes) {
  TempDir dir;
  constexpr int kObjects = 16;
  constexpr size_t kSize = 32 << 10;
  CacheOptions options;
  options.directory = dir.Join("cache");
  options.max_bytes = 6 * kSize;  // constant eviction
  std::vector<std::string> objects;
  for (int i = 0; i < kObjects; ++i) objects.push_back(RandomBytes(kSize + i, i));

  // 0: all good; 1: wrong bytes; 2: an error; 3: a corrupt entry; 4: setup failed.
  auto work = [&](uint64_t seed) -> int {
    auto origin = std::make_unique<MemoryStore>("shared-origin");
    for (int i = 0; i < kObjects; ++i) {
      if (!origin->Put("obj/" + std::to_string(i), objects[i]).ok()) return 4;
    }
    auto cache = CachingStore::Open(std::move(origin), options);
    if (!cache.ok()) return 4;
    std::mt19937_64 rng(seed);
    for (int round = 0; round < 600; ++round) {
      int i = static_cast<int>(rng() % kObjects);
      std::string key = "obj/" + std::to_string(i);
      const std::string& expected = objects[i];
      switch (rng() % 4) {
        case 0:
        case 1: {
          auto got = (*cache)->Get(key);
          if (!got.ok()) return 2;
          if (*got != expected) return 1;
          break;
        }
        case 2: {
          uint64_t offset = rng() % expected.size();
          auto got = (*cache)->GetRange(key, offset, 1000);
          if (!got.ok()) return 2;
          if (*got != expected.substr(offset, 1000)) return 1;
          break;
        }
        default: {
          auto reader = (*cache)->OpenReader(key);
          if (!reader.ok()) return 2;
          Status error;
          std::string got = ReadAll(**reader, 8192, &error);
          if (!error.ok()) return 2;
          if (got != expected) return 1;
        }
      }
    }
    return (*cache)->stats().corrupt_entries == 0 ? 0 : 3;
  };

  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(ready[0]);
    char byte = 1;
    if (::write(ready[1], &byte, 1) != 1) ::_exit(4);
    ::_exit(work(2));
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  int parent_result = work(1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child";
  EXPECT_EQ(parent_result, 0) << "parent";
  // Each process bounds what it adds between scans, so together they stay near the bound.
  auto cache = CachingStore::Open(std::make_unique<MemoryStore>("shared-origin"), options);
  ASSERT_OK(cache);
  EXPECT_LE((*cache)->DiskUsage(), 2 * options.max_bytes);
}

}  // namespace
}  // namespace reel::storage
