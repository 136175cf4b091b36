// The ObjectStore contract: key validation, paging (PageFromSortedObjects), CopyObject, and one
// conformance suite that every local-view store (MemoryStore, LocalStore) must pass alike.
#include "storage/object_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

#include "storage/listing.h"
#include "storage/local_store.h"
#include "storage/memory_store.h"
#include "storage/testing/temp_dir.h"
#include "testing/status_matchers.h"

namespace reel::storage {
namespace {

using testing::FilesUnder;
using testing::RandomBytes;
using testing::TempDir;

// ---------------------------------------------------------------------------------------------
// ValidateKey

TEST(ValidateKeyTest, AcceptsOrdinaryKeys) {
  for (std::string key :
       {"a", "a/b/c.tar", "dataset/shard-00001.tar", "a.b", "..a", "a..", ".hidden", "a/.b/c",
        "a/...", "with space/and+plus", "\xC3\xA9t\xC3\xA9/x"}) {
    EXPECT_OK(ValidateKey(key)) << "'" << key << "': " << ValidateKey(key).ToString();
  }
  EXPECT_OK(ValidateKey(std::string(1024, 'k')));
}

TEST(ValidateKeyTest, RefusesKeysThatCouldEscapeOrAlias) {
  const std::vector<std::string> bad = {"",
                                        "/a",
                                        "/",
                                        "a/../b",
                                        "..",
                                        ".",
                                        "../a",
                                        "a/..",
                                        "./a",
                                        "a/.",
                                        "a//b",
                                        "a/./b",
                                        "a\\b",
                                        "a/",
                                        "a/b/",
                                        std::string("a\0b", 3),
                                        std::string(1, '\0'),
                                        std::string(1025, 'k'),
                                        "\\"};
  for (const std::string& key : bad) {
    Status status = ValidateKey(key);
    EXPECT_STATUS(status, StatusCode::kInvalidArgument)
        << "key of " << key.size() << " bytes '" << key << "' was accepted";
  }
}

// ---------------------------------------------------------------------------------------------
// Paging, checked against a brute-force listing of the same keys.

struct Listing {
  std::vector<std::string> objects;
  std::vector<std::string> prefixes;
};

Listing BruteForce(std::vector<std::string> keys, const std::string& prefix,
                   const std::string& delimiter) {
  std::sort(keys.begin(), keys.end());
  Listing out;
  for (const std::string& key : keys) {
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    if (!delimiter.empty()) {
      size_t cut = key.find(delimiter, prefix.size());
      if (cut != std::string::npos) {
        std::string group = key.substr(0, cut + delimiter.size());
        if (out.prefixes.empty() || out.prefixes.back() != group) out.prefixes.push_back(group);
        continue;
      }
    }
    out.objects.push_back(key);
  }
  return out;
}

using ListFn = std::function<Result<ListPage>(const ListOptions&)>;

// Follows page tokens to the end; every object's size must equal its key's length.
void PageThrough(const ListFn& list, const std::string& prefix, const std::string& delimiter,
                 int max_keys, Listing* got) {
  ListOptions options;
  options.prefix = prefix;
  options.delimiter = delimiter;
  options.max_keys = max_keys;
  for (int pages = 0;; ++pages) {
    ASSERT_LT(pages, 10000) << "paging never ends";
    Result<ListPage> page = list(options);
    ASSERT_OK(page);
    size_t entries = page->objects.size() + page->common_prefixes.size();
    ASSERT_LE(entries, static_cast<size_t>(max_keys));
    if (!page->next_page_token.empty()) {
      // A token promises more: the page is full, and (checked on the next round) the next one
      // is not empty.
      EXPECT_EQ(entries, static_cast<size_t>(max_keys));
    }
    if (pages > 0) {
      EXPECT_GT(entries, 0u) << "an empty page after token '" << options.page_token << "'";
    }
    for (const ObjectInfo& object : page->objects) {
      EXPECT_EQ(object.size, object.key.size()) << object.key;
      got->objects.push_back(object.key);
    }
    for (const std::string& group : page->common_prefixes) got->prefixes.push_back(group);
    if (page->next_page_token.empty()) break;
    options.page_token = page->next_page_token;
  }
}

// Keys that can coexist as files (no key is another key's parent), with groups of several keys
// that span page boundaries, and neighbours of '/' in byte order ('-' '.' < '/' < '0').
const std::vector<std::string>& PagingKeys() {
  static const std::vector<std::string> keys = {
      "a.txt", "a/1",     "a/2",   "a/3",   "a/4", "a/5/x",      "a0",
      "a-b",   "b",       "c/x/1", "c/x/2", "c/y", "d/1",        "d0",
      "e-",    "f/g/h/i", "y/1",   "y/2",   "y/3", "\xC3\xA9/1", "z-\xC3\xA9"};
  return keys;
}

void ExpectPagingMatchesBruteForce(const ListFn& list, const std::vector<std::string>& keys) {
  for (std::string prefix : {"", "a", "a/", "c/", "c/x", "c/x/", "f/g/", "y/", "zz", "\xC3\xA9"}) {
    for (std::string delimiter : {"", "/"}) {
      Listing expected = BruteForce(keys, prefix, delimiter);
      for (int max_keys : {1, 2, 3, 4, 7, 1000}) {
        SCOPED_TRACE("prefix '" + prefix + "' delimiter '" + delimiter + "' max_keys " +
                     std::to_string(max_keys));
        Listing got;
        ASSERT_NO_FATAL_FAILURE(PageThrough(list, prefix, delimiter, max_keys, &got));
        EXPECT_EQ(got.objects, expected.objects);
        EXPECT_EQ(got.prefixes, expected.prefixes);
      }
    }
  }
}

std::vector<ObjectInfo> SortedInfos(std::vector<std::string> keys) {
  std::sort(keys.begin(), keys.end());
  std::vector<ObjectInfo> out;
  for (const std::string& key : keys) {
    ObjectInfo info;
    info.key = key;
    info.size = key.size();
    out.push_back(info);
  }
  return out;
}

TEST(PageFromSortedObjectsTest, EveryKeyExactlyOnceInOrder) {
  std::vector<ObjectInfo> sorted = SortedInfos(PagingKeys());
  ExpectPagingMatchesBruteForce(
      [&](const ListOptions& options) { return PageFromSortedObjects(sorted, options); },
      PagingKeys());
}

TEST(PageFromSortedObjectsTest, GroupSpanningPagesIsReturnedOnce) {
  // Page size 2: "a.txt", "a/" fill page one; the rest of a/ must not come back on page two.
  std::vector<ObjectInfo> sorted = SortedInfos({"a.txt", "a/1", "a/2", "a/3", "b", "c/1", "c/2"});
  ListOptions options;
  options.delimiter = "/";
  options.max_keys = 2;
  auto first = PageFromSortedObjects(sorted, options);
  ASSERT_OK(first);
  ASSERT_EQ(first->objects.size(), 1u);
  EXPECT_EQ(first->objects[0].key, "a.txt");
  EXPECT_EQ(first->common_prefixes, std::vector<std::string>{"a/"});
  ASSERT_FALSE(first->next_page_token.empty());
  options.page_token = first->next_page_token;
  auto second = PageFromSortedObjects(sorted, options);
  ASSERT_OK(second);
  ASSERT_EQ(second->objects.size(), 1u);
  EXPECT_EQ(second->objects[0].key, "b");
  EXPECT_EQ(second->common_prefixes, std::vector<std::string>{"c/"});
  // Only c/2 is left, inside the group already returned: this was the last page.
  EXPECT_EQ(second->next_page_token, "");
}

TEST(PageFromSortedObjectsTest, RefusesBadOptions) {
  std::vector<ObjectInfo> sorted = SortedInfos({"a/1", "a/2", "b/1"});
  for (int max_keys : {0, -1, 1001, 1 << 30}) {
    ListOptions options;
    options.max_keys = max_keys;
    EXPECT_STATUS(PageFromSortedObjects(sorted, options), StatusCode::kInvalidArgument) << max_keys;
  }
  for (std::string token : {"b/1", "a", "0"}) {
    ListOptions options;
    options.prefix = "a/";
    options.page_token = token;
    EXPECT_STATUS(PageFromSortedObjects(sorted, options), StatusCode::kInvalidArgument) << token;
    EXPECT_STATUS(ValidateListOptions(options), StatusCode::kInvalidArgument);
  }
  ListOptions good;
  good.prefix = "a/";
  good.page_token = "a/1";
  good.max_keys = 1000;
  auto page = PageFromSortedObjects(sorted, good);
  ASSERT_OK(page);
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].key, "a/2");
}

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

