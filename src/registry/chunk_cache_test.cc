#include "registry/chunk_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/files.h"
#include "base/hash.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::registry {
namespace {

TEST(ChunkCacheTest, DropsTheLeastRecentlyUsedBeyondItsBudget) {
  ChunkCache cache(10);
  cache.Insert("a", "1234");
  cache.Insert("b", "5678");
  ASSERT_NE(cache.Find("a"), nullptr);  // a is now more recent than b
  cache.Insert("c", "90");
  EXPECT_EQ(cache.bytes(), 10u);
  cache.Insert("d", "x");
  EXPECT_EQ(cache.Find("b"), nullptr) << "b was the least recently used";
  ASSERT_NE(cache.Find("a"), nullptr);
  EXPECT_EQ(*cache.Find("a"), "1234");
  EXPECT_EQ(*cache.Find("c"), "90");
  EXPECT_EQ(*cache.Find("d"), "x");
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.bytes(), 7u);
}

TEST(ChunkCacheTest, KeepsOneCopyPerAddressAndNothingLargerThanItsBudget) {
  ChunkCache cache(4);
  cache.Insert("a", "12");
  cache.Insert("a", "12");
  EXPECT_EQ(cache.bytes(), 2u);
  cache.Insert("big", "12345");
  EXPECT_EQ(cache.Find("big"), nullptr);
  EXPECT_NE(cache.Find("a"), nullptr) << "a chunk it cannot keep evicts nothing";
  ChunkCache none(0);
  none.Insert("a", "1");
  EXPECT_EQ(none.size(), 0u);
}

TEST(ChunkCacheTest, BytesFoundStayValidAfterEviction) {
  ChunkCache cache(4);
  cache.Insert("a", "1234");
  ChunkBytes held = cache.Find("a");
  cache.Insert("b", "5678");
  EXPECT_EQ(cache.Find("a"), nullptr);
  EXPECT_EQ(*held, "1234");
}

// What one process inserted, the next finds in the folder, checked against the checksum it was
// written with.
TEST(ChunkCacheTest, AFolderKeepsChunksForTheNextProcess) {
  reel::testing::TempDir dir;
  const std::string folder = dir.Join("bases");
  const std::string a(1000, 'a'), b(1000, 'b');
  const std::string address_a = Sha256Hex(a), address_b = Sha256Hex(b);
  {
    ChunkCache first(4000, folder);
    first.Insert(address_a, a);
    first.Insert(address_b, b);
    ASSERT_OK(first.Persist());
    ASSERT_OK(first.Persist()) << "nothing new: writes nothing";
  }
  EXPECT_TRUE(std::filesystem::exists(folder + "/" + address_a));
  ChunkCache next(4000, folder);
  ChunkBytes found = next.Find(address_b);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(*found, b);
  EXPECT_EQ(next.size(), 1u) << "kept in memory once read";
  ChunkCache memory_only(4000);
  EXPECT_EQ(memory_only.Find(address_a), nullptr);
  EXPECT_EQ(next.Find("not-an-address/../x"), nullptr);
}

// A file whose bytes no longer match their checksum (damaged) is a miss, and is removed: a wrong
// delta base would make the next version unreadable.
TEST(ChunkCacheTest, AFolderFileDamagedSinceItWasWrittenIsAMiss) {
  reel::testing::TempDir dir;
  const std::string a(1000, 'a'), b(1000, 'b');
  const std::string address_a = Sha256Hex(a), address_b = Sha256Hex(b);
  {
    ChunkCache first(4000, dir.path());
    first.Insert(address_a, a);
    first.Insert(address_b, b);
    ASSERT_OK(first.Persist());
  }
  ASSERT_OK_AND_ASSIGN(std::string file, ReadFileToString(dir.Join(address_a)));
  file[500] = 'x';
  ASSERT_OK(WriteFileAtomically(dir.Join(address_a), file));
  ASSERT_OK_AND_ASSIGN(file, ReadFileToString(dir.Join(address_b)));
  ASSERT_OK(WriteFileAtomically(dir.Join(address_b), file.substr(0, 600)));
  ChunkCache cache(4000, dir.path());
  EXPECT_EQ(cache.Find(address_a), nullptr) << "a byte changed";
  EXPECT_FALSE(std::filesystem::exists(dir.Join(address_a))) << "and removed";
  EXPECT_EQ(cache.Find(address_b), nullptr) << "truncated";
  EXPECT_EQ(cache.size(), 0u);
}

// Persist trims the folder to the budget, the oldest files out; chunks dropped from memory before
// a Persist are not written.
TEST(ChunkCacheTest, PersistKeepsTheFolderWithinTheBudget) {
  reel::testing::TempDir dir;
  std::vector<std::string> chunks, addresses;
  for (char c : std::string("abcd")) {
    chunks.emplace_back(1000, c);
    addresses.push_back(Sha256Hex(chunks.back()));
  }
  {
    ChunkCache first(2000, dir.path());
    first.Insert(addresses[0], chunks[0]);
    first.Insert(addresses[1], chunks[1]);
    ASSERT_OK(first.Persist());
  }
  // Later write times for the next process's chunks, whatever the file system's resolution.
  const auto old_time = std::filesystem::file_time_type::clock::now() - std::chrono::hours(1);
  for (int i : {0, 1}) std::filesystem::last_write_time(dir.Join(addresses[i]), old_time);
  {
    ChunkCache second(2000, dir.path());
    second.Insert(addresses[2], chunks[2]);
    second.Insert(addresses[3], chunks[3]);
    second.Insert(addresses[0], chunks[0]);  // evicts chunk 2 from memory before any Persist
    ASSERT_OK(second.Persist());
  }
  EXPECT_FALSE(std::filesystem::exists(dir.Join(addresses[2]))) << "evicted before Persist";
  EXPECT_TRUE(std::filesystem::exists(dir.Join(addresses[3])));
  EXPECT_TRUE(std::filesystem::exists(dir.Join(addresses[0]))) << "already there: made recent";
  EXPECT_FALSE(std::filesystem::exists(dir.Join(addresses[1]))) << "the oldest beyond 2000 bytes";
  EXPECT_EQ(TreeBytes(dir.path()), 2 * (1000u + 8u)) << "two chunks and their checksums";
}

}  // namespace
}  // namespace reel::registry
