// MemoryStore beyond the shared conformance suite (object_store_conformance_test.cc): request
// counting, readers that outlive a replace, listing thousands of keys.
#include "storage/memory_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "storage/testing/temp_dir.h"
#include "testing/status_matchers.h"

namespace reel::storage {
namespace {

using testing::RandomBytes;

TEST(MemoryStoreTest, UriNamesTheStore) {
  EXPECT_EQ(MemoryStore().uri(), "mem://test");
  EXPECT_EQ(MemoryStore("datasets").uri(), "mem://datasets");
}

TEST(MemoryStoreTest, CountsEveryRequestIncludingFailures) {
  MemoryStore store;
  EXPECT_EQ(store.request_count(), 0u);
  ASSERT_OK(store.Put("a", "1"));
  EXPECT_EQ(store.request_count(), 1u);
  ASSERT_OK(store.Get("a"));
  EXPECT_FALSE(store.Get("missing").ok());
  EXPECT_FALSE(store.Get("/bad").ok());
  EXPECT_EQ(store.request_count(), 4u);
  ASSERT_OK(store.Head("a"));
  ASSERT_OK(store.GetRange("a", 0, 1));
  ASSERT_OK(store.List(ListOptions{}));
  EXPECT_FALSE(store.PutIfAbsent("a", "2").ok());
  ASSERT_OK(store.OpenReader("a"));
  auto writer = store.OpenWriter("b");
  ASSERT_OK(writer);
  EXPECT_EQ(store.request_count(), 10u);
  // Closing a writer commits with one more request.
  ASSERT_OK((*writer)->Close());
  EXPECT_EQ(store.request_count(), 11u);
  ASSERT_OK(store.Delete("a"));
  EXPECT_EQ(store.request_count(), 12u);
}

TEST(MemoryStoreTest, StoresAreIndependent) {
  MemoryStore one("one"), two("one");
  ASSERT_OK(one.Put("k", "v"));
  EXPECT_STATUS(two.Get("k"), StatusCode::kNotFound);
}

TEST(MemoryStoreTest, OpenReaderKeepsTheVersionItOpened) {
  MemoryStore store;
  std::string old_data = RandomBytes(5000, 11);
  ASSERT_OK(store.Put("k", old_data));
  auto reader = store.OpenReader("k");
  ASSERT_OK(reader);
  ASSERT_OK(store.Put("k", "replaced"));
  ASSERT_OK(store.Delete("k"));
  std::string got(old_data.size() + 10, '\0');
  size_t total = 0;
  while (true) {
    auto n = (*reader)->Read(got.data() + total, 1000);
    ASSERT_OK(n);
    if (*n == 0) break;
    total += *n;
  }
  got.resize(total);
  EXPECT_EQ(got, old_data);
}

TEST(MemoryStoreTest, EtagAndMtimeTrackEachVersion) {
  MemoryStore store;
  ASSERT_OK(store.Put("k", "1"));
  ObjectInfo first;
  ASSERT_OK(store.Get("k", &first));
  ASSERT_OK(store.Put("k", "1"));  // same bytes, still a new version
  ObjectInfo second;
  ASSERT_OK(store.Get("k", &second));
  EXPECT_NE(first.etag, second.etag);
  EXPECT_GE(second.mtime_ms, first.mtime_ms);
}

TEST(MemoryStoreTest, ListAllOverThousandsOfKeys) {
  MemoryStore store;
  std::vector<std::string> keys;
  for (int i = 0; i < 2500; ++i) {
    char key[32];
    std::snprintf(key, sizeof key, "shards/%05d.tar", (i * 7919) % 2500);  // put out of order
    keys.push_back(key);
    ASSERT_OK(store.Put(key, std::to_string(i)));
  }
  ASSERT_OK(store.Put("shardsX", "outside the prefix"));
  ASSERT_OK(store.Put("other/1", "outside the prefix"));
  std::sort(keys.begin(), keys.end());

  uint64_t before = store.request_count();
  auto all = ListAll(store, "shards/");
  ASSERT_OK(all);
  EXPECT_EQ(store.request_count() - before, 3u);  // pages of 1000, 1000 and 500
  std::vector<std::string> got;
  for (const ObjectInfo& info : *all) got.push_back(info.key);
  EXPECT_EQ(got, keys);

  auto everything = ListAll(store, "");
  ASSERT_OK(everything);
  EXPECT_EQ(everything->size(), 2502u);
}

TEST(MemoryStoreTest, ConcurrentPutsAndGetsNeverTear) {
  MemoryStore store;
  const std::string a(4096, 'a'), b(8192, 'b');
  ASSERT_OK(store.Put("k", a));
  std::atomic<bool> reading{false}, done{false};
  std::thread writer([&] {
    while (!reading.load()) std::this_thread::yield();
    for (int i = 0; i < 2000; ++i) EXPECT_OK(store.Put("k", i % 2 ? a : b));
    done = true;
  });
  int reads = 0, torn = 0;
  do {
    auto got = store.Get("k");
    if (!got.ok() || (*got != a && *got != b)) ++torn;
    ++reads;
    reading = true;
  } while (!done.load());
  writer.join();
  EXPECT_EQ(torn, 0) << "of " << reads << " reads";
}

}  // namespace
}  // namespace reel::storage
