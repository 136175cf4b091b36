// CachingStore read-through over a MemoryStore, whose request_count() shows what reached the
// "server": hits and misses, ranges and heads, writes that drop the cached copy, objects too large
// to cache, streaming readers, caches sharing a directory, and Open's checks.
#include "storage/caching_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/sync_point.h"
#include "storage/caching_store_test_util.h"
#include "storage/memory_store.h"
#include "storage/object_store.h"
#include "storage/testing/temp_dir.h"
#include "testing/status_matchers.h"

namespace reel::storage {
namespace {

using testing::CachingStoreTest;
using testing::EntryFiles;
using testing::FilesUnder;
using testing::RandomBytes;
using testing::ReadAll;
using testing::TempDir;

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

// Single flight even when another caller's whole fetch fits between this caller's miss and its
// claim on the key: it finds the entry instead of fetching the object a second time.
TEST_F(CachingStoreTest, AFillThatFinishesDuringAMissIsNotRepeated) {
  std::string data = RandomBytes(5000, 32);
  ASSERT_OK(inner_->Put("shard/0002.tar", data));
  SyncPoint& sp = SyncPoint::Get();
  std::atomic<bool> raced{false};
  sp.SetCallback("CachingStore::Fill:Missed", [&] {
    if (raced.exchange(true)) return;  // the other caller's own miss
    std::thread other([&] { EXPECT_EQ(*cache_->Get("shard/0002.tar"), data); });
    other.join();
  });
  sp.EnableProcessing();
  EXPECT_EQ(RequestsOf([&] { EXPECT_EQ(*cache_->Get("shard/0002.tar"), data); }), 1u);
  sp.Reset();
  EXPECT_TRUE(raced.load());
  EXPECT_EQ(cache_->stats().misses, 1u);
  EXPECT_EQ(cache_->stats().hits, 1u);
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

}  // namespace
}  // namespace reel::storage
