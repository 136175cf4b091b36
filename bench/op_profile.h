// What LibTorch runs while a profile is open, per operator: calls, self time (its own, without
// the operators it called) and the FLOPs of convolutions and matrix products counted from their
// actual shapes (forward and backward). A training step's per-layer view of where the time goes,
// and the FLOPs a model does, without a FLOP table to keep in step with the model.
//
//   std::vector<reel::bench::OpStats> ops;
//   { reel::bench::OpProfile profile; model->forward(x); ops = profile.Finish(); }
//
// One profile at a time per process (it observes every thread through a global callback).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace reel::bench {

struct OpStats {
  std::string name;  // "aten::convolution_backward"
  int64_t calls = 0;
  double self_seconds = 0;
  double seconds = 0;  // with the operators it called (a convolution's kernel is its callee)
  double flops = 0;    // multiply-adds count 2; 0 for operators not counted
};

class OpProfile {
 public:
  OpProfile();  // starts observing
  ~OpProfile();
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;

  // Stops observing; the operators seen, by self time, largest first.
  std::vector<OpStats> Finish();

 private:
  uint64_t handle_ = 0;
  bool finished_ = false;
};

// The FLOPs in a list of OpStats.
double TotalFlops(const std::vector<OpStats>& ops);

}  // namespace reel::bench
