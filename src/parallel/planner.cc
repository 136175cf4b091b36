#include "parallel/planner.h"

#include <algorithm>
#include <cstdio>

#include "base/progress.h"

namespace reel::parallel {
namespace {

std::string Bytes(int64_t bytes) { return Progress::FormatBytes(static_cast<double>(bytes)); }

std::string Rate(double clips_per_second) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f clips/s", clips_per_second);
  return text;
}

Status CheckInputs(const LayoutInputs& in) {
  if (in.units.empty()) return InvalidArgumentError("a layout needs the model's units");
  if (in.measured_clips < 1 || in.batch < 1 || in.micro_batches < 1 || in.world < 1 ||
      in.worker_memory < 0 || in.link_bytes_per_s <= 0 || in.state_copies < 1 || in.margin < 0) {
    return InvalidArgumentError(
        "layout inputs out of range (clips, batch, micro-batches, world, "
        "memory, link speed, state copies, margin)");
  }
  return Status::Ok();
}

// The units' costs for `clips` clips (compute and activations grow with the clips).
std::vector<UnitCost> Scaled(const std::vector<UnitCost>& units, double factor) {
  std::vector<UnitCost> out = units;
  for (UnitCost& u : out) {
    u.seconds *= factor;
    u.activation_bytes = static_cast<int64_t>(static_cast<double>(u.activation_bytes) * factor);
  }
  return out;
}

// The pipeline of S stages on one replica, at the fastest cut that fits (or, when none does, the
// fastest cut, marked as not fitting).
Layout PipelineLayout(const LayoutInputs& in, int stages) {
  Layout l;
  l.stages = stages;
  l.replicas = in.world / stages;
  const int micro = std::min(in.micro_batches, in.batch);
  const bool one = stages == 1;
  // One stage runs the whole batch at once; a pipeline one micro-batch at a time.
  const double clips = one ? in.batch : static_cast<double>(in.batch) / micro;
  const std::vector<UnitCost> units = Scaled(in.units, clips / in.measured_clips);
  PartitionOptions options;
  options.state_copies = in.state_copies;
  options.in_flight = one ? std::vector<int>{1} : MicroBatchesInFlight(stages, micro, in.gpipe);
  options.memory_limit = in.worker_memory;
  Result<StagePlan> plan = BalanceStages(units, stages, options);
  l.fits = plan.ok();
  if (!plan.ok()) {
    options.memory_limit = 0;
    plan = BalanceStages(units, stages, options);
  }
  l.cuts = plan->cuts;
  l.memory_bytes = *std::max_element(plan->memory_bytes.begin(), plan->memory_bytes.end());
  const int rounds = one ? 1 : micro + stages - 1;
  l.compute_seconds = plan->slowest_seconds * rounds;
  int64_t boundary = 0, largest_stage = 0;
  for (int s = 0; s < stages; ++s) {
    if (s > 0) boundary = std::max(boundary, units[l.cuts[s] - 1].activation_bytes);
    int64_t parameters = 0;
    for (int u = l.cuts[s]; u < l.cuts[s + 1]; ++u) parameters += units[u].parameter_bytes;
    largest_stage = std::max(largest_stage, parameters);
  }
  l.message_seconds = one ? 0 : 2.0 * boundary * rounds / in.link_bytes_per_s;
  const double d = l.replicas;
  l.allreduce_seconds = 2.0 * (d - 1) / d * largest_stage / in.link_bytes_per_s;
  // Reel's reducer all-reduces buckets as backward fills them (reducer.h).
  constexpr double kBackwardShare = 2.0 / 3;
  l.exposed_allreduce_seconds =
      one ? std::max(0.0, l.allreduce_seconds - kBackwardShare * l.compute_seconds)
          : l.allreduce_seconds;
  l.step_seconds = l.compute_seconds + l.message_seconds + l.exposed_allreduce_seconds;
  l.clips_per_second = l.step_seconds > 0 ? l.replicas * in.batch / l.step_seconds : 0;
  return l;
}

const Layout* Fastest(const std::vector<Layout>& layouts) {
  const Layout* best = nullptr;
  for (const Layout& l : layouts) {
    if (l.fits && (best == nullptr || l.clips_per_second > best->clips_per_second)) best = &l;
  }
  return best;
}

std::string Why(const LayoutInputs& in, const Layout& data, const Layout& chosen) {
  const std::string memory = in.worker_memory > 0 ? Bytes(in.worker_memory) : "unlimited memory";
  if (chosen.stages == 1) {
    return "data parallel: a replica needs " + Bytes(data.memory_bytes) + " of the " + memory +
           " a worker has, estimated " + Rate(data.clips_per_second) +
           (in.world > 1 ? "; no pipeline layout is " +
                               std::to_string(static_cast<int>(in.margin * 100)) + "% faster"
                         : "");
  }
  const std::string layout = LayoutName(chosen) + ": ";
  const std::string estimate = "; estimated " + Rate(chosen.clips_per_second);
  if (!data.fits) {
    return layout + "a replica needs " + Bytes(data.memory_bytes) + ", more than the " + memory +
           " a worker has; cut into " + std::to_string(chosen.stages) +
           " stages the largest needs " + Bytes(chosen.memory_bytes) + estimate;
  }
  return layout + "estimated " + Rate(chosen.clips_per_second) + " against data parallel's " +
         Rate(data.clips_per_second) + " (its gradient all-reduce takes " +
         std::to_string(static_cast<int>(1e3 * data.allreduce_seconds)) + " ms of a " +
         std::to_string(static_cast<int>(1e3 * data.step_seconds)) + " ms step)";
}

}  // namespace

std::vector<int> MicroBatchesInFlight(int stages, int micro_batches, bool gpipe) {
  std::vector<int> in_flight(static_cast<size_t>(std::max(stages, 0)));
  for (int s = 0; s < stages; ++s) {
    in_flight[s] = gpipe ? micro_batches : std::min(stages - s, micro_batches);
  }
  return in_flight;
}

std::string LayoutName(const Layout& layout) {
  const std::string shape = std::to_string(layout.replicas) + " x " + std::to_string(layout.stages);
  if (layout.stages == 1) return shape + " (data parallel)";
  if (layout.replicas == 1) return shape + " (pipeline)";
  return shape + " (" + std::to_string(layout.replicas) + " replicas of " +
         std::to_string(layout.stages) + " stages)";
}

Result<LayoutChoice> ChooseLayout(const LayoutInputs& in) {
  REEL_RETURN_IF_ERROR(CheckInputs(in));
  LayoutChoice choice;
  const int max_stages = std::min<int>(in.world, static_cast<int>(in.units.size()));
  for (int s = 1; s <= max_stages; ++s) {
    if (in.world % s == 0) choice.considered.push_back(PipelineLayout(in, s));
  }
  const Layout& data = choice.considered.front();
  const Layout* best = Fastest(choice.considered);
  if (best == nullptr) {
    const Layout& deepest = choice.considered.back();
    return InvalidArgumentError(
        "no layout of " + std::to_string(in.world) + " processes fits " + Bytes(in.worker_memory) +
        " per worker: a replica needs " + Bytes(data.memory_bytes) + ", and cut into " +
        std::to_string(deepest.stages) + " stages its largest still needs " +
        Bytes(deepest.memory_bytes) + " (more processes, fewer micro-batches in flight, or a " +
        "smaller batch)");
  }
  if (data.fits && best->clips_per_second < data.clips_per_second * (1 + in.margin)) best = &data;
  choice.chosen = *best;
  choice.why = Why(in, data, choice.chosen);
  return choice;
}

}  // namespace reel::parallel
