// Offline inference (`reel predict`): every video of a folder, an S3 prefix, a CSV/JSONL list or
// an ingested dataset classified by one model, with the server's decode and batching path
// (ScoreVideos in infer_io.h: VideoToSamples, then a Batcher over the model's instances; a
// video's scores are the mean of its clips'), written as JSON lines to any store. Resumable after
// kill -9: a rerun skips what is finished and never writes a line twice.
//
// Steps: list the inputs → drop what earlier runs finished → decode and score them on `workers`
// threads (each decodes one video at a time and hands its clips to the batcher, whose
// `instances` threads run the model on batches of up to `max_batch` clips drawn from every
// worker) → write the lines in listing order, one part at a time.
//
// Inputs (`input`, a path or URI):
//   a folder or prefix      every video under it (ingest::IsVideoKey), recursively, keyed by its
//                           path below the folder ("Class/v.avi")
//   one video file          itself, keyed by its file name
//   LIST.csv                a header naming a "path" (or "uri") column and, optionally, "label"
//                           (the true class, copied to the output); a Kinetics CSV
//                           (youtube_id,...) is listed as `reel ingest` lists it
//   LIST.jsonl              one object a line with "path" (or "uri") and optional "label"
//                           In both, a relative path is a key below the list's folder; an
//                           absolute path or a URI (s3://...) is read as it is. A path listed
//                           twice is predicted once. Keyed by the path as written.
//   a dataset               a folder with manifest.json (or the manifest.json itself): the
//                           source videos its clips were cut from (each record's "source"),
//                           keyed by that URI, with the record's class as the true label and its
//                           split. Why source videos and not the stored clips: predicting means
//                           classifying the videos a user has, and the stored clips are cut and
//                           resized for training (frames-mode datasets hold no video at all);
//                           `reel eval` scores the stored clips. A source that is gone gives an
//                           error line.
//
// Output (`output`, a folder on any store):
//   OUT/part-00000.jsonl    `part_size` lines each (the last part of a run may hold fewer), one
//   OUT/part-00001.jsonl    JSON object per input:
//     {"key": "Class/v.avi", "source": "file:///data/raw/Class/v.avi",
//      "true_label": "Class", "split": "val",                          (when the listing knows)
//      "top": [{"label": "Grow", "index": 3, "score": 0.91}, ...],      (top_k, best first)
//      "timeline": [{"start_s": 0, "end_s": 1.2, "index": 3, "label": "Grow", "score": 0.8}]}
//     or, for an input that cannot be read or decoded,
//     {"key": "bad.mp4", "source": "...", "error": "bad.mp4 is not a video ..."}
//   OUT/progress.json       {"format": "reel-predictions", "version": 1,
//                            "model": {"name", "version", "source"},
//                            "settings": {"top_k", "clips", "timeline"}, "complete": false,
//                            "parts": [{"name": "part-00000.jsonl", "lines": 1000,
//                                       "errors": 2}, ...]}
// Each part is put whole (atomically) once full, then progress.json is rewritten to list it: a
// part is finished when progress.json names it. A rerun deletes parts it does not name (a run
// killed between the two writes), reads the finished parts' keys and predicts the rest, so
// after kill -9 no line is lost or written twice; progress.json stays small (parts, not keys).
// A rerun with more inputs (new videos under the prefix) predicts only the new ones; a rerun
// with another model version or other settings is refused. One run per output at a time.
// "complete" is true when the last run finished every input it listed.
//
// Errors: an input that cannot be read or decoded is an error line, never fatal (NotFound,
// PermissionDenied, InvalidArgument, DataLoss, FailedPrecondition, Unimplemented, OutOfRange
// from the store or the decoder). The run fails on InvalidArgument for bad options, NotFound for
// an input with no videos, FailedPrecondition for an output holding another model's or other
// settings' predictions, DataLoss for a finished part that does not match progress.json, and
// the model's, the batcher's and the stores' other errors (Unavailable, Internal, ...), after
// which a rerun resumes.
// Thread-safety: Predict may be called from any thread; it owns its workers. The model's Forward
// is called from `instances` threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "serve/model.h"
#include "storage/object_store.h"

namespace reel::serve {

struct PredictOptions {
  std::string input;   // a folder, prefix, video, .csv/.jsonl list or dataset (see above)
  std::string output;  // the folder the parts and progress.json go to
  int top_k = 5;
  int clips = 0;          // clips per video; 0: the model's own setting
  bool timeline = false;  // each clip's span, best class and score
  int workers = 0;        // decoding threads; 0: one per core
  int instances = 1;      // forward passes at once
  int max_batch = 8;      // clips per forward pass
  int part_size = 1000;   // lines per part
  // When set, the output is written here instead of opening `output` (tests, embedding); not
  // owned, must outlive the call.
  storage::ObjectStore* output_store = nullptr;

  // InvalidArgument naming the bad field.
  Status Validate() const;
};

struct PredictInput {
  std::string key;         // names it in the output; unique in a listing
  std::string source;      // the URI it is read from
  std::string object;      // its key in the listing's store; "" when read from `source`'s own store
  std::string true_label;  // from the listing; "" when unknown
  std::string split;       // from a dataset; "" otherwise
  std::string error;       // the listing already knows it cannot be read ("" otherwise)
};

struct PredictListing {
  std::string kind;  // "folder", "video", "list", "kinetics" or "dataset"
  std::shared_ptr<storage::ObjectStore> store;  // where `object` keys are read
  std::vector<PredictInput> inputs;             // in output order
};

// The inputs `uri` names, as described above; `parallelism` threads read a dataset's records.
// Errors: NotFound when it names no video (or a missing list, or a dataset without manifest),
// InvalidArgument for a malformed list (file:line), the stores' errors.
Result<PredictListing> ListPredictInputs(const std::string& uri, int parallelism = 8);

struct PredictSummary {
  std::string output;     // the output folder's URI
  int64_t listed = 0;     // inputs listed
  int64_t earlier = 0;    // finished by earlier runs, skipped
  int64_t predicted = 0;  // lines written by this run, errors among them
  int64_t failed = 0;     // error lines written by this run
  int64_t parts = 0;      // parts in the output now
};

Result<PredictSummary> Predict(const PredictOptions& options, Model& model);

}  // namespace reel::serve
