#include "sched/simulate.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <ctime>
#include <functional>
#include <map>
#include <queue>

#include "base/csv.h"
#include "base/files.h"
#include "sched/scheduler.h"

namespace reel::sched {
namespace {

using std::chrono::seconds;

// Tiresias' queue thresholds in attained GPU-seconds: 1 and 10 GPU-hours.
constexpr int64_t kLasThresholds[] = {3600, 36000};
constexpr int kLasLevels = 3;

// "2017-10-09 07:01:55" as seconds since the epoch (UTC); -1 when malformed.
int64_t ParseTimestamp(const std::string& text) {
  std::tm tm{};
  char extra = 0;
  if (std::sscanf(text.c_str(), "%d-%d-%d %d:%d:%d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &extra) != 6) {
    return -1;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&tm));
}

// A trace row, its submit_s the absolute timestamp (made relative by the caller).
Result<TraceJob> ReadRow(const CsvRow& row, const std::string& path) {
  const auto bad = [&](const std::string& what) {
    return InvalidArgumentError(path + ":" + std::to_string(row.line) + ": " + what);
  };
  const std::vector<std::string>& f = row.fields;
  if (f.size() < 5) return bad("expected 5 columns, got " + std::to_string(f.size()));
  TraceJob j;
  j.submit_s = ParseTimestamp(f[0]);
  if (j.submit_s < 0) return bad("timestamp '" + f[0] + "' is not YYYY-MM-DD HH:MM:SS");
  char* end = nullptr;
  const double duration = std::strtod(f[1].c_str(), &end);
  if (end == f[1].c_str() || !(duration >= 0)) return bad("duration '" + f[1] + "'");
  const long gpus = std::strtol(f[2].c_str(), &end, 10);
  if (end == f[2].c_str() || gpus < 1 || gpus > 100000) return bad("num_gpus '" + f[2] + "'");
  j.duration_s = static_cast<int64_t>(std::llround(duration));
  j.gpus = static_cast<int>(gpus);
  j.queue = f[4];
  return j;
}

// One core per simulation, set up for the policy.
struct Setup {
  std::vector<Node> nodes;
  std::vector<QueueSpec> queues;
  SchedulerOptions options;
};

Setup MakeSetup(const std::vector<TraceJob>& jobs, const SimulationOptions& o, int node_count) {
  Setup s;
  for (int i = 0; i < node_count; ++i) {
    s.nodes.push_back(Node{"n" + std::to_string(i),
                           Resources{64000, int64_t{1} << 40, o.gpus_per_node},
                           {},
                           false,
                           0});
  }
  s.options.max_backfill_tests = o.backfill ? 500 : 0;
  s.options.preemption = o.policy == Policy::kPriority || o.policy == Policy::kLas;
  if (o.policy == Policy::kDrf) {
    // Kueue's cohort: each virtual cluster guaranteed an equal part, free to borrow the rest.
    std::map<std::string, int> seen;
    for (const TraceJob& j : jobs) seen.emplace(j.queue, 0);
    const Resources all{64000LL * node_count, int64_t{node_count} << 40,
                        int64_t{node_count} * o.gpus_per_node};
    const int64_t n = static_cast<int64_t>(seen.size());
    const Resources part{all.cpu_millis / n, all.memory_bytes / n, all.gpu / n};
    for (const auto& [name, unused] : seen) s.queues.push_back(QueueSpec{name, part, all, 1});
  }
  return s;
}

int StaticPriority(const TraceJob& j, Policy policy) {
  switch (policy) {
    case Policy::kPriority:
      return j.gpus == 1 ? 2 : j.gpus <= 8 ? 1 : 0;
    case Policy::kSjf:
      return -static_cast<int>(std::min<int64_t>(j.duration_s, INT_MAX / 2));
    case Policy::kLas:
      return kLasLevels - 1;  // nothing attained yet: the top queue
    default:
      return 0;
  }
}

// A gang of whole nodes for jobs larger than one, else one worker.
JobSpec MakeSpec(const TraceJob& j, size_t index, const SimulationOptions& o) {
  JobSpec spec;
  spec.id = std::to_string(index);
  spec.queue = o.policy == Policy::kDrf ? j.queue : "default";
  spec.priority = StaticPriority(j, o.policy);
  const int workers = (j.gpus + o.gpus_per_node - 1) / o.gpus_per_node;
  spec.min_workers = spec.max_workers = workers;
  spec.per_worker = Resources{0, 0, (j.gpus + workers - 1) / workers};
  // Users' estimates are the traced durations (EASY backfill's reckoning).
  spec.time_limit = std::chrono::milliseconds(std::max<int64_t>(j.duration_s, 1) * 1000);
  return spec;
}

class Simulation {
 public:
  Simulation(const std::vector<TraceJob>& jobs, const SimulationOptions& o, Scheduler* core)
      : jobs_(jobs), o_(o), core_(core), runs_(jobs.size()) {
    for (size_t i = 0; i < jobs.size(); ++i) runs_[i].remaining = jobs[i].duration_s;
  }

