// Pipeline parallelism measured (issue 18): Reel's R(2+1)D cut into S stages by measured cost,
// one rank per stage over Gloo on loopback (a thread each, one LibTorch thread each: S <= cores),
// trained with GPipe and 1F1B over M micro-batches. Per schedule and M it prints the step time,
// the bubble of the busiest stage (the share of the step it sits idle, 1 - busy/step: the theory
// (S-1)/(M+S-1) is about it, as the others also wait for it when stages are unequal) beside the
// average over stages, and the micro-batches each stage holds at once with the activation bytes
// that means (from the units' outputs, a lower bound).
//
//   parallel_bench [--stages 2] [--batch 16] [--width 16] [--frames 8] [--size 56] [--steps 3]
//
// --crossover 1: data parallel against pipeline on 2 ranks, and where one overtakes the other.
// Over widths 32, 64, 128 (parameters grow with the square of the width) and clip sizes 8, 16,
// 32 (compute and activations grow with the size, parameters do not), it measures 2 x 1 (each rank
// a replica on --batch clips, gradients through Reel's reducer) and 1 x 2 (a pipeline of 2 stages,
// 1F1B over 4 micro-batches of --batch clips) in clips per second, beside parallel/planner.h's
// estimates from the units' measured costs and the measured all-reduce bandwidth, and says whether
// the planner picks the layout that measured faster.
//
//   parallel_bench --crossover 1 [--frames 4] [--batch 8] [--steps 3]
//
// --scaling 1: every parallel form on the same model with --batch clips per replica, as step
// time, clips per second and scaling against one process: data parallel (Reel's reducer) on 2
// and 4 ranks, pipelines of 2 and 4 stages (1F1B, 4 micro-batches), 2 replicas x 2 stages, and
// parameter servers (BSP, one server in this process, SGD there) with 2 and 4 workers. Ranks are
// threads of one LibTorch thread each: past the cores they share them, which the scaling shows.
//
// Every mode ends with bench/report.h's table (--json FILE writes it): the bubble against its
// theory, each form's clips/s against linear scaling, the pipeline against data parallel.
//
//   parallel_bench --scaling 1 [--batch 8] [--width 16] [--frames 8] [--size 56] [--steps 3]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/allocator.h"
#include "bench/report.h"
#include "models/video_resnet.h"
#include "parallel/mesh.h"
#include "parallel/partition.h"
#include "parallel/pipeline.h"
#include "parallel/planner.h"
#include "parallel/ps_client.h"
#include "parallel/ps_server.h"
#include "parallel/reducer.h"
#include "parallel/testing/thread_world.h"

