// `reel ingest` with raw videos on S3 and the dataset written to S3, against the real Ceph
// radosgw that the ctest fixture "ceph" starts.
#include <gtest/gtest.h>
#include <unistd.h>

#include "datagen/datagen.h"
#include "dataset/manifest.h"
#include "dataset/shard_reader.h"
#include "ingest/pipeline.h"
#include "media/input.h"
#include "media/probe.h"
#include "storage/open.h"
#include "storage/s3_store.h"
#include "storage/testing/ceph_env.h"
#include "testing/status_matchers.h"

namespace reel::ingest {
namespace {

TEST(IngestS3Test, RawVideosOnS3BecomeADatasetOnS3) {
  ASSERT_TRUE(storage::testing::LoadCephEnvironment()) << "run through ctest (fixture 'ceph')";
  const std::string bucket = "reel-ingest-" + std::to_string(::getpid());
  auto options = storage::S3Options::FromEnvironment();
  ASSERT_OK(options);
  auto s3 = storage::S3Store::Open(bucket, "", *options);
  ASSERT_OK(s3);
  ASSERT_OK((*s3)->CreateBucket());

  datagen::DatagenOptions dg;
  dg.videos_per_class = 2;
  dg.train_fraction = 0.5;
  dg.width = 64;
  dg.height = 48;
  dg.show_progress = false;
  auto generated = datagen::GenerateDataset(**s3, "raw", dg, 2);
  ASSERT_OK(generated);

  IngestOptions o;
  o.source = "s3://" + bucket + "/raw";
  o.output = "s3://" + bucket + "/datasets/synthetic";
  o.clip.clip_frames = 8;
  o.clip.short_side = 32;
  o.workers = 2;
  o.progress = false;
  auto report = RunIngest(o);
  ASSERT_OK(report);
  EXPECT_EQ(report->videos_ingested, 16);
  EXPECT_TRUE(report->failed.empty());

  auto out = storage::OpenStore(o.output);
  ASSERT_OK(out);
  auto manifest = dataset::Manifest::Read(**out, "");
  ASSERT_OK(manifest);
  EXPECT_EQ(manifest->name, "synthetic");
  EXPECT_EQ(manifest->splits.size(), 2u);
  EXPECT_EQ(manifest->splits["train"].records + manifest->splits["test"].records,
            static_cast<uint64_t>(report->clips["train"] + report->clips["test"]));
  // One record read back with a ranged GET through the shard index.
  auto reader = dataset::ShardReader::Open(**out, "", "test", 0);
  ASSERT_OK(reader);
  ASSERT_GT((*reader)->num_records(), 0u);
  auto record = (*reader)->ReadRecord((*reader)->num_records() - 1);
  ASSERT_OK(record);
  auto info = media::Probe(media::Input::View(record->payload, record->key));
  ASSERT_OK(info);
  EXPECT_EQ(info->frame_count, 8);
  EXPECT_EQ(record->metadata["source"].get<std::string>().rfind("s3://" + bucket + "/raw/", 0), 0u);

  // A second run finds the dataset complete.
  auto again = RunIngest(o);
  ASSERT_OK(again);
  EXPECT_TRUE(again->already_complete);
}

}  // namespace
}  // namespace reel::ingest
