#include "dist/mesh.h"

#include <string>

namespace reel::dist {

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

}  // namespace reel::dist