namespace reel::parallel {
namespace {

using models::VideoResNet;

struct Args {
  int stages = 2, batch = 16, width = 16, frames = 8, size = 56, steps = 3;
  bool crossover = false, scaling = false;
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--stages") a.stages = value;
    if (flag == "--batch") a.batch = value;
    if (flag == "--width") a.width = value;
    if (flag == "--frames") a.frames = value;
    if (flag == "--size") a.size = value;
    if (flag == "--steps") a.steps = value;
    if (flag == "--crossover") a.crossover = value != 0;
    if (flag == "--scaling") a.scaling = value != 0;
  }
  return a;
}

VideoResNet MakeModel(const Args& a) {
  models::VideoResNetOptions o;
  o.num_classes = 8;
  o.width = a.width;
  o.layers = {1, 1, 1, 1};
  torch::manual_seed(1);
  return VideoResNet(o);
}

struct Row {
  double step_seconds = 0, bubble = 0, mean_bubble = 0;
  std::vector<int> in_flight;
};

Row Measure(const Args& a, const StagePlan& plan, PipelineOptions options, const at::Tensor& x,
            const at::Tensor& y) {
  std::vector<VideoResNet> replicas;
  for (int s = 0; s < a.stages; ++s) replicas.push_back(MakeModel(a));
  Row row;
  row.in_flight.assign(a.stages, 0);
  std::mutex mu;
  double step_sum = 0;
  std::vector<double> idle(a.stages, 0);  // per stage, summed over steps
  testing::RunRanks(a.stages, CommOptions{}, [&](int rank, Comm* comm) {
    if (comm == nullptr) std::abort();
    at::set_num_threads(1);  // OpenMP's thread count is per thread: each rank sets its own
    VideoResNet& model = replicas[rank];
    auto stage = PipelineStage::Make(
        comm, options,
        [&](const at::Tensor& in) {
          return model->forward_units(in, plan.cuts[rank], plan.cuts[rank + 1]);
        },
        [](const at::Tensor& logits, const at::Tensor& t) {
          return torch::nn::functional::cross_entropy(logits, t);
        });
    for (int step = 0; step <= a.steps; ++step) {  // step 0 warms up
      model->zero_grad();
      Result<PipelineStepResult> r =
          stage->Step(rank == 0 ? x : at::Tensor(), rank == a.stages - 1 ? y : at::Tensor());
      if (!r.ok()) {
        std::fprintf(stderr, "parallel_bench: %s\n", r.status().ToString().c_str());
        std::exit(1);
      }
      if (step == 0) continue;
      std::lock_guard<std::mutex> lock(mu);
      idle[rank] += 1 - r->busy_seconds / r->step_seconds;
      step_sum += r->step_seconds;
      row.in_flight[rank] = r->max_in_flight;
    }
  });
  row.bubble = 1;
  for (double i : idle) {
    row.bubble = std::min(row.bubble, i / a.steps);
    row.mean_bubble += i / (a.steps * a.stages);
  }
  row.step_seconds = step_sum / (a.steps * a.stages);
  return row;
}

// Each unit's forward and backward on `micro_batch` (pipeline.h's ProfileUnits).
std::vector<UnitCost> Profile(VideoResNet& probe, const at::Tensor& micro_batch) {
  std::vector<std::string> names(static_cast<size_t>(probe->unit_count()));
  for (int u = 0; u < probe->unit_count(); ++u) names[u] = probe->unit_name(u);
  return ProfileUnits(
      names, [&](int u, const at::Tensor& in) { return probe->forward_units(in, u, u + 1); },
      [&](int u) { return probe->UnitParameters(u); }, micro_batch, 2);
}

void Die(const Status& status) {
  std::fprintf(stderr, "parallel_bench: %s\n", status.ToString().c_str());
  std::exit(1);
}

// N x 1: every rank trains a replica on the batch; the reducer averages gradients (overlapped
// with backward, as `reel train` does). Clips per second over all ranks.
double DataParallelRate(const Args& a, const at::Tensor& x, const at::Tensor& y, int ranks = 2) {
  std::vector<VideoResNet> replicas;
  for (int r = 0; r < ranks; ++r) replicas.push_back(MakeModel(a));
  double seconds = 0;
  testing::RunRanks(ranks, CommOptions{}, [&](int rank, Comm* comm) {
    if (comm == nullptr) std::abort();
    at::set_num_threads(1);  // OpenMP's thread count is per thread: each rank sets its own
    VideoResNet& model = replicas[rank];
    std::vector<Reducer::NamedParameter> named;
    for (auto& p : model->named_parameters()) named.emplace_back(p.key(), p.value());
    Result<std::unique_ptr<Reducer>> reducer = Reducer::Create(named, *comm, ReducerOptions{});
    if (!reducer.ok()) Die(reducer.status());
    for (int step = 0; step <= a.steps; ++step) {  // step 0 warms up
      const auto start = std::chrono::steady_clock::now();
      model->zero_grad();
      torch::nn::functional::cross_entropy(model->forward(x), y).backward();
      const Status finished = (*reducer)->Finish();
      if (!finished.ok()) Die(finished);
      const double took =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (rank == 0 && step > 0) seconds += took;
    }
  });
  return ranks * a.batch * a.steps / seconds;
}

double MeasuredBandwidth() {
  double bandwidth = 0;
  testing::RunRanks(2, CommOptions{}, [&](int rank, Comm* comm) {
    if (comm == nullptr) std::abort();
    at::set_num_threads(1);  // OpenMP's thread count is per thread: each rank sets its own
    Result<double> measured = comm->MeasureAllReduceBandwidth();
    if (!measured.ok()) Die(measured.status());
    if (rank == 0) bandwidth = *measured;
  });
  return bandwidth;
}

int Crossover(Args a, bench::Report& report) {
  constexpr int kMicro = 4;
  const double bandwidth = MeasuredBandwidth();
  std::printf("all-reduce bus bandwidth between 2 ranks: %.2f GB/s\n", bandwidth / 1e9);
  std::printf(
      "clips/s on 2 ranks: 2 x 1 data parallel (batch %d each) against 1 x 2 pipeline "
      "(batch %d, 1F1B, %d micro-batches)\n",
      a.batch, a.batch, kMicro);
  std::printf("%5s %5s %8s %10s %10s %10s %10s %8s %9s %8s %6s\n", "width", "size", "params",
              "dp meas", "dp est", "pp meas", "pp est", "pp/dp", "measured", "planner", "agree");
  int agreed = 0, rows = 0;
  for (const auto& [width, size] : std::vector<std::pair<int, int>>{{32, 8},
                                                                    {32, 16},
                                                                    {32, 32},
                                                                    {64, 8},
                                                                    {64, 16},
                                                                    {64, 32},
                                                                    {128, 8},
                                                                    {128, 16},
                                                                    {128, 32}}) {
    a.width = width;
    a.size = size;
    torch::manual_seed(2);
    const at::Tensor x = torch::randn({a.batch, 3, a.frames, a.size, a.size});
    const at::Tensor y = torch::randint(8, {a.batch}, torch::kLong);
    VideoResNet probe = MakeModel(a);
    const int micro = a.batch / kMicro;
    LayoutInputs in;
    in.units = Profile(probe, x.narrow(0, 0, micro));
    in.measured_clips = micro;
    in.batch = a.batch;
    in.micro_batches = kMicro;
    in.world = 2;
    in.link_bytes_per_s = bandwidth;
    Result<LayoutChoice> choice = ChooseLayout(in);
    if (!choice.ok()) Die(choice.status());
    const Layout& dp = choice->considered[0];
    const Layout& pp = choice->considered[1];
    StagePlan plan;
    plan.cuts = pp.cuts;
    Args two = a;
    two.stages = 2;
    const double dp_rate = DataParallelRate(a, x, y);
    const double pp_rate =
        a.batch / Measure(two, plan, {kMicro, PipelineSchedule::k1F1B}, x, y).step_seconds;
    const int faster = pp_rate > dp_rate ? 2 : 1;
    const bool agree = faster == choice->chosen.stages;
    agreed += agree ? 1 : 0;
    ++rows;
    int64_t parameters = 0;
    for (const auto& p : probe->parameters()) parameters += p.numel();
    std::printf("%5d %5d %7.1fM %10.1f %10.1f %10.1f %10.1f %8.2f %9s %8s %6s\n", width, size,
                parameters / 1e6, dp_rate, dp.clips_per_second, pp_rate, pp.clips_per_second,
                pp_rate / dp_rate, faster == 2 ? "pipeline" : "data",
                choice->chosen.stages == 2 ? "pipeline" : "data", agree ? "yes" : "NO");
    const std::string at = "width " + std::to_string(width) + ", size " + std::to_string(size);
    report.Add({at + ": 1 x 2 pipeline", pp_rate, "clips/s",
                bench::Reference{pp.clips_per_second, "the planner's estimate"},
                bench::Reference{dp_rate, "2 x 1 data parallel"}});
  }
  std::printf("the planner agrees with the measurement on %d of %d sizes\n", agreed, rows);
  return 0;
}

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One process training on the batch in `micro` accumulated micro-batches: the base of the
// scaling figures (a pipeline's against the same micro-batches: a smaller batch alone runs
// faster per clip here, its activations staying in cache). Clips per second.
double OneProcessRate(const Args& a, const at::Tensor& x, const at::Tensor& y, int micro = 1) {
  VideoResNet model = MakeModel(a);
  double seconds = 0;
  const auto xs = x.chunk(micro), ys = y.chunk(micro);
  for (int step = 0; step <= a.steps; ++step) {
    const auto start = Clock::now();
    model->zero_grad();
    for (size_t m = 0; m < xs.size(); ++m) {
      (torch::nn::functional::cross_entropy(model->forward(xs[m]), ys[m]) / micro).backward();
    }
    if (step > 0) seconds += SecondsSince(start);
  }
  return a.batch * a.steps / seconds;
}

// `replicas` x `stages` on replicas*stages ranks: each replica's pipeline (1F1B, 4 micro-batches)
// on the batch, then each stage's gradients averaged over its data group. Clips per second.
double MeshRate(const Args& a, const at::Tensor& x, const at::Tensor& y, int replicas, int stages) {
  const int ranks = replicas * stages;
  VideoResNet probe = MakeModel(a);
  Result<StagePlan> plan = BalanceStages(Profile(probe, x.narrow(0, 0, a.batch / 4)), stages);
  if (!plan.ok()) Die(plan.status());
  std::vector<VideoResNet> models;
  for (int r = 0; r < ranks; ++r) models.push_back(MakeModel(a));
  double seconds = 0;
  testing::RunRanks(ranks, CommOptions{}, [&](int rank, Comm* world) {
    if (world == nullptr) std::abort();
    at::set_num_threads(1);
    Result<Mesh> mesh = MakeMesh(*world, stages);
    if (!mesh.ok()) Die(mesh.status());
    VideoResNet& model = models[rank];
    const int begin = plan->cuts[mesh->stage], end = plan->cuts[mesh->stage + 1];
    std::vector<at::Tensor> mine;
    for (int u = begin; u < end; ++u) {
      for (const auto& p : model->UnitParameters(u)) mine.push_back(p);
    }
    auto stage = PipelineStage::Make(
        mesh->pipeline.get(), {4, PipelineSchedule::k1F1B},
        [&](const at::Tensor& in) { return model->forward_units(in, begin, end); },
        [](const at::Tensor& logits, const at::Tensor& t) {
          return torch::nn::functional::cross_entropy(logits, t);
        });
    if (!stage.ok()) Die(stage.status());
    for (int step = 0; step <= a.steps; ++step) {
      const auto start = Clock::now();
      model->zero_grad();
      Result<PipelineStepResult> r = stage->Step(mesh->stage == 0 ? x : at::Tensor(),
                                                 mesh->stage == stages - 1 ? y : at::Tensor());
      if (!r.ok()) Die(r.status());
      if (replicas > 1) {
        const Status averaged = AverageGradients(*mesh->data, mine);
        if (!averaged.ok()) Die(averaged);
      }
      if (rank == 0 && step > 0) seconds += SecondsSince(start);
    }
  });
  return replicas * a.batch * a.steps / seconds;
}

// Parameter servers, BSP: one server (in this process, on its own model's tensors, SGD) and
// `workers` worker threads that pull, compute and push every step. Clips per second.
double ParameterServerRate(const Args& a, const at::Tensor& x, const at::Tensor& y, int workers) {
  VideoResNet held = MakeModel(a);
  std::vector<at::Tensor> params = held->parameters(), buffers = held->buffers();
  ParameterServerOptions so;
  so.workers = workers;
  auto update = [&params](int64_t) {
    torch::NoGradGuard no_grad;
    for (auto& p : params) p.sub_(p.grad() * 0.01);
    return Status::Ok();
  };
  Result<std::unique_ptr<ParameterServer>> server =
      ParameterServer::Start(so, params, buffers, PsShardState::Fresh(workers), update,
                             [](const PsShardState&) { return Status::Ok(); });
  if (!server.ok()) Die(server.status());
  const std::string address = (*server)->address();
  std::vector<VideoResNet> models;
  for (int w = 0; w < workers; ++w) models.push_back(MakeModel(a));
  double seconds = 0;
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      at::set_num_threads(1);
      PsClientOptions co;
      co.worker = w;
      Result<std::unique_ptr<PsClient>> client =
          PsClient::Make(co, {PsShardTensors{models[w]->parameters(), models[w]->buffers()}},
                         [&address](int) -> Result<std::string> { return address; });
      if (!client.ok()) Die(client.status());
      for (int step = 0; step <= a.steps; ++step) {
        const auto start = Clock::now();
        if (Status s = (*client)->Pull(step); !s.ok()) Die(s);
        models[w]->zero_grad();
        torch::nn::functional::cross_entropy(models[w]->forward(x), y).backward();
        if (Status s = (*client)->Push(step, true); !s.ok()) Die(s);
        if (w == 0 && step > 0) seconds += SecondsSince(start);
      }
    });
  }
  for (auto& t : threads) t.join();
  return workers * a.batch * a.steps / seconds;
}

