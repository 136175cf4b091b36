// Test support: `reel datagen` videos ingested into a dataset at any store URI, the small real
// dataset the loader, trainer and feature tests read. Tests only.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "datagen/datagen.h"
#include "dataset/layout.h"
#include "ingest/pipeline.h"
#include "storage/open.h"

namespace reel::ingest::testing {

struct DatagenDataset {
  int videos_per_class = 3;
  int width = 48, height = 40;
  int frames = 0;  // every video this long; 0: datagen's own lengths
  dataset::DatasetMode mode = dataset::DatasetMode::kVideo;
  int clip_frames = 8, short_side = 32;
  uint64_t shard_bytes = 64 << 10;
};

// Generates the videos under mem://<name>-raw/ucf (8 classes) and ingests them into `output`.
inline Result<IngestReport> MakeDatagenDataset(const std::string& name, const std::string& output,
                                               const DatagenDataset& d = {}) {
  const std::string raw = "mem://" + name + "-raw";
  REEL_ASSIGN_OR_RETURN(auto store, storage::OpenStore(raw));
  datagen::DatagenOptions g;
  g.videos_per_class = d.videos_per_class;
  g.width = d.width;
  g.height = d.height;
  if (d.frames > 0) g.min_frames = g.max_frames = d.frames;
  g.show_progress = false;
  REEL_RETURN_IF_ERROR(datagen::GenerateDataset(*store, "ucf", g, 2));
  IngestOptions io;
  io.source = raw + "/ucf";
  io.output = output;
  io.encode.mode = d.mode;
  io.clip.clip_frames = d.clip_frames;
  io.clip.short_side = d.short_side;
  io.shard_bytes = d.shard_bytes;
  io.progress = false;
  return RunIngest(io);
}

}  // namespace reel::ingest::testing