// ---------------------------------------------------------------------------------------------
// CopyObject between kinds of store.

TEST(CopyObjectTest, MemoryToLocalAndBackWithProgress) {
  TempDir dir;
  MemoryStore memory;
  auto local = LocalStore::Open(dir.Join("root"));
  ASSERT_OK(local);
  std::string data = RandomBytes(100003, 5);
  ASSERT_OK(memory.Put("src/obj", data));

  uint64_t reported = 0;
  int calls = 0;
  auto progress = [&](uint64_t n) {
    reported += n;
    ++calls;
  };
  ASSERT_OK(CopyObject(memory, "src/obj", **local, "dst/obj", 4096, progress));
  EXPECT_EQ(reported, data.size());
  EXPECT_EQ(calls, static_cast<int>((data.size() + 4095) / 4096));
  EXPECT_EQ(*(*local)->Get("dst/obj"), data);

  reported = 0;
  ASSERT_OK(CopyObject(**local, "dst/obj", memory, "back", 65536, progress));
  EXPECT_EQ(reported, data.size());
  EXPECT_EQ(*memory.Get("back"), data);

  // Default chunk size, no callback.
  ASSERT_OK(CopyObject(memory, "src/obj", **local, "again"));
  EXPECT_EQ(*(*local)->Get("again"), data);
}

TEST(CopyObjectTest, EmptyAndMissingObjects) {
  TempDir dir;
  MemoryStore memory;
  auto local = LocalStore::Open(dir.Join("root"));
  ASSERT_OK(local);
  ASSERT_OK(memory.Put("empty", ""));
  int calls = 0;
  ASSERT_OK(CopyObject(memory, "empty", **local, "empty", 1024, [&](uint64_t) { ++calls; }));
  EXPECT_EQ(calls, 0);
  auto copied = (*local)->Get("empty");
  ASSERT_OK(copied);
  EXPECT_EQ(*copied, "");

  EXPECT_STATUS(CopyObject(memory, "missing", **local, "out"), StatusCode::kNotFound);
  EXPECT_STATUS((*local)->Get("out"), StatusCode::kNotFound);
  EXPECT_EQ(FilesUnder(dir.Join("root")), std::vector<std::string>{"empty"});
}

}  // namespace
}  // namespace reel::storage