int Scaling(const Args& a, bench::Report& report) {
  torch::manual_seed(2);
  const at::Tensor x = torch::randn({a.batch, 3, a.frames, a.size, a.size});
  const at::Tensor y = torch::randint(8, {a.batch}, torch::kLong);
  // Warm LibTorch's kernels up for both shapes first (the first steps run 1.5x slower).
  OneProcessRate(a, x, y);
  OneProcessRate(a, x, y, 4);
  std::printf("%-30s %9s %11s %8s %8s %8s %8s %10s\n", "form", "processes", "clips/step", "step s",
              "clips/s", "base", "scaling", "efficiency");
  // This VM's speed drifts (up to 2.6x between minutes here): each form is measured right after
  // its base, one process on the same (micro-)batches, and scaled against that.
  const auto row = [&](const char* form, int processes, int clips_per_step, int base_micro,
                       const std::function<double()>& measure) {
    const double base = OneProcessRate(a, x, y, base_micro);
    const double rate = measure();
    std::printf("%-30s %9d %11d %8.3f %8.1f %8.1f %8.2f %10.2f\n", form, processes, clips_per_step,
                clips_per_step / rate, rate, base, rate / base, rate / base / processes);
    report.Add({std::string(form) + ", " + std::to_string(processes) + " processes",
                rate,
                "clips/s",
                bench::Reference{base * processes, "linear: processes x one's rate"},
                {}});
  };
  for (int n : {2, 4}) {
    row("data parallel", n, n * a.batch, 1, [&] { return DataParallelRate(a, x, y, n); });
  }
  for (int s : {2, 4}) {
    row("pipeline (1f1b, M=4)", s, a.batch, 4, [&] { return MeshRate(a, x, y, 1, s); });
  }
  row("data x pipeline 2 x 2", 4, 2 * a.batch, 4, [&] { return MeshRate(a, x, y, 2, 2); });
  for (int n : {2, 4}) {
    row("parameter server (bsp, 1)", n + 1, n * a.batch, 1,
        [&] { return ParameterServerRate(a, x, y, n); });
  }
  std::printf(
      "base: one process's clips/s just before (pipelines: on the same 4 micro-batches); "
      "scaling: against it; efficiency: scaling per process (%u cores)\n",
      std::thread::hardware_concurrency());
  return 0;
}

