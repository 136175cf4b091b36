// One conformance suite that every local-view store (MemoryStore, LocalStore) must pass alike:
// round trips, replacement, missing and invalid keys, ranges, PutIfAbsent races, writers,
// readers and listing.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "storage/local_store.h"
#include "storage/memory_store.h"
#include "storage/object_store.h"
#include "storage/object_store_test_util.h"
#include "storage/testing/temp_dir.h"
#include "testing/status_matchers.h"

namespace reel::storage {
namespace {

using testing::ExpectPagingMatchesBruteForce;
using testing::FilesUnder;
using testing::PagingKeys;
using testing::RandomBytes;
using testing::TempDir;

// ---------------------------------------------------------------------------------------------
// Conformance: every store below must behave the same.

class MemoryStoreMaker {
 public:
  static constexpr bool kOnDisk = false;
  std::unique_ptr<ObjectStore> Make() { return std::make_unique<MemoryStore>("conformance"); }
  std::vector<std::string> RawFiles() const { return {}; }
};

class LocalStoreMaker {
 public:
  static constexpr bool kOnDisk = true;
  std::unique_ptr<ObjectStore> Make() {
    auto store = LocalStore::Open(dir_.Join("root"));
    EXPECT_OK(store);
    return std::move(store).value();
  }
  // Every file in the store's directory, temporary files included.
  std::vector<std::string> RawFiles() const { return FilesUnder(dir_.Join("root")); }

 private:
  TempDir dir_;
};

template <typename Maker>
class StoreConformanceTest : public ::testing::Test {
 protected:
  Maker maker_;
  std::unique_ptr<ObjectStore> store_ = maker_.Make();
};

class MakerNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, MemoryStoreMaker>) return "MemoryStore";
    return "LocalStore";
  }
};

using StoreMakers = ::testing::Types<MemoryStoreMaker, LocalStoreMaker>;
TYPED_TEST_SUITE(StoreConformanceTest, StoreMakers, MakerNames);

TYPED_TEST(StoreConformanceTest, PutGetHeadRoundTripBinary) {
  ObjectStore& store = *this->store_;
  std::string data = RandomBytes(70000, 1);
  data[0] = '\0';
  data[data.size() - 1] = '\0';
  ASSERT_NE(data.find('\0', 1), std::string::npos);
  ASSERT_OK(store.Put("dir/sub/object.bin", data));

  ObjectInfo info;
  auto got = store.Get("dir/sub/object.bin", &info);
  ASSERT_OK(got);
  EXPECT_EQ(*got, data);
  EXPECT_EQ(info.key, "dir/sub/object.bin");
  EXPECT_EQ(info.size, data.size());
  EXPECT_FALSE(info.etag.empty());
  EXPECT_GT(info.mtime_ms, 1600000000000);  // after 2020: milliseconds, not seconds

  auto head = store.Head("dir/sub/object.bin");
  ASSERT_OK(head);
  EXPECT_EQ(head->key, "dir/sub/object.bin");
  EXPECT_EQ(head->size, data.size());
  EXPECT_EQ(head->etag, info.etag);

  ASSERT_OK(store.Put("empty", ""));
  auto empty = store.Get("empty");
  ASSERT_OK(empty);
  EXPECT_EQ(*empty, "");
  EXPECT_EQ(store.Head("empty")->size, 0u);
}

TYPED_TEST(StoreConformanceTest, PutReplacesAndChangesEtag) {
  ObjectStore& store = *this->store_;
  ASSERT_OK(store.Put("k", "first version"));
  auto before = store.Head("k");
  ASSERT_OK(before);
  ASSERT_OK(store.Put("k", "second"));
  EXPECT_EQ(*store.Get("k"), "second");
  auto after = store.Head("k");
  ASSERT_OK(after);
  EXPECT_EQ(after->size, 6u);
  EXPECT_NE(after->etag, before->etag);
}

