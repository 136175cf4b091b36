// The scheduler's speed at cluster scale (issue 16): 5,000 nodes and 100,000 pending jobs from
// ten teams' queues, run to completion on a simulated clock, and the placement of one 512-worker
// gang on a loaded cluster. Only the time inside the scheduler counts (its CPU time: one thread).
//
//   sched_bench [--nodes 5000] [--jobs 100000] [--gang 512] [--seed 1] [--json FILE]
//
// Goals: >= 10,000 decisions/s; a 512-worker gang placed in < 100 ms. The peer figure is
// kube-scheduler's published throughput at 5,000 nodes, about 100 pods/s.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <queue>
#include <string>
#include <vector>

#include "base/random.h"
#include "bench/report.h"
#include "sched/scheduler.h"

namespace reel::sched {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;

constexpr double kKubeSchedulerPodsPerSecond = 100;  // at 5,000 nodes, as published
constexpr double kGoalDecisionsPerSecond = 10000;
constexpr double kGoalGangMs = 100;

struct Args {
  int nodes = 5000;
  int jobs = 100000;
  int gang = 512;
  uint64_t seed = 1;
};

double CpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

constexpr int64_t kGi = int64_t{1} << 30;

std::vector<Node> MakeNodes(int count, Rng& rng) {
  std::vector<Node> nodes;
  for (int i = 0; i < count; ++i) {
    Node n;
    n.name = "node" + std::to_string(i);
    n.capacity = Resources{64000, 512 * kGi, 8};
    n.spot = rng.UniformInt(10) == 0;  // a tenth are spot nodes at a third of the price
    n.cost_per_hour = n.spot ? 1 : 3;
    n.labels["zone"] = "z" + std::to_string(i % 4);
    nodes.push_back(std::move(n));
  }
  return nodes;
}

std::vector<QueueSpec> MakeQueues(const std::vector<Node>& nodes) {
  Resources total{0, 0, 0};
  for (const Node& n : nodes) total += n.capacity;
  std::vector<QueueSpec> queues;
  for (int q = 0; q < 10; ++q) {
    const Resources share{total.cpu_millis / 10, total.memory_bytes / 10, total.gpu / 10};
    queues.push_back(
        QueueSpec{"team" + std::to_string(q), share,
                  Resources{share.cpu_millis * 2, share.memory_bytes * 2, share.gpu * 2}, 1});
  }
  return queues;
}

JobSpec MakeJob(int i, Rng& rng) {
  JobSpec j;
  j.id = "job" + std::to_string(i);
  j.queue = "team" + std::to_string(rng.UniformInt(10));
  j.priority = rng.UniformInt(4);
  const int workers[] = {1, 1, 1, 2, 2, 4, 4, 8, 16, 32};
  j.min_workers = j.max_workers = workers[rng.UniformInt(10)];
  const int cpus = 1 << rng.UniformInt(5);  // 1..16
  j.per_worker = Resources{cpus * 1000, cpus * 4 * kGi, rng.UniformInt(2) == 0 ? 0 : 1};
  j.spot_ok = rng.UniformInt(3) == 0;
  j.time_limit = minutes(10 + rng.UniformInt(230));
  return j;
}

// Runs every job to completion: each runs for a random part of its limit; preempted jobs stop
// at once. Returns the CPU seconds spent in the scheduler.
double Simulate(Scheduler& s, const std::map<std::string, milliseconds>& runtime, Rng& rng,
                Clock::TimePoint t0, size_t jobs) {
  using End = std::pair<Clock::TimePoint, std::string>;
  std::priority_queue<End, std::vector<End>, std::greater<>> ends;
  Clock::TimePoint now = t0;
  double cpu = 0;
  size_t done = 0;
  (void)rng;
  while (done < jobs) {
    const double before = CpuSeconds();
    std::vector<Decision> decisions = s.Schedule(now);
    for (const Decision& d : decisions) {
      if (d.kind == Decision::Kind::kStart) {
        ends.emplace(now + runtime.at(d.job), d.job);
      } else if (d.kind == Decision::Kind::kPreempt || d.kind == Decision::Kind::kResize) {
        (void)s.Stopped(d.job, now);
      }
    }
    cpu += CpuSeconds() - before;
    if (ends.empty()) {
      std::fprintf(stderr, "sched_bench: %zu jobs can never start\n", jobs - done);
      std::exit(1);
    }
    // Everything that ends within the next minute of simulated time ends together.
    now = std::max(now, ends.top().first) + minutes(1);
    const double before_finish = CpuSeconds();
    while (!ends.empty() && ends.top().first <= now) {
      const std::string job = ends.top().second;
      ends.pop();
      const Result<JobView> view = s.Job(job);
      if (view.ok() && view->phase == JobPhase::kRunning && view->nodes.size() > 0) {
        if (s.Finished(job, now).ok()) ++done;
      }
    }
    cpu += CpuSeconds() - before_finish;
  }
  return cpu;
}

void Throughput(const Args& a, bench::Report& report) {
  Rng rng = Rng::Stream(a.seed, 1);
  std::vector<Node> nodes = MakeNodes(a.nodes, rng);
  Result<std::unique_ptr<Scheduler>> s = Scheduler::Make(nodes, MakeQueues(nodes));
  if (!s.ok()) {
    std::fprintf(stderr, "sched_bench: %s\n", s.status().ToString().c_str());
    std::exit(1);
  }
  const Clock::TimePoint t0 = Clock::TimePoint() + std::chrono::hours(1);
  std::map<std::string, milliseconds> runtime;
  const double submit_start = CpuSeconds();
  for (int i = 0; i < a.jobs; ++i) {
    JobSpec j = MakeJob(i, rng);
    runtime[j.id] = milliseconds(
        static_cast<int64_t>(static_cast<double>(j.time_limit->count()) * rng.Uniform(0.2, 1.0)));
    if (Status st = (*s)->Submit(std::move(j), t0); !st.ok()) {
      std::fprintf(stderr, "sched_bench: %s\n", st.ToString().c_str());
      std::exit(1);
    }
  }
  const double submit_s = CpuSeconds() - submit_start;
  const double schedule_s = Simulate(**s, runtime, rng, t0, static_cast<size_t>(a.jobs));
  const SchedulerStats& st = (*s)->stats();
  const double decisions = static_cast<double>(st.started + st.preempted);
  const double per_s = decisions / schedule_s;
  std::printf("throughput: %d nodes, %d jobs from 10 queues, all run to completion\n", a.nodes,
              a.jobs);
  std::printf("  submit                  %8.3f s CPU (%.0f jobs/s)\n", submit_s, a.jobs / submit_s);
  std::printf(
      "  scheduling              %8.3f s CPU in %llu cycles; %llu starts, %llu preemptions, "
      "%llu jobs tried\n",
      schedule_s, static_cast<unsigned long long>(st.cycles),
      static_cast<unsigned long long>(st.started), static_cast<unsigned long long>(st.preempted),
      static_cast<unsigned long long>(st.tried));
  std::printf(
      "  decisions/s             %8.0f   goal >= %.0f: %s; kube-scheduler ~%.0f pods/s: "
      "%.0fx\n",
      per_s, kGoalDecisionsPerSecond, per_s >= kGoalDecisionsPerSecond ? "met" : "MISSED",
      kKubeSchedulerPodsPerSecond, per_s / kKubeSchedulerPodsPerSecond);
  std::printf("  jobs tried/s            %8.0f\n", static_cast<double>(st.tried) / schedule_s);
  report.Add({"scheduling decisions, " + std::to_string(a.nodes) + " nodes", per_s, "decisions/s",
              bench::Reference{kGoalDecisionsPerSecond, "the goal"},
              bench::Reference{kKubeSchedulerPodsPerSecond, "kube-scheduler (published)"}});
}

void Gang(const Args& a, bench::Report& report) {
  Rng rng = Rng::Stream(a.seed, 2);
  std::vector<Node> nodes = MakeNodes(a.nodes, rng);
  Result<std::unique_ptr<Scheduler>> s = Scheduler::Make(nodes, {});
  if (!s.ok()) std::exit(1);
  const Clock::TimePoint t0 = Clock::TimePoint() + std::chrono::hours(1);
  // Load the cluster's CPUs to about 70% with small jobs (6.2 CPUs on average, 7 per node), so
  // that free room is scattered.
  int loaded = 0;
  for (int i = 0; i < a.nodes * 7; ++i) {
    JobSpec j;
    j.id = "load" + std::to_string(i);
    j.queue = "default";
    const int cpus = 1 << rng.UniformInt(5);
    j.per_worker = Resources{cpus * 1000, cpus * 4 * kGi, 0};
    if (!(*s)->Submit(j, t0).ok()) std::exit(1);
    ++loaded;
  }
  (void)(*s)->Schedule(t0);
  JobSpec gang;
  gang.id = "gang";
  gang.queue = "default";
  gang.priority = 100;
  gang.min_workers = gang.max_workers = a.gang;
  gang.per_worker = Resources{8000, 64 * kGi, 1};
  if (!(*s)->Submit(gang, t0).ok()) std::exit(1);
  const double start = CpuSeconds();
  std::vector<Decision> d = (*s)->Schedule(t0 + minutes(1));
  const double ms = (CpuSeconds() - start) * 1000;
  const bool placed = !d.empty() && d[0].job == "gang" && d[0].kind == Decision::Kind::kStart;
  std::printf("gang: %d workers (8 cpu, 64Gi, 1 gpu each) on %d nodes holding %d small jobs\n",
              a.gang, a.nodes, loaded);
  std::printf(
      "  placed                  %s in %.2f ms (one cycle)   goal < %.0f ms: %s (%.2fx of "
      "the limit)\n",
      placed ? "yes" : "NO", ms, kGoalGangMs, placed && ms < kGoalGangMs ? "met" : "MISSED",
      ms / kGoalGangMs);
  if (placed) {
    report.Add({std::to_string(a.gang) + "-worker gang placed",
                ms,
                "ms",
                bench::Reference{kGoalGangMs, "the goal"},
                {}});
  }
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long value = std::strtol(argv[i + 1], nullptr, 10);
    if (flag == "--nodes")
      a.nodes = static_cast<int>(value);
    else if (flag == "--jobs")
      a.jobs = static_cast<int>(value);
    else if (flag == "--gang")
      a.gang = static_cast<int>(value);
    else if (flag == "--seed")
      a.seed = static_cast<uint64_t>(value);
    else {
      std::fprintf(stderr, "sched_bench: unknown flag %s\n", flag.c_str());
      std::exit(3);
    }
  }
  if (a.nodes < 1 || a.jobs < 1 || a.gang < 1 || (argc - 1) % 2 != 0) {
    std::fprintf(stderr, "usage: sched_bench [--nodes N] [--jobs N] [--gang N] [--seed S]\n");
    std::exit(3);
  }
  return a;
}

}  // namespace
}  // namespace reel::sched

int main(int argc, char** argv) {
  const std::string json = reel::bench::TakeJsonFlag(&argc, argv);
  const reel::sched::Args args = reel::sched::ParseArgs(argc, argv);
  std::printf("sched_bench: one thread, CPU time inside the scheduler only (seed %llu)\n",
              static_cast<unsigned long long>(args.seed));
  reel::bench::Report report("sched_bench", 1);
  reel::sched::Gang(args, report);
  reel::sched::Throughput(args, report);
  return report.Finish(json);
}