  Status Run() {
    size_t next = 0;
    while (next < jobs_.size() || !ends_.empty()) {
      int64_t t = next < jobs_.size() ? jobs_[next].submit_s : LLONG_MAX;
      if (!ends_.empty()) t = std::min(t, ends_.top().time);
      if (!demotions_.empty()) t = std::min(t, demotions_.top().time);
      REEL_RETURN_IF_ERROR(Ends(t));
      REEL_RETURN_IF_ERROR(Demotions(t));
      for (; next < jobs_.size() && jobs_[next].submit_s == t; ++next) {
        REEL_RETURN_IF_ERROR(core_->Submit(MakeSpec(jobs_[next], next, o_), At(t)));
      }
      REEL_RETURN_IF_ERROR(ScheduleAt(t));
    }
    for (size_t i = 0; i < runs_.size(); ++i) {
      if (runs_[i].finish < 0) {
        const Result<JobView> view = core_->Job(std::to_string(i));
        return InternalError("job " + std::to_string(i) + " never ran to its end: " +
                             (view.ok() ? view->reason : view.status().ToString()));
      }
    }
    return Status::Ok();
  }

  SimulationResult Summary() const {
    SimulationResult r;
    r.jobs = static_cast<int64_t>(jobs_.size());
    std::vector<double> jct;
    int64_t last = 0;
    for (size_t i = 0; i < jobs_.size(); ++i) {
      const double c = static_cast<double>(runs_[i].finish - jobs_[i].submit_s);
      jct.push_back(c);
      r.avg_jct_s += c;
      r.avg_queue_s += c - static_cast<double>(jobs_[i].duration_s);
      last = std::max(last, runs_[i].finish);
    }
    r.avg_jct_s /= static_cast<double>(jobs_.size());
    r.avg_queue_s /= static_cast<double>(jobs_.size());
    std::sort(jct.begin(), jct.end());
    r.p95_jct_s = jct[std::min(jct.size() - 1, static_cast<size_t>(0.95 * jct.size()))];
    r.makespan_s = static_cast<double>(last - jobs_.front().submit_s);
    r.preemptions = preemptions_;
    r.placements = placements_;
    return r;
  }

 private:
  struct RunState {
    int64_t remaining = 0;  // seconds of work left
    int64_t started = -1;   // of the current run
    int64_t finish = -1;
    int64_t attained = 0;     // GPU-seconds run before the current run
    int level = 0;            // LAS queue (0: top)
    uint64_t generation = 0;  // events of an earlier run are stale
  };
  struct Event {
    int64_t time;
    size_t job;
    uint64_t generation;
    bool operator>(const Event& o) const { return time > o.time; }
  };
  using EventQueue = std::priority_queue<Event, std::vector<Event>, std::greater<Event>>;

  static Clock::TimePoint At(int64_t t) { return Clock::TimePoint() + seconds(t); }

  Status Ends(int64_t t) {
    while (!ends_.empty() && ends_.top().time == t) {
      const Event e = ends_.top();
      ends_.pop();
      if (e.generation != runs_[e.job].generation) continue;
      runs_[e.job].finish = t;
      ++runs_[e.job].generation;
      REEL_RETURN_IF_ERROR(core_->Finished(std::to_string(e.job), At(t)));
    }
    return Status::Ok();
  }

  Status Demotions(int64_t t) {
    while (!demotions_.empty() && demotions_.top().time == t) {
      const Event e = demotions_.top();
      demotions_.pop();
      RunState& r = runs_[e.job];
      if (e.generation != r.generation) continue;
      ++r.level;
      REEL_RETURN_IF_ERROR(core_->SetPriority(std::to_string(e.job), kLasLevels - 1 - r.level));
      PlanDemotion(e.job, t);
    }
    return Status::Ok();
  }

  // LAS: when the running job will pass its queue's threshold, if before it ends.
  void PlanDemotion(size_t job, int64_t now) {
    RunState& r = runs_[job];
    if (o_.policy != Policy::kLas || r.level >= kLasLevels - 1) return;
    const int64_t gpus = jobs_[job].gpus;
    const int64_t ran = (now - r.started) * gpus;
    const int64_t left = kLasThresholds[r.level] - r.attained - ran;
    const int64_t at = now + std::max<int64_t>(1, (left + gpus - 1) / gpus);
    if (at < r.started + r.remaining) demotions_.push({at, job, r.generation});
  }

