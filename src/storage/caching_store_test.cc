// CachingStore over a MemoryStore, whose request_count() shows what reached the "server".
#include "storage/caching_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "storage/memory_store.h"
#include "storage/testing/temp_dir.h"
#include "testing/status_matchers.h"

namespace reel::storage {
namespace {

using testing::FilesUnder;
using testing::RandomBytes;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

// Entry files of a cache directory (dot files are the lock and temporaries).
std::vector<std::string> EntryFiles(const std::string& directory) {
  std::vector<std::string> out;
  for (const std::string& name : FilesUnder(directory)) {
    if (name[0] != '.') out.push_back(name);
  }
  return out;
}

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

std::string ReadAll(ObjectReader& reader, size_t chunk, Status* error) {
  std::string out;
  std::string buffer(chunk, '\0');
  while (true) {
    auto n = reader.Read(buffer.data(), buffer.size());
    if (!n.ok()) {
      *error = n.status();
      return out;
    }
    if (*n == 0) return out;
    out.append(buffer.data(), *n);
  }
}

class CachingStoreTest : public ::testing::Test {
 protected:
  void Open(CacheOptions options = {}, const std::string& inner_name = "origin") {
    auto memory = std::make_unique<MemoryStore>(inner_name);
    inner_ = memory.get();
    options.directory = directory_;
    auto opened = CachingStore::Open(std::move(memory), options);
    ASSERT_OK(opened);
    cache_ = std::move(opened).value();
  }
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Open()); }

  // Inner requests made by `fn`.
  template <typename Fn>
  uint64_t RequestsOf(Fn&& fn) {
    uint64_t before = inner_->request_count();
    fn();
    return inner_->request_count() - before;
  }

  TempDir dir_;
  std::string directory_ = dir_.Join("cache");
  MemoryStore* inner_ = nullptr;  // owned by cache_
  std::unique_ptr<CachingStore> cache_;
};

TEST_F(CachingStoreTest, SecondGetCostsNoRequest) {
  std::string data = RandomBytes(100000, 31);
  ASSERT_OK(inner_->Put("shard/0001.tar", data));
  ObjectInfo origin_info = *inner_->Head("shard/0001.tar");

  ObjectInfo first_info;
  EXPECT_EQ(RequestsOf([&] { EXPECT_EQ(*cache_->Get("shard/0001.tar", &first_info), data); }), 1u);
  EXPECT_EQ(cache_->stats().misses, 1u);
  EXPECT_EQ(cache_->stats().hits, 0u);
  EXPECT_EQ(EntryFiles(directory_).size(), 1u);

  ObjectInfo second_info;
  EXPECT_EQ(RequestsOf([&] { EXPECT_EQ(*cache_->Get("shard/0001.tar", &second_info), data); }), 0u);
  EXPECT_EQ(cache_->stats().hits, 1u);
  EXPECT_EQ(cache_->stats().misses, 1u);
  for (const ObjectInfo* info : {&first_info, &second_info}) {
    EXPECT_EQ(info->key, "shard/0001.tar");
    EXPECT_EQ(info->size, data.size());
    EXPECT_EQ(info->etag, origin_info.etag);
    EXPECT_EQ(info->mtime_ms, origin_info.mtime_ms);
  }
  EXPECT_EQ(cache_->uri(), "mem://origin");
  EXPECT_GE(cache_->DiskUsage(), data.size());
}

TEST_F(CachingStoreTest, MissingObjectsAreNotCached) {
  EXPECT_STATUS(cache_->Get("missing"), StatusCode::kNotFound);
  EXPECT_STATUS(cache_->GetRange("missing", 0, 1), StatusCode::kNotFound);
  EXPECT_STATUS(cache_->Head("missing"), StatusCode::kNotFound);
  EXPECT_STATUS(cache_->OpenReader("missing"), StatusCode::kNotFound);
  EXPECT_STATUS(cache_->Get("../bad"), StatusCode::kInvalidArgument);
  EXPECT_EQ(EntryFiles(directory_).size(), 0u);
  ASSERT_OK(inner_->Put("missing", "now here"));
  EXPECT_EQ(*cache_->Get("missing"), "now here");
}

TEST_F(CachingStoreTest, GetRangeAndHeadOfACachedEntryCostNoRequest) {
  std::string data = RandomBytes(5000, 32);
  ASSERT_OK(inner_->Put("k", data));
  ASSERT_OK(cache_->Get("k"));
  EXPECT_EQ(RequestsOf([&] {
              EXPECT_EQ(*cache_->GetRange("k", 100, 50), data.substr(100, 50));
              EXPECT_EQ(*cache_->GetRange("k", 0, 5000), data);
              EXPECT_EQ(*cache_->GetRange("k", 4990, 100), data.substr(4990));
              EXPECT_EQ(*cache_->GetRange("k", 5000, 1), "");
              EXPECT_EQ(*cache_->GetRange("k", 10, 0), "");
              EXPECT_STATUS(cache_->GetRange("k", 5001, 1), StatusCode::kOutOfRange);
              auto head = cache_->Head("k");
              ASSERT_OK(head);
              EXPECT_EQ(head->size, data.size());
              EXPECT_EQ(head->etag, inner_->Head("k")->etag);  // one request, subtracted below
            }),
            1u);
  EXPECT_GE(cache_->stats().hits, 6u);
}

