// Helpers shared by shard_writer_test.cc and shard_reader_test.cc: opening writers and readers,
// and the ShardTest fixture (one class for both files, as gtest requires of a parameterized
// suite; shard_writer_test.cc instantiates it). Tests only.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "dataset/record.h"
#include "dataset/shard_reader.h"
#include "dataset/shard_writer.h"
#include "dataset/testing/records.h"
#include "storage/object_store.h"
#include "testing/status_matchers.h"

namespace reel::dataset::testing {

// A writer for root/split; a failure fails the calling test.
inline std::unique_ptr<ShardWriter> NewWriter(storage::ObjectStore& store,
                                              ShardWriterOptions options,
                                              std::string_view root = "ds",
                                              std::string_view split = "train") {
  auto writer = ShardWriter::Create(store, root, split, std::move(options));
  EXPECT_OK(writer);
  return std::move(writer).value();
}

// Shard `number` of root/split, or null (and a test failure) when it does not open.
inline std::unique_ptr<ShardReader> OpenShard(storage::ObjectStore& store, uint32_t number,
                                              std::string_view root = "ds",
                                              std::string_view split = "train") {
  auto reader = ShardReader::Open(store, root, split, number);
  EXPECT_OK(reader);
  return reader.ok() ? std::move(reader).value() : nullptr;
}

// Runs each test against a fresh store of the parameter's kind.
class ShardTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  ShardTest() : store_(GetParam()) {}
  storage::ObjectStore& store() { return store_.get(); }

  // Writes `records` with the options; returns the published shards.
  std::vector<ShardStats> WriteAll(const std::vector<Record>& records, ShardWriterOptions options,
                                   std::string_view split = "train") {
    auto writer = NewWriter(store(), std::move(options), "ds", split);
    for (const Record& r : records) {
      Status s = writer->AddRecord(r);
      EXPECT_OK(s);
    }
    Status s = writer->Finish();
    EXPECT_OK(s);
    return writer->shards();
  }

  TestStore store_;
};

}  // namespace reel::dataset::testing
