// The ObjectStore contract's shared functions: key validation, paging (PageFromSortedObjects)
// and CopyObject. The conformance suite every store passes is in
// object_store_conformance_test.cc.
#include "storage/object_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "storage/listing.h"
#include "storage/local_store.h"
#include "storage/memory_store.h"
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
