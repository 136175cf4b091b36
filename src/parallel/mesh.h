// Hybrid parallelism: a mesh of D data-parallel replicas x S pipeline stages on D*S ranks. Rank r
// is replica r / S's stage r % S; it joins two groups of the world's Comm: its replica's pipeline
// (S ranks, where its rank is its stage, for pipeline.h) and its stage's data group (D ranks, one
// per replica), over which the stage's gradients are averaged after each pipeline step.
// Errors: InvalidArgument when the world is not a whole number of pipelines. Thread-safety: as
// Comm.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "base/status.h"
#include "parallel/comm.h"

namespace reel::parallel {

struct Mesh {
  int replicas = 1, stages = 1;
  int replica = 0, stage = 0;
  std::unique_ptr<Comm> pipeline;  // rank() == stage
  std::unique_ptr<Comm> data;      // rank() == replica
};

Result<Mesh> MakeMesh(Comm& world, int stages);

// Averages the gradients of `parameters` over `data` (Comm::AllReduceMean, in place); a
// parameter without a gradient is an error naming its index (every replica must have them all).
Status AverageGradients(Comm& data, const std::vector<at::Tensor>& parameters);

// torch.nn.utils.clip_grad_norm_ for parameters spread over the ranks of `group` (a pipeline's
// stages, each passing its own): the 2-norm of all their gradients together (one all-reduce),
// and every rank scales its gradients by the same max_norm / (norm + 1e-6) when that is below 1.
// Returns the norm before clipping.
Result<double> ClipGradNormAcross(Comm& group, const std::vector<at::Tensor>& parameters,
                                  double max_norm);

}  // namespace reel::parallel
