#include "registry/chunk_cache.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

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
  std::shared_ptr<const std::string> held = cache.Find("a");
  cache.Insert("b", "5678");
  EXPECT_EQ(cache.Find("a"), nullptr);
  EXPECT_EQ(*held, "1234");
}

}  // namespace
}  // namespace reel::registry
