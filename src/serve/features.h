// Feature extraction (`reel features`): one embedding per clip of a Reel dataset, taken from a
// model's layer, written as a dataset of their own that the loader reads and a head trains on
// (models/feature_head.h, `model: {name: head}`); train/registration.h's WithBackbone then makes
// the head and this model one version.
//
// Each clip is read as evaluation reads it (the loader's centre clip of the model's clip_frames
// and frame_stride, centre crop, normalisation: the model's own data settings), run through the
// model in batches of `batch` clips, and its embedding is the layer's output averaged over time
// and space (Model::Embed; the default, "avgpool", is what the classifier reads, so the head sees
// exactly what the backbone's classifier saw).
//
// Output: a dataset (dataset/manifest.h) in mode "features": the same splits, classes and keys
// as the input, each record "<key>.f32" (width little-endian float32 values), ".cls" and ".json"
// ({"source_record": the input's key}), and a manifest whose "features" object records
//   {"dim": width, "dtype": "float32", "layer": "avgpool",
//    "model": {"name", "version", "source" (a registry version URI, or an absolute path),
//              "config" (the model's config file, when one was given)},
//    "dataset": the input dataset's URI, "dataset_sha256": its manifest's SHA-256}.
// The manifest is written last: an output without it is unfinished, and a rerun replaces it.
//
// Errors: InvalidArgument for bad options or a layer the model lacks; Unimplemented for a model
// without named layers (TorchScript); NotFound for a missing dataset or split;
// FailedPrecondition when the output already holds a dataset; the loader's, the model's and the
// stores' errors.
// Thread-safety: ExtractFeatures may be called from any thread; the model's Embed is called from
// that thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "serve/model.h"

namespace reel::serve {

struct FeatureOptions {
  std::string dataset;              // the input dataset's URI
  std::string output;               // where the features dataset goes (any store URI)
  std::string layer = "avgpool";    // Model::Embed's layer
  std::vector<std::string> splits;  // empty: every split of the dataset
  int batch = 8;                    // clips per forward pass
  int workers = 2;                  // loader decode threads
  double shard_mib = 128;           // shard size of the output
  std::string model_config;         // recorded when the model was loaded with a config file

  Status Validate() const;  // InvalidArgument naming the field
};

struct FeatureSummary {
  std::string output;  // the features dataset's URI
  int64_t dim = 0;
  int64_t records = 0;                                  // embeddings written, all splits
  std::vector<std::pair<std::string, int64_t>> splits;  // per split
};

Result<FeatureSummary> ExtractFeatures(const FeatureOptions& options, const Model& model);

}  // namespace reel::serve