TEST_F(CachingStoreTest, GetRangeOfAnUncachedObjectBringsItIn) {
  std::string data = RandomBytes(5000, 33);
  ASSERT_OK(inner_->Put("k", data));
  uint64_t requests =
      RequestsOf([&] { EXPECT_EQ(*cache_->GetRange("k", 10, 20), data.substr(10, 20)); });
  EXPECT_GE(requests, 1u);
  EXPECT_LE(requests, 2u);  // a HEAD to size it, then the whole object
  EXPECT_EQ(RequestsOf([&] {
              EXPECT_EQ(*cache_->GetRange("k", 4000, 20), data.substr(4000, 20));
              EXPECT_EQ(*cache_->Get("k"), data);
            }),
            0u);
  EXPECT_STATUS(cache_->GetRange("k", 6000, 1), StatusCode::kOutOfRange);
  cache_->Invalidate("k");
  EXPECT_STATUS(cache_->GetRange("k", 6000, 1), StatusCode::kOutOfRange);
}

TEST_F(CachingStoreTest, WritesAndDeletesDropTheCachedCopy) {
  ASSERT_OK(inner_->Put("k", "version 1"));
  EXPECT_EQ(*cache_->Get("k"), "version 1");
  ASSERT_OK(cache_->Put("k", "version 2"));
  EXPECT_EQ(*inner_->Get("k"), "version 2");
  EXPECT_EQ(*cache_->Get("k"), "version 2");
  EXPECT_EQ(*cache_->GetRange("k", 8, 1), "2");
  EXPECT_EQ(cache_->Head("k")->size, 9u);

  ASSERT_OK(cache_->Delete("k"));
  EXPECT_STATUS(cache_->Get("k"), StatusCode::kNotFound);
  EXPECT_STATUS(cache_->Head("k"), StatusCode::kNotFound);

  ASSERT_OK(cache_->PutIfAbsent("k", "version 3"));
  EXPECT_EQ(*cache_->Get("k"), "version 3");
  EXPECT_STATUS(cache_->PutIfAbsent("k", "version 4"), StatusCode::kAlreadyExists);
  EXPECT_EQ(*cache_->Get("k"), "version 3");

  cache_->Invalidate("k");
  EXPECT_EQ(RequestsOf([&] { EXPECT_EQ(*cache_->Get("k"), "version 3"); }), 1u);
}

