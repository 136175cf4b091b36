// Model-parallel serving: one Reel video ResNet split into two stages by its units (the stem,
// each residual block, the head), the first run by the serving process and the second by a stage
// process, for a model whose weights do not fit one worker. Each process frees the weights of the
// units it does not run once the model is loaded (loading reads the whole file once).
//
// LoadModel with LoadOptions::stages = 2 builds the front: it cuts where the larger side holds the
// fewest parameter bytes (the most even split of the weights), starts `reel serve-stage` (or
// LoadOptions::stage_command) with that cut, and sends each batch's first-stage output to it.
// Scores equal one process's: the same units run in the same order on the same weights.
//
// The stage's HTTP endpoint, on the shared HTTP layer:
//   POST /stage/v1/forward   X-Reel-From-Unit: U; body: int64 rank, int64 dims[rank], then the
//                            float32 values; the answer: the logits [n, classes] the same way.
// A body that is not such a tensor, or a cut other than the server's, is 400 naming why.
//
// Errors: InvalidArgument for a model without units (TorchScript, the frame CNNs) or a cut
// outside 1..units-1; Unavailable when the stage cannot be reached (at load and per forward).
// Thread-safety: StageServer's handlers run on its threads; its members may be called from any.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "serve/model.h"

namespace reel::serve {

struct StageServerOptions {
  std::string source;  // what LoadModel takes (not TorchScript)
  LoadOptions load;    // registry, config, precision
  int from_unit = -1;  // the first unit this stage runs; -1: the balanced cut LoadModel makes
  std::string host = "127.0.0.1";
  int port = 0;
};

class StageServer {
 public:
  static Result<std::unique_ptr<StageServer>> Start(const StageServerOptions& options);
  ~StageServer();
  StageServer(const StageServer&) = delete;
  StageServer& operator=(const StageServer&) = delete;

  std::string address() const;  // "127.0.0.1:port"
  int from_unit() const;
  int unit_count() const;
  int64_t parameter_bytes() const;  // of the units it runs
  std::string Describe() const;     // "units 4-5 (0.20 MB)"

 private:
  struct Impl;
  explicit StageServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace reel::serve