TYPED_TEST(StoreConformanceTest, MissingKeyIsNotFound) {
  ObjectStore& store = *this->store_;
  ASSERT_OK(store.Put("present", "x"));
  EXPECT_STATUS(store.Get("absent"), StatusCode::kNotFound);
  EXPECT_STATUS(store.Get("present/below"), StatusCode::kNotFound);
  EXPECT_STATUS(store.Head("absent"), StatusCode::kNotFound);
  EXPECT_STATUS(store.GetRange("absent", 0, 1), StatusCode::kNotFound);
  EXPECT_STATUS(store.OpenReader("absent"), StatusCode::kNotFound);
  EXPECT_STATUS(store.Get("no/such/dir/key"), StatusCode::kNotFound);
}

TYPED_TEST(StoreConformanceTest, InvalidKeysAreRefusedByEveryOperation) {
  ObjectStore& store = *this->store_;
  for (std::string key : {"", "/abs", "../up", "a/../b", "a//b", "a\\b", "dir/"}) {
    SCOPED_TRACE("key '" + key + "'");
    EXPECT_STATUS(store.Put(key, "x"), StatusCode::kInvalidArgument);
    EXPECT_STATUS(store.PutIfAbsent(key, "x"), StatusCode::kInvalidArgument);
    EXPECT_STATUS(store.Get(key), StatusCode::kInvalidArgument);
    EXPECT_STATUS(store.GetRange(key, 0, 1), StatusCode::kInvalidArgument);
    EXPECT_STATUS(store.Head(key), StatusCode::kInvalidArgument);
    EXPECT_STATUS(store.Delete(key), StatusCode::kInvalidArgument);
    EXPECT_STATUS(store.OpenReader(key), StatusCode::kInvalidArgument);
    EXPECT_STATUS(store.OpenWriter(key), StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(this->maker_.RawFiles().empty());
  auto all = ListAll(store, "");
  ASSERT_OK(all);
  EXPECT_TRUE(all->empty());
}

TYPED_TEST(StoreConformanceTest, GetRangeEdges) {
  ObjectStore& store = *this->store_;
  std::string data = RandomBytes(1000, 2);
  ASSERT_OK(store.Put("r", data));
  EXPECT_EQ(*store.GetRange("r", 0, 10), data.substr(0, 10));
  EXPECT_EQ(*store.GetRange("r", 0, 1000), data);
  EXPECT_EQ(*store.GetRange("r", 123, 456), data.substr(123, 456));
  EXPECT_EQ(*store.GetRange("r", 990, 100), data.substr(990));  // clipped at the end
  EXPECT_EQ(*store.GetRange("r", 0, UINT64_MAX), data);
  EXPECT_EQ(*store.GetRange("r", 999, 1), data.substr(999));
  auto at_end = store.GetRange("r", 1000, 10);
  ASSERT_OK(at_end);
  EXPECT_EQ(*at_end, "");
  auto zero = store.GetRange("r", 500, 0);
  ASSERT_OK(zero);
  EXPECT_EQ(*zero, "");
  EXPECT_STATUS(store.GetRange("r", 1001, 1), StatusCode::kOutOfRange);
  EXPECT_STATUS(store.GetRange("r", UINT64_MAX, 1), StatusCode::kOutOfRange);

  ASSERT_OK(store.Put("empty", ""));
  EXPECT_EQ(*store.GetRange("empty", 0, 5), "");
  EXPECT_STATUS(store.GetRange("empty", 1, 5), StatusCode::kOutOfRange);
}

TYPED_TEST(StoreConformanceTest, PutIfAbsentRefusesSecondWriter) {
  ObjectStore& store = *this->store_;
  ASSERT_OK(store.PutIfAbsent("lock", "owner-1"));
  EXPECT_STATUS(store.PutIfAbsent("lock", "owner-2"), StatusCode::kAlreadyExists);
  EXPECT_EQ(*store.Get("lock"), "owner-1");
  ASSERT_OK(store.Delete("lock"));
  EXPECT_OK(store.PutIfAbsent("lock", "owner-3"));
  EXPECT_EQ(*store.Get("lock"), "owner-3");
  if (TypeParam::kOnDisk) {
    EXPECT_EQ(this->maker_.RawFiles(), std::vector<std::string>{"lock"});
  }
}

TYPED_TEST(StoreConformanceTest, PutIfAbsentRaceHasExactlyOneWinner) {
  ObjectStore& store = *this->store_;
  constexpr int kThreads = 8;
  for (int round = 0; round < 10; ++round) {
    std::string key = "race/" + std::to_string(round);
    std::atomic<int> ready{0};
    std::vector<Status> results(kThreads);
    std::vector<std::string> payloads(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      payloads[t] = "writer " + std::to_string(t) + ":" + RandomBytes(4096, 100 + t);
      threads.emplace_back([&, t] {
        ++ready;
        while (ready.load() < kThreads) std::this_thread::yield();
        results[t] = store.PutIfAbsent(key, payloads[t]);
      });
    }
    for (auto& thread : threads) thread.join();
    int winner = -1;
    for (int t = 0; t < kThreads; ++t) {
      if (results[t].ok()) {
        EXPECT_EQ(winner, -1) << "two winners in round " << round;
        winner = t;
      } else {
        EXPECT_STATUS(results[t], StatusCode::kAlreadyExists) << results[t].ToString();
      }
    }
    ASSERT_NE(winner, -1) << "no winner in round " << round;
    EXPECT_EQ(*store.Get(key), payloads[winner]);
  }
  if (TypeParam::kOnDisk) {
    std::vector<std::string> expected;
    for (int round = 0; round < 10; ++round) expected.push_back("race/" + std::to_string(round));
    EXPECT_EQ(this->maker_.RawFiles(), expected) << "temporary files were left behind";
  }
}

TYPED_TEST(StoreConformanceTest, DeleteThenGetIsNotFoundAndDeleteMissingIsOk) {
  ObjectStore& store = *this->store_;
  ASSERT_OK(store.Put("d/k", "x"));
  ASSERT_OK(store.Delete("d/k"));
  EXPECT_STATUS(store.Get("d/k"), StatusCode::kNotFound);
  EXPECT_STATUS(store.Head("d/k"), StatusCode::kNotFound);
  EXPECT_OK(store.Delete("d/k"));
  EXPECT_OK(store.Delete("never/existed"));
  auto all = ListAll(store, "");
  ASSERT_OK(all);
  EXPECT_TRUE(all->empty());
}

TYPED_TEST(StoreConformanceTest, WriterCommitsConcatenationOnClose) {
  ObjectStore& store = *this->store_;
  ASSERT_OK(store.Put("stream/obj", "old"));
  auto writer = store.OpenWriter("stream/obj");
  ASSERT_OK(writer);
  std::mt19937 rng(7);
  std::string expected;
  for (int i = 0; i < 500; ++i) {
    std::string piece = RandomBytes(rng() % 700, 1000 + i);  // empty pieces included
    expected += piece;
    ASSERT_OK((*writer)->Write(piece));
  }
  // Nothing is visible before Close.
  EXPECT_EQ(*store.Get("stream/obj"), "old");
  ASSERT_OK((*writer)->Close());
  EXPECT_EQ(*store.Get("stream/obj"), expected);
  EXPECT_EQ(store.Head("stream/obj")->size, expected.size());
  EXPECT_NE((*writer)->Write("more").code(), StatusCode::kOk);
  EXPECT_NE((*writer)->Close().code(), StatusCode::kOk);
  EXPECT_EQ(*store.Get("stream/obj"), expected);
  if (TypeParam::kOnDisk) {
    EXPECT_EQ(this->maker_.RawFiles(), std::vector<std::string>{"stream/obj"});
  }
}

TYPED_TEST(StoreConformanceTest, WriterDestroyedWithoutCloseLeavesNothing) {
  ObjectStore& store = *this->store_;
  {
    auto writer = store.OpenWriter("pending/obj");
    ASSERT_OK(writer);
    ASSERT_OK((*writer)->Write(RandomBytes(100000, 3)));
    EXPECT_STATUS(store.Get("pending/obj"), StatusCode::kNotFound);
  }
  EXPECT_STATUS(store.Get("pending/obj"), StatusCode::kNotFound);
  auto all = ListAll(store, "");
  ASSERT_OK(all);
  EXPECT_TRUE(all->empty());
  EXPECT_EQ(this->maker_.RawFiles(), std::vector<std::string>{});
}

TYPED_TEST(StoreConformanceTest, BatchPutsFromThreadsAreAllThereAfterCommit) {
  ObjectStore& store = *this->store_;
  ASSERT_OK(store.Put("batch/3", "old"));
  std::unique_ptr<PutBatch> batch = store.NewBatch();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < 40; i += 4) {
        EXPECT_OK(batch->Put("batch/" + std::to_string(i), RandomBytes(i * 997, 500 + i)));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_OK(batch->Commit());
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(*store.Get("batch/" + std::to_string(i)), RandomBytes(i * 997, 500 + i)) << i;
  }
  // A batch goes on after a commit, and bad keys are refused at Put.
  ASSERT_OK(batch->PutJoined("batch/40", {"la", "", "ter"}));
  EXPECT_STATUS(batch->Put("../escape", "x"), StatusCode::kInvalidArgument);
  ASSERT_OK(batch->Commit());
  EXPECT_EQ(*store.Get("batch/40"), "later");
  EXPECT_EQ(ListAll(store, "batch/")->size(), 41u);
  if (TypeParam::kOnDisk) {
    EXPECT_EQ(this->maker_.RawFiles().size(), 41u);  // no temp file left
  }
}

TYPED_TEST(StoreConformanceTest, ReaderReadsWholeObjectInSmallReads) {
  ObjectStore& store = *this->store_;
  std::string data = RandomBytes(10007, 4);
  ASSERT_OK(store.Put("reader", data));
  auto reader = store.OpenReader("reader");
  ASSERT_OK(reader);
  EXPECT_EQ((*reader)->size(), data.size());
  std::string got;
  char buffer[7];
  for (int guard = 0; guard < 100000; ++guard) {
    auto n = (*reader)->Read(buffer, sizeof buffer);
    ASSERT_OK(n);
    if (*n == 0) break;
    ASSERT_LE(*n, sizeof buffer);
    got.append(buffer, *n);
  }
  EXPECT_EQ(got, data);
  EXPECT_EQ(*(*reader)->Read(buffer, sizeof buffer), 0u);  // stays at the end

  ASSERT_OK(store.Put("empty", ""));
  auto empty = store.OpenReader("empty");
  ASSERT_OK(empty);
  EXPECT_EQ((*empty)->size(), 0u);
  EXPECT_EQ(*(*empty)->Read(buffer, sizeof buffer), 0u);
}

TYPED_TEST(StoreConformanceTest, ListPagingMatchesBruteForce) {
  ObjectStore& store = *this->store_;
  for (const std::string& key : PagingKeys()) ASSERT_OK(store.Put(key, key)) << key;
  ExpectPagingMatchesBruteForce([&](const ListOptions& options) { return store.List(options); },
                                PagingKeys());
}

TYPED_TEST(StoreConformanceTest, ListRefusesBadOptions) {
  ObjectStore& store = *this->store_;
  ASSERT_OK(store.Put("a/1", "x"));
  ASSERT_OK(store.Put("b/1", "x"));
  for (int max_keys : {0, -3, 1001}) {
    ListOptions options;
    options.max_keys = max_keys;
    EXPECT_STATUS(store.List(options), StatusCode::kInvalidArgument) << max_keys;
  }
  ListOptions outside;
  outside.prefix = "a/";
  outside.page_token = "b/1";
  EXPECT_STATUS(store.List(outside), StatusCode::kInvalidArgument);
  ListOptions none;
  none.prefix = "nothing/";
  auto page = store.List(none);
  ASSERT_OK(page);
  EXPECT_TRUE(page->objects.empty());
  EXPECT_TRUE(page->common_prefixes.empty());
  EXPECT_EQ(page->next_page_token, "");
}

TYPED_TEST(StoreConformanceTest, ListAllFollowsPageTokens) {
  ObjectStore& store = *this->store_;
  // Few enough to stay fast with fsync; the >1000-key runs are in the per-store tests.
  std::vector<std::string> keys;
  for (int i = 0; i < 30; ++i) keys.push_back("p/" + std::to_string(i));
  for (const std::string& key : keys) ASSERT_OK(store.Put(key, key));
  ASSERT_OK(store.Put("q", "q"));
  auto all = ListAll(store, "p/");
  ASSERT_OK(all);
  std::sort(keys.begin(), keys.end());
  std::vector<std::string> got;
  for (const ObjectInfo& info : *all) got.push_back(info.key);
  EXPECT_EQ(got, keys);
}

}  // namespace
}  // namespace reel::storage
