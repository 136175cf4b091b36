#include "dist/mesh.h"

#include <map>
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
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const at::Tensor& p : parameters) {
    if (!p.grad().defined()) {
      return InvalidArgumentError("a parameter of shape " + std::to_string(p.dim()) +
                                  "-d has no gradient to average");
    }
    by_dtype[p.scalar_type()].push_back(p.grad());
  }
  if (data.world_size() == 1) return Status::Ok();
  for (auto& [dtype, grads] : by_dtype) {
    std::vector<at::Tensor> flat_parts;
    for (const at::Tensor& g : grads) flat_parts.push_back(g.reshape({-1}));
    at::Tensor flat = at::cat(flat_parts);
    REEL_RETURN_IF_ERROR(data.AllReduce(flat, "stage gradients"));
    flat.div_(data.world_size());
    int64_t offset = 0;
    for (at::Tensor& g : grads) {
      g.copy_(flat.narrow(0, offset, g.numel()).view_as(g));
      offset += g.numel();
    }
  }
  return Status::Ok();
}

}  // namespace reel::dist