int RunModes(const Args& a, bench::Report& report);

int Run(const Args& a, const std::string& json) {
  bench::Report report("parallel_bench", a.scaling ? 4 : a.stages);
  const int code = RunModes(a, report);
  return code != 0 ? code : report.Finish(json);
}

int RunModes(const Args& a, bench::Report& report) {
  at::set_num_threads(1);
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  const std::string ranks =
      a.scaling ? std::string("ranks as threads") : std::to_string(a.stages) + " stage threads";
  std::printf("machine: %s, %u cores; %s x 1 LibTorch thread, OMP_WAIT_POLICY=%s\n",
              bench::CpuModel().c_str(), std::thread::hardware_concurrency(), ranks.c_str(),
              wait != nullptr ? wait : "(unset)");
  std::printf("model: R(2+1)D width %d, layers 1,1,1,1; batch %d x 3 x %d x %d x %d\n", a.width,
              a.batch, a.frames, a.size, a.size);
  if (a.crossover) return Crossover(a, report);
  if (a.scaling) return Scaling(a, report);
  torch::manual_seed(2);
  const at::Tensor x = torch::randn({a.batch, 3, a.frames, a.size, a.size});
  const at::Tensor y = torch::randint(8, {a.batch}, torch::kLong);

  VideoResNet probe = MakeModel(a);
  const int smallest_micro = a.batch / 8;
  const std::vector<UnitCost> costs = Profile(probe, x.narrow(0, 0, smallest_micro));
  Result<StagePlan> plan = BalanceStages(costs, a.stages);
  if (!plan.ok()) {
    std::fprintf(stderr, "parallel_bench: %s\n", plan.status().ToString().c_str());
    return 1;
  }
  std::printf("units (forward+backward of a micro-batch of %d):", smallest_micro);
  for (const UnitCost& c : costs) std::printf(" %s %.0f ms", c.name.c_str(), 1e3 * c.seconds);
  std::printf("\nstages: cuts");
  for (int c : plan->cuts) std::printf(" %d", c);
  std::printf(", per micro-batch of %d:", smallest_micro);
  for (double t : plan->seconds) std::printf(" %.0f ms", 1e3 * t);
  std::printf("\n");

  // The busiest stage idles while the others work on the first and last micro-batches: with
  // stage times t_s, (T - t_max) / (M t_max + T - t_max), which is (S-1)/(M+S-1) when equal.
  double total = 0, slowest = 0;
  for (double t : plan->seconds) {
    total += t;
    slowest = std::max(slowest, t);
  }
  std::printf("%-6s %3s %8s %8s %8s %6s %8s %8s  %s\n", "sched", "M", "step s", "bubble", "theory",
              "ratio", "(S-1)/", "mean", "micro-batches held per stage (activation MB)");
  std::printf("%-6s %3s %8s %8s %8s %6s %8s %8s\n", "", "", "", "busiest", "these", "", "(M+S-1)",
              "bubble");
  for (PipelineSchedule schedule : {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
    for (int m : {1, 2, 4, 8}) {
      if (m > a.batch) continue;
      const Row row = Measure(a, *plan, {m, schedule}, x, y);
      const double equal = double(a.stages - 1) / (m + a.stages - 1);
      const double theory = (total - slowest) / (m * slowest + total - slowest);
      const char* name = schedule == PipelineSchedule::kGPipe ? "gpipe" : "1f1b";
      std::printf("%-6s %3d %8.3f %8.3f %8.3f %6.2f %8.3f %8.3f ", name, m, row.step_seconds,
                  row.bubble, theory, theory > 0 ? row.bubble / theory : 0, equal, row.mean_bubble);
      report.Add({std::string(name) + ", M=" + std::to_string(m) + ": busiest stage's bubble",
                  row.bubble,
                  "share",
                  bench::Reference{theory, "theory for these stage times"},
                  {}});
      for (int s = 0; s < a.stages; ++s) {
        int64_t bytes = 0;  // one micro-batch's unit outputs on this stage
        for (int u = plan->cuts[s]; u < plan->cuts[s + 1]; ++u) bytes += costs[u].activation_bytes;
        bytes = bytes * (a.batch / m) / smallest_micro;
        std::printf(" %d (%.1f)", row.in_flight[s], row.in_flight[s] * bytes / 1e6);
      }
      std::printf("\n");
    }
  }
  return 0;
}

}  // namespace
}  // namespace reel::parallel

int main(int argc, char** argv) {
  reel::RetainFreedHeapMemory();  // the heap settings of `reel`, which these steps stand for
  const std::string json = reel::bench::TakeJsonFlag(&argc, argv);
  return reel::parallel::Run(reel::parallel::Parse(argc, argv), json);
}