TEST_F(CachingStoreTest, StreamedWriteDropsACopyCachedWhileItWasOpen) {
  ASSERT_OK(inner_->Put("k", "old"));
  auto writer = cache_->OpenWriter("k");
  ASSERT_OK(writer);
  ASSERT_OK((*writer)->Write("new "));
  // Someone reads (and caches) the old version while the write is in progress...
  EXPECT_EQ(*cache_->Get("k"), "old");
  ASSERT_OK((*writer)->Write("content"));
  ASSERT_OK((*writer)->Close());
  // ...yet after Close every read sees the new one.
  EXPECT_EQ(*cache_->Get("k"), "new content");
  EXPECT_EQ(cache_->Head("k")->size, 11u);
  EXPECT_EQ(*cache_->GetRange("k", 4, 7), "content");
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

TEST_F(CachingStoreTest, ObjectsOverTheSizeLimitPassThrough) {
  CacheOptions options;
  options.max_object_bytes = 1000;
  ASSERT_NO_FATAL_FAILURE(Open(options));
  std::string big = RandomBytes(2000, 37), small = RandomBytes(1000, 38);
  ASSERT_OK(inner_->Put("big", big));
  ASSERT_OK(inner_->Put("small", small));
  EXPECT_EQ(RequestsOf([&] { EXPECT_EQ(*cache_->Get("big"), big); }), 1u);
  EXPECT_EQ(RequestsOf([&] { EXPECT_EQ(*cache_->Get("big"), big); }), 1u);
  EXPECT_GE(RequestsOf([&] { EXPECT_EQ(*cache_->GetRange("big", 1990, 20), big.substr(1990)); }),
            1u);
  EXPECT_GE(RequestsOf([&] {
              auto reader = cache_->OpenReader("big");
              ASSERT_OK(reader);
              Status error;
              EXPECT_EQ(ReadAll(**reader, 300, &error), big);
              EXPECT_OK(error);
            }),
            1u);
  EXPECT_EQ(EntryFiles(directory_).size(), 0u);
  EXPECT_EQ(cache_->stats().hits, 0u);

  ASSERT_OK(cache_->Get("small"));  // exactly at the limit: cached
  EXPECT_EQ(RequestsOf([&] { EXPECT_EQ(*cache_->Get("small"), small); }), 0u);
  EXPECT_EQ(EntryFiles(directory_).size(), 1u);
}

TEST_F(CachingStoreTest, OpenReaderStreamsAndCaches) {
  std::string data = RandomBytes(300001, 39);
  ASSERT_OK(inner_->Put("stream", data));
  {
    auto reader = cache_->OpenReader("stream");
    ASSERT_OK(reader);
    EXPECT_EQ((*reader)->size(), data.size());
    Status error;
    EXPECT_EQ(ReadAll(**reader, 4096, &error), data);
    EXPECT_OK(error);
  }
  EXPECT_EQ(RequestsOf([&] {
              auto reader = cache_->OpenReader("stream");
              ASSERT_OK(reader);
              EXPECT_EQ((*reader)->size(), data.size());
              Status error;
              EXPECT_EQ(ReadAll(**reader, 1000, &error), data);
              EXPECT_OK(error);
              EXPECT_EQ(*cache_->Get("stream"), data);
            }),
            0u);
  EXPECT_EQ(cache_->stats().hits, 2u);
  // No temporary file is left behind.
  EXPECT_EQ(FilesUnder(directory_), EntryFiles(directory_));
}

TEST_F(CachingStoreTest, OpenReaderReadToExactlyItsSizeCaches) {
  // Readers that stop after size() bytes, without the final 0-byte Read, still fill the cache.
  std::string data = RandomBytes(50000, 40);
  ASSERT_OK(inner_->Put("k", data));
  {
    auto reader = cache_->OpenReader("k");
    ASSERT_OK(reader);
    std::string got(data.size(), '\0');
    size_t done = 0;
    while (done < got.size()) {
      auto n = (*reader)->Read(got.data() + done, std::min<size_t>(7000, got.size() - done));
      ASSERT_OK(n);
      ASSERT_GT(*n, 0u);
      done += *n;
    }
    EXPECT_EQ(got, data);
  }
  EXPECT_EQ(RequestsOf([&] { EXPECT_EQ(*cache_->Get("k"), data); }), 0u);
}

TEST_F(CachingStoreTest, AbandonedOpenReaderCachesNothing) {
  std::string data = RandomBytes(50000, 41);
  ASSERT_OK(inner_->Put("k", data));
  {
    auto reader = cache_->OpenReader("k");
    ASSERT_OK(reader);
    char buffer[1000];
    ASSERT_EQ(*(*reader)->Read(buffer, sizeof buffer), sizeof buffer);
  }
  EXPECT_EQ(FilesUnder(directory_), std::vector<std::string>{});
  EXPECT_EQ(RequestsOf([&] { EXPECT_EQ(*cache_->Get("k"), data); }), 1u);
}

TEST_F(CachingStoreTest, TwoCachesOnOneDirectoryShareEntries) {
  std::string data = RandomBytes(10000, 42);
  ASSERT_OK(inner_->Put("k", data));
  ASSERT_OK(cache_->Get("k"));

  // A second process: its own store for the same URI, its own CachingStore, the same directory.
  auto other_inner = std::make_unique<MemoryStore>("origin");
  MemoryStore* other_raw = other_inner.get();
  CacheOptions options;
  options.directory = directory_;
  auto other = CachingStore::Open(std::move(other_inner), options);
  ASSERT_OK(other);
  EXPECT_EQ(*(*other)->Get("k"), data);  // although its own store holds nothing
  EXPECT_EQ(other_raw->request_count(), 0u);
  EXPECT_EQ((*other)->stats().hits, 1u);

  // A cache in front of a different store does not see those entries.
  auto unrelated = CachingStore::Open(std::make_unique<MemoryStore>("elsewhere"), options);
  ASSERT_OK(unrelated);
  EXPECT_STATUS((*unrelated)->Get("k"), StatusCode::kNotFound);
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

TEST(CachingStoreStandaloneTest, OpenValidatesOptionsAndMakesTheDirectory) {
  TempDir dir;
  CacheOptions options;
  EXPECT_STATUS(CachingStore::Open(std::make_unique<MemoryStore>(), options),
                StatusCode::kInvalidArgument);
  options.directory = dir.Join("a/b/c");
  options.max_bytes = 0;
  EXPECT_STATUS(CachingStore::Open(std::make_unique<MemoryStore>(), options),
                StatusCode::kInvalidArgument);
  options.max_bytes = 1 << 20;
  auto cache = CachingStore::Open(std::make_unique<MemoryStore>(), options);
  ASSERT_OK(cache);
  EXPECT_TRUE(testing::FileExists(dir.Join("a/b/c")));
  EXPECT_EQ((*cache)->DiskUsage(), 0u);
  ASSERT_OK((*cache)->inner().Put("x", "y"));
  EXPECT_EQ(*(*cache)->Get("x"), "y");
  auto page = (*cache)->List(ListOptions{});
  ASSERT_OK(page);
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].key, "x");
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
