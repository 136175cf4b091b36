// The raw-video collections users already have, turned into one listing that `reel ingest`
// plans clips from. Videos may live on any ObjectStore (a local folder, S3, a shared FS).
//
//   UCF101 folders   <root>/<Class>/<video>  with optional classInd.txt ("1 Class" lines) and
//                    trainlistNN.txt / testlistNN.txt splits, at the root or in
//                    <root>/ucfTrainTestlist/. Without split files every video is "train".
//   Kinetics CSV     label,youtube_id,time_start,time_end,split  (a header row), videos named
//                    {youtube_id}_{start:06d}_{end:06d}.<ext> anywhere under the video root.
//   Manifest         CSV with a header naming path,label[,start,end,split], or JSONL objects
//                    with the same fields; paths are keys relative to the manifest's folder.
//
// Class indices follow classInd.txt when present, otherwise label names sorted (numerically
// when every label is an integer). Splits are normalised to "train", "val" or "test".
// Rows that name missing videos are not errors: they are returned in `missing` for the report.
// Errors: NotFound (no such root or listing file), InvalidArgument with file:line for malformed
// listings (wrong column count, unknown class in a split file, bad times), and store errors.
// Thread-safety: free functions; the store must be thread-safe (all ObjectStores are).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "storage/object_store.h"

namespace reel::ingest {

struct SourceVideo {
  std::string key;      // key in the source store
  uint64_t size = 0;    // bytes, as listed
  std::string etag;     // as listed; part of the listing hash, so a changed source is noticed
  int label = -1;       // index into SourceListing::class_names
  std::string split;    // "train", "val" or "test"
  double start_s = -1;  // a segment of the video to use; -1 = from the start / to the end
  double end_s = -1;
};

struct MissingVideo {
  std::string reference;  // what the listing named
  std::string reason;
};

struct SourceListing {
  std::string format;  // "ucf101", "kinetics", "manifest"
  std::vector<std::string> class_names;
  std::vector<SourceVideo> videos;  // sorted by key, then start time
  std::vector<MissingVideo> missing;
  // xxh3-128 over the canonical listing (keys, sizes, etags, labels, splits, segments): equal
  // hashes mean ingest would see the same input.
  std::string hash;
};

// UCF101 layout under `root` ("" for the store root). `split_number` picks trainlistNN/testlistNN.
Result<SourceListing> ListUcf101(storage::ObjectStore& store, const std::string& root,
                                 int split_number = 1);
// `csv_key` in `store`; videos are searched under `video_root`.
Result<SourceListing> ListKinetics(storage::ObjectStore& store, const std::string& csv_key,
                                   const std::string& video_root);
// A .csv or .jsonl manifest at `manifest_key`.
Result<SourceListing> ListManifest(storage::ObjectStore& store, const std::string& manifest_key);

// Picks the format: a key ending in .jsonl or a .csv whose header has "path" -> manifest; a .csv
// whose header has "youtube_id" -> Kinetics (videos under the CSV's folder); otherwise a folder
// in UCF101 layout.
Result<SourceListing> ListSources(storage::ObjectStore& store, const std::string& key_or_root);

// Video file extensions ingest considers (lower case, with the dot).
bool IsVideoKey(const std::string& key);

}  // namespace reel::ingest