  // Cycles until the core has nothing more to do at t (a preemption frees room at once here).
  Status ScheduleAt(int64_t t) {
    while (true) {
      bool stopped = false;
      for (const Decision& d : core_->Schedule(At(t))) {
        const size_t job = static_cast<size_t>(std::stoull(d.job));
        RunState& r = runs_[job];
        if (d.kind == Decision::Kind::kStart) {
          placements_.push_back({job, t, d.nodes});
          r.started = t;
          ends_.push({t + r.remaining, job, r.generation});
          PlanDemotion(job, t);
          continue;
        }
        // Preempted (or, with an estimate too short, stopped): it checkpoints and goes back.
        r.remaining -= t - r.started;
        r.attained += (t - r.started) * jobs_[job].gpus;
        ++r.generation;
        ++preemptions_;
        REEL_RETURN_IF_ERROR(core_->Stopped(d.job, At(t)).status());
        stopped = true;
      }
      if (!stopped) return Status::Ok();
    }
  }

  const std::vector<TraceJob>& jobs_;
  const SimulationOptions& o_;
  Scheduler* core_;
  std::vector<RunState> runs_;
  EventQueue ends_, demotions_;
  int64_t preemptions_ = 0;
  std::vector<Placement> placements_;
};

}  // namespace

Result<std::vector<TraceJob>> ReadPhillyTrace(const std::string& path) {
  Result<std::string> text = ReadFileToString(path, "trace");
  if (!text.ok())
    return NotFoundError("cannot read trace " + path + ": " + text.status().message());
  REEL_ASSIGN_OR_RETURN(std::vector<CsvRow> rows, ParseCsv(*text, path));
  if (rows.empty() || rows[0].fields.size() < 3 || rows[0].fields[0] != "timestamp" ||
      rows[0].fields[1] != "duration" || rows[0].fields[2] != "num_gpus") {
    return InvalidArgumentError(path + ":1: expected the header timestamp,duration,num_gpus,...");
  }
  std::vector<std::pair<int64_t, TraceJob>> jobs;
  for (size_t r = 1; r < rows.size(); ++r) {
    REEL_ASSIGN_OR_RETURN(TraceJob j, ReadRow(rows[r], path));
    jobs.emplace_back(j.submit_s, std::move(j));
  }
  if (jobs.empty()) return InvalidArgumentError(path + ": no jobs");
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<TraceJob> out;
  out.reserve(jobs.size());
  for (auto& [when, j] : jobs) {
    j.submit_s = when - jobs.front().first;
    out.push_back(std::move(j));
  }
  return out;
}

const char* PolicyName(Policy policy) {
  switch (policy) {
    case Policy::kFifo:
      return "fifo";
    case Policy::kPriority:
      return "priority";
    case Policy::kSjf:
      return "sjf";
    case Policy::kLas:
      return "las";
    case Policy::kDrf:
      return "drf";
  }
  return "?";
}

Result<Policy> ParsePolicy(const std::string& name) {
  for (Policy p : {Policy::kFifo, Policy::kPriority, Policy::kSjf, Policy::kLas, Policy::kDrf}) {
    if (name == PolicyName(p)) return p;
  }
  return InvalidArgumentError("unknown policy '" + name + "' (fifo, priority, sjf, las, drf)");
}

namespace {

double GpuSeconds(const std::vector<TraceJob>& jobs) {
  double total = 0;
  for (const TraceJob& j : jobs) total += static_cast<double>(j.duration_s) * j.gpus;
  return total;
}

// The trace's size: enough nodes that its work, spread over its span, keeps them 80% busy.
int ClusterNodes(const std::vector<TraceJob>& jobs, double gpu_seconds,
                 const SimulationOptions& o) {
  if (o.nodes > 0) return o.nodes;
  int64_t span = 1;
  int largest = 1;
  for (const TraceJob& j : jobs) {
    span = std::max(span, j.submit_s);
    largest = std::max(largest, j.gpus);
  }
  const double busy = gpu_seconds / static_cast<double>(span);
  const int nodes = static_cast<int>(std::ceil(busy / 0.8 / o.gpus_per_node));
  return std::max({1, nodes, (largest + o.gpus_per_node - 1) / o.gpus_per_node});
}

}  // namespace

Result<SimulationResult> Simulate(const std::vector<TraceJob>& jobs,
                                  const SimulationOptions& options) {
  if (jobs.empty()) return InvalidArgumentError("the trace has no jobs");
  const auto start = std::chrono::steady_clock::now();
  const double gpu_seconds = GpuSeconds(jobs);
  const int nodes = ClusterNodes(jobs, gpu_seconds, options);
  Setup setup = MakeSetup(jobs, options, nodes);
  REEL_ASSIGN_OR_RETURN(
      std::unique_ptr<Scheduler> core,
      Scheduler::Make(std::move(setup.nodes), std::move(setup.queues), setup.options));
  Simulation sim(jobs, options, core.get());
  REEL_RETURN_IF_ERROR(sim.Run());
  SimulationResult r = sim.Summary();
  r.nodes = nodes;
  r.utilisation =
      r.makespan_s > 0 ? gpu_seconds / (r.makespan_s * nodes * options.gpus_per_node) : 0;
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace reel::sched
