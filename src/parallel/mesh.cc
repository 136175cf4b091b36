#include "parallel/mesh.h"

#include <cmath>
#include <string>

namespace reel::parallel {

Result<Mesh> MakeMesh(Comm& world, int stages) {
  if (stages < 1 || world.world_size() % stages != 0) {
    return InvalidArgumentError("a world of " + std::to_string(world.world_size()) +
                                " ranks is not a whole number of " + std::to_string(stages) +
                                "-stage pipelines");
  }
  Mesh m;
  m.stages = stages;
  m.replicas = world.world_size() / stages;
  m.replica = world.rank() / stages;
  m.stage = world.rank() % stages;
  std::vector<int> pipeline, data;
  for (int s = 0; s < stages; ++s) pipeline.push_back(m.replica * stages + s);
  for (int d = 0; d < m.replicas; ++d) data.push_back(d * stages + m.stage);
  REEL_ASSIGN_OR_RETURN(m.pipeline, world.Split(pipeline, "pipeline" + std::to_string(m.replica)));
  REEL_ASSIGN_OR_RETURN(m.data, world.Split(data, "data" + std::to_string(m.stage)));
  return m;
}

Status AverageGradients(Comm& data, const std::vector<at::Tensor>& parameters) {
  std::vector<at::Tensor> grads;
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (!parameters[i].grad().defined()) {
      return InvalidArgumentError("stage parameter " + std::to_string(i) +
                                  " has no gradient to average");
    }
    grads.push_back(parameters[i].grad());
  }
  if (data.world_size() == 1) return Status::Ok();
  return data.AllReduceMean(grads, "stage gradients");
}

Result<double> ClipGradNormAcross(Comm& group, const std::vector<at::Tensor>& parameters,
                                  double max_norm) {
  at::Tensor squares = at::zeros({1}, at::kDouble);
  for (const at::Tensor& p : parameters) {
    if (p.grad().defined()) squares += p.grad().to(at::kDouble).pow(2).sum();
  }
  if (group.world_size() > 1) {
    REEL_RETURN_IF_ERROR(group.AllReduce(squares, "the gradient norm across stages"));
  }
  const double norm = std::sqrt(squares.item<double>());
  const double scale = max_norm / (norm + 1e-6);
  if (scale < 1) {
    for (const at::Tensor& p : parameters) {
      if (p.grad().defined()) p.grad().mul_(scale);
    }
  }
  return norm;
}

}  // namespace reel::parallel
