#include "sched/scheduler.h"

#include <algorithm>
#include <limits>
#include <set>
#include <unordered_map>

namespace reel::sched {
namespace {

using std::chrono::milliseconds;
constexpr int kNone = -1;

Resources Times(const Resources& r, int64_t n) {
  return Resources{r.cpu_millis * n, r.memory_bytes * n, r.gpu * n};
}

// How many workers of `per` fit in `free` (per is not all zero).
int64_t FitCount(const Resources& free, const Resources& per) {
  int64_t n = std::numeric_limits<int64_t>::max();
  if (per.cpu_millis > 0) n = std::min(n, free.cpu_millis / per.cpu_millis);
  if (per.memory_bytes > 0) n = std::min(n, free.memory_bytes / per.memory_bytes);
  if (per.gpu > 0) n = std::min(n, free.gpu / per.gpu);
  return std::max<int64_t>(n, 0);
}

bool Exceeds(const Resources& a, const Resources& b) { return !a.FitsIn(b); }

double Share(const Resources& usage, const Resources& total) {
  double share = 0;
  if (total.cpu_millis > 0) share = std::max(share, double(usage.cpu_millis) / total.cpu_millis);
  if (total.memory_bytes > 0) {
    share = std::max(share, double(usage.memory_bytes) / total.memory_bytes);
  }
  if (total.gpu > 0) share = std::max(share, double(usage.gpu) / total.gpu);
  return share;
}

}  // namespace

struct Scheduler::State {
  struct NodeState {
    Node spec;
    Resources free;
    bool cordoned = false;
  };
  struct JobState;
  // A queue's line: priority (higher first), then submission.
  struct Key {
    int priority;
    uint64_t seq;
    bool operator<(const Key& o) const {
      return priority != o.priority ? priority > o.priority : seq < o.seq;
    }
  };
  struct QueueState {
    QueueSpec spec;
    Resources usage;
    std::map<Key, JobState*> line;
  };
  struct JobState {
    JobSpec spec;
    int queue = 0;
    uint64_t seq = 0;
    JobPhase phase = JobPhase::kPending;
    std::vector<int> nodes;  // node index of each worker, while placed
    Clock::TimePoint started{};
    int preemptions = 0;
    double cost = 0;
    std::string reason;
    bool requeue = false;                       // stopping: back in line once stopped
    std::optional<std::vector<int>> resize_to;  // stopping: restart on these nodes
    size_t waiting_for = 0;                     // victims still stopping for it
    JobState* preempted_for = nullptr;          // stopping: the job waiting for it
    std::vector<int> nominated;                 // where it goes once they have stopped
  };
  // Where a job may go: nodes and, for backfill, the time it must end by or the nodes it must
  // avoid.
  struct Constraint {
    Clock::TimePoint end_by = Clock::TimePoint::max();
    const std::vector<char>* avoid = nullptr;  // per node: reserved
  };

  SchedulerOptions options;
  std::vector<NodeState> nodes;
  std::vector<Resources> capacities;       // of each node: an idle cluster, for Submit's check
  std::vector<int> spot_first, on_demand;  // placement orders: node indices
  std::vector<QueueState> queues;
  std::map<std::string, int> queue_index;
  std::unordered_map<std::string, std::unique_ptr<JobState>> jobs;
  std::set<JobState*> running;  // running or stopping
  Resources total, free_total;  // over nodes not cordoned
  Resources quota_total;
  uint64_t next_seq = 0;
  SchedulerStats stats;
  // Within one cycle room only shrinks, so what failed to fit stays failed: jobs no smaller than
  // one that found no room are not placed again (kube-scheduler's equivalence classes), and no
  // worker larger than the roomiest node is tried.
  struct Shape {
    Resources per_worker;
    int workers;
    bool spot_ok, constrained;
  };
  std::vector<Shape> failed;
  Resources max_free;

  // --- placement ---

  bool Eligible(const JobState& j, int n) const {
    const NodeState& node = nodes[n];
    if (node.cordoned) return false;
    for (const auto& [key, value] : j.spec.node_selector) {
      const auto it = node.spec.labels.find(key);
      if (it == node.spec.labels.end() || it->second != value) return false;
    }
    return true;
  }

  const std::vector<int>& Order(const JobState& j) const {
    return j.spec.spot_ok ? spot_first : on_demand;
  }

  // First fit over the job's node order: up to `want` workers, at least `need`; empty when fewer
  // than `need` fit. On the nodes' free room, or on `sim` (one entry per node) in simulations.
  std::vector<int> Place(const JobState& j, const std::vector<Resources>* sim, int need, int want,
                         const std::vector<char>* avoid) const {
    std::vector<int> placed;
    for (int n : Order(j)) {
      if ((avoid != nullptr && (*avoid)[n]) || !Eligible(j, n)) continue;
      const Resources& free = sim != nullptr ? (*sim)[n] : nodes[n].free;
      const int64_t k = std::min<int64_t>(FitCount(free, j.spec.per_worker),
                                          want - static_cast<int64_t>(placed.size()));
      if (k <= 0) continue;
      placed.insert(placed.end(), k, n);
      if (static_cast<int>(placed.size()) == want) break;
    }
    if (static_cast<int>(placed.size()) < need) placed.clear();
    return placed;
  }

  std::vector<Resources> FreeVector() const {
    std::vector<Resources> free(nodes.size());
    for (size_t n = 0; n < nodes.size(); ++n) free[n] = nodes[n].free;
    return free;
  }

  // --- quotas ---

  // Most workers of `j` its queue may add now: within quota + borrowing limit, and what goes
  // beyond the quota must be left unused by the other queues' quotas.
  int64_t QuotaRoom(const JobState& j, const Resources& queue_usage,
                    const Resources& all_usage) const {
    const QueueSpec& q = queues[j.queue].spec;
    Resources limit = q.quota;
    limit += q.borrowing_limit;
    Resources room = limit;
    room -= queue_usage;
    int64_t n = FitCount(room, j.spec.per_worker);
    // Borrowing: the cohort's quotas bound everyone's use together.
    Resources cohort_room = quota_total;
    cohort_room -= all_usage;
    const Resources own_left = [&] {
      Resources left = q.quota;
      left -= queue_usage;
      return Resources{std::max<int64_t>(left.cpu_millis, 0),
                       std::max<int64_t>(left.memory_bytes, 0), std::max<int64_t>(left.gpu, 0)};
    }();
    // Within its own quota a queue never waits for the cohort (it reclaims instead).
    Resources guaranteed_or_cohort{std::max(own_left.cpu_millis, cohort_room.cpu_millis),
                                   std::max(own_left.memory_bytes, cohort_room.memory_bytes),
                                   std::max(own_left.gpu, cohort_room.gpu)};
    return std::min(n, FitCount(guaranteed_or_cohort, j.spec.per_worker));
  }

  Resources AllUsage() const {
    Resources u{0, 0, 0};
    for (const QueueState& q : queues) u += q.usage;
    return u;
  }

  bool Borrowing(const QueueState& q) const { return Exceeds(q.usage, q.spec.quota); }

  double DominantShare(const QueueState& q) const { return Share(q.usage, total) / q.spec.weight; }

  // --- starting and stopping ---

  void Allocate(JobState& j, const std::vector<int>& placed, Clock::TimePoint now) {
    for (int n : placed) nodes[n].free -= j.spec.per_worker;
    const Resources all = Times(j.spec.per_worker, static_cast<int64_t>(placed.size()));
    free_total -= all;
    queues[j.queue].usage += all;
    j.nodes = placed;
    j.started = now;
    j.phase = JobPhase::kRunning;
    j.reason.clear();
    running.insert(&j);
  }

  // A stopping job is no longer in the way of the job it was preempted for.
  static void Unblock(JobState& j) {
    if (j.preempted_for != nullptr && j.preempted_for->waiting_for > 0) {
      --j.preempted_for->waiting_for;
    }
    j.preempted_for = nullptr;
  }

  void Release(JobState& j, Clock::TimePoint now) {
    const double hours = std::chrono::duration<double, std::ratio<3600>>(now - j.started).count();
    for (int n : j.nodes) {
      nodes[n].free += j.spec.per_worker;
      j.cost += hours * nodes[n].spec.cost_per_hour;
      if (!nodes[n].cordoned) free_total += j.spec.per_worker;
    }
    queues[j.queue].usage -= Times(j.spec.per_worker, static_cast<int64_t>(j.nodes.size()));
    j.nodes.clear();
    running.erase(&j);
  }

  Decision StartDecision(const JobState& j, Decision::Kind kind = Decision::Kind::kStart) const {
    Decision d{kind, j.spec.id, {}, ""};
    for (int n : j.nodes) d.nodes.push_back(nodes[n].spec.name);
    return d;
  }

  void Stop(JobState& j, std::string reason, bool requeue, std::vector<Decision>* out) {
    j.phase = JobPhase::kStopping;
    j.requeue = requeue;
    j.reason = reason;
    out->push_back(Decision{requeue ? Decision::Kind::kPreempt : Decision::Kind::kStop,
                            j.spec.id,
                            {},
                            std::move(reason)});
  }

  // --- one cycle ---

  enum class Outcome { kStarted, kQuota, kNoRoom };

  // Tries to start `j` now under `c`. kNoRoom: the nodes lack room (its queue may also be at
  // its quota); kQuota: there is room, but its queue may not use it.
  Outcome TryStart(JobState& j, const Constraint& c, Clock::TimePoint now,
                   std::vector<Decision>* out) {
    const int64_t room = QuotaRoom(j, queues[j.queue].usage, AllUsage());
    const Clock::TimePoint end = now + j.spec.time_limit.value_or(options.default_time_limit);
    const std::vector<char>* avoid = end <= c.end_by ? nullptr : c.avoid;
    // A queue whose limit covers the whole cluster (the default queue) is never the reason.
    Resources limit = queues[j.queue].spec.quota;
    limit += queues[j.queue].spec.borrowing_limit;
    j.reason = room < j.spec.min_workers && Exceeds(total, limit)
                   ? "queue " + queues[j.queue].spec.name + " is at its quota"
                   : "waiting for resources";
    if (Exceeds(Times(j.spec.per_worker, j.spec.min_workers), free_total)) return Outcome::kNoRoom;
    const bool nominated = !j.nominated.empty() && j.waiting_for == 0 && c.avoid == nullptr;
    if (!nominated && KnownToFail(j, avoid != nullptr)) return Outcome::kNoRoom;
    if (room < j.spec.min_workers) {
      const bool fits = !Place(j, nullptr, j.spec.min_workers, j.spec.min_workers, avoid).empty();
      return fits ? Outcome::kQuota : Outcome::kNoRoom;
    }
    const int want = static_cast<int>(std::min<int64_t>(j.spec.max_workers, room));
    std::vector<int> placed;
    if (nominated) placed = PlaceOn(j, j.nominated);  // the room its victims made
    if (placed.empty()) placed = Place(j, nullptr, j.spec.min_workers, want, avoid);
    if (placed.empty()) {
      NoteFailure(j, avoid != nullptr);
      return Outcome::kNoRoom;
    }
    Allocate(j, placed, now);
    j.nominated.clear();
    ++stats.started;
    out->push_back(StartDecision(j));
    return Outcome::kStarted;
  }

  bool KnownToFail(const JobState& j, bool constrained) const {
    if (Exceeds(j.spec.per_worker, max_free)) return true;
    if (!j.spec.node_selector.empty()) return false;
    for (const Shape& f : failed) {
      // A job that may use spot nodes has more nodes to choose from than one that may not.
      if ((f.spot_ok || !j.spec.spot_ok) && j.spec.min_workers >= f.workers &&
          f.per_worker.FitsIn(j.spec.per_worker) && (constrained || !f.constrained)) {
        return true;
      }
    }
    return false;
  }

  void NoteFailure(const JobState& j, bool constrained) {
    if (j.spec.node_selector.empty() && failed.size() < 64) {
      failed.push_back({j.spec.per_worker, j.spec.min_workers, j.spec.spot_ok, constrained});
    }
  }

  void StartCycle() {
    failed.clear();
    max_free = Resources{0, 0, 0};
    for (const NodeState& n : nodes) {
      if (n.cordoned) continue;
      max_free.cpu_millis = std::max(max_free.cpu_millis, n.free.cpu_millis);
      max_free.memory_bytes = std::max(max_free.memory_bytes, n.free.memory_bytes);
      max_free.gpu = std::max(max_free.gpu, n.free.gpu);
    }
  }

  // `nodes` as a placement, if each still has room for its worker.
  std::vector<int> PlaceOn(const JobState& j, const std::vector<int>& where) const {
    std::vector<Resources> free = FreeVector();
    for (int n : where) {
      if (!Eligible(j, n) || !j.spec.per_worker.FitsIn(free[n])) return {};
      free[n] -= j.spec.per_worker;
    }
    return where;
  }

  // The blocked job's reservation: when enough will be free, by running jobs' time limits, and
  // the nodes it would take then.
  void Reserve(const JobState& j, Clock::TimePoint now, Constraint* c,
               std::vector<char>* reserved) const {
    std::vector<std::pair<Clock::TimePoint, const JobState*>> ends;
    for (const JobState* r : running) {
      ends.emplace_back(r->started + r->spec.time_limit.value_or(options.default_time_limit), r);
    }
    std::sort(ends.begin(), ends.end());
    std::vector<Resources> free = FreeVector();
    Resources free_sum = free_total;
    const Resources need = Times(j.spec.per_worker, j.spec.min_workers);
    for (const auto& [end, r] : ends) {
      for (int n : r->nodes) {
        free[n] += r->spec.per_worker;
        if (!nodes[n].cordoned) free_sum += r->spec.per_worker;
      }
      if (Exceeds(need, free_sum)) continue;
      std::vector<int> placed = Place(j, &free, j.spec.min_workers, j.spec.min_workers, nullptr);
      if (placed.empty()) continue;
      c->end_by = std::max(end, now);
      reserved->assign(nodes.size(), 0);
      for (int n : placed) (*reserved)[n] = 1;
      c->avoid = reserved;
      return;
    }
    // It cannot fit even when everything running has ended (cordoned nodes): nothing to hold.
  }

  // A running job that gives room: all its workers, or an elastic job's workers above its minimum.
  struct Victim {
    JobState* job;
    int release;  // workers given back, from the last placed
  };

  // Victims that make room for `j`: shrinking elastic jobs first, then whole jobs; borrowers of
  // other queues before lower-priority jobs of its own; the lowest priority and newest first;
  // then the fewest of them. Empty when no set makes room. `placement`: where `j` goes then.
  std::vector<Victim> Victims(const JobState& j, std::vector<int>* placement) const {
    const QueueState& own = queues[j.queue];
    Resources own_after = own.usage;
    own_after += Times(j.spec.per_worker, j.spec.min_workers);
    const bool within_quota = !Exceeds(own_after, own.spec.quota);
    std::vector<Victim> shrinks, wholes;
    for (JobState* r : running) {
      if (r->phase != JobPhase::kRunning) continue;
      const bool same = r->queue == j.queue && r->spec.priority < j.spec.priority;
      const bool reclaim = r->queue != j.queue && within_quota && Borrowing(queues[r->queue]);
      if (!same && !reclaim) continue;
      const int size = static_cast<int>(r->nodes.size());
      if (size > r->spec.min_workers) shrinks.push_back({r, size - r->spec.min_workers});
      wholes.push_back({r, size});
    }
    const auto order = [&](const Victim& a, const Victim& b) {
      const bool ar = a.job->queue != j.queue, br = b.job->queue != j.queue;
      if (ar != br) return ar;
      if (a.job->spec.priority != b.job->spec.priority) {
        return a.job->spec.priority < b.job->spec.priority;
      }
      if (a.job->started != b.job->started) return a.job->started > b.job->started;
      return a.job->seq > b.job->seq;
    };
    std::sort(shrinks.begin(), shrinks.end(), order);
    std::sort(wholes.begin(), wholes.end(), order);
    shrinks.insert(shrinks.end(), wholes.begin(), wholes.end());
    return Fewest(j, shrinks, placement);
  }

  // Frees (sign +1) or takes back (-1) the last `release` workers of a victim in the simulation.
  void Give(const Victim& v, int sign, std::vector<Resources>* free, Resources* free_sum,
            Resources* own_usage, int own_queue) const {
    const JobState& r = *v.job;
    for (int k = 0; k < v.release; ++k) {
      const int n = r.nodes[r.nodes.size() - 1 - static_cast<size_t>(k)];
      Resources d = r.spec.per_worker;
      if (sign < 0) d = Times(d, -1);
      (*free)[n] += d;
      if (!nodes[n].cordoned) *free_sum += d;
      if (r.queue == own_queue) *own_usage -= d;
    }
  }

  std::vector<Victim> Fewest(const JobState& j, const std::vector<Victim>& candidates,
                             std::vector<int>* placement) const {
    std::vector<Resources> free = FreeVector();
    Resources free_sum = free_total;
    Resources own_usage = queues[j.queue].usage;
    const Resources need = Times(j.spec.per_worker, j.spec.min_workers);
    const auto fits = [&]() {
      if (Exceeds(need, free_sum) || QuotaRoomWith(j, own_usage) < j.spec.min_workers) {
        return std::vector<int>();
      }
      return Place(j, &free, j.spec.min_workers, j.spec.min_workers, nullptr);
    };
    // A whole-job entry after a shrink of the same job frees only what the shrink left.
    std::map<const JobState*, int> released;
    std::vector<Victim> victims;
    for (const Victim& v : candidates) {
      const int start = released[v.job];
      const int size = static_cast<int>(v.job->nodes.size());
      // A shrink gives back one worker at a time, only as many as make room; a whole job all.
      const bool whole = v.release == size;
      for (int k = start + 1; k <= v.release && placement->empty(); ++k) {
        if (whole && k < v.release) continue;
        Give({v.job, k}, +1, &free, &free_sum, &own_usage, j.queue);
        Give({v.job, released[v.job]}, -1, &free, &free_sum, &own_usage, j.queue);
        released[v.job] = k;
        *placement = fits();
      }
      if (released[v.job] > start) victims.push_back({v.job, released[v.job]});
      if (!placement->empty()) break;
    }
    if (placement->empty()) return {};
    // Fewest: take back each earlier victim whose room turns out not to be needed.
    for (size_t i = victims.size() - 1; i-- > 0;) {
      const Victim v = victims[i];
      if (std::any_of(victims.begin() + static_cast<std::ptrdiff_t>(i) + 1, victims.end(),
                      [&](const Victim& w) { return w.job == v.job; })) {
        continue;  // a later entry of the same job counts these workers
      }
      Give(v, -1, &free, &free_sum, &own_usage, j.queue);
      std::vector<int> p = fits();
      if (p.empty()) {
        Give(v, +1, &free, &free_sum, &own_usage, j.queue);
        continue;
      }
      *placement = p;
      victims.erase(victims.begin() + static_cast<std::ptrdiff_t>(i));
    }
    // One entry per job: its last, which counts every worker it gives.
    std::vector<Victim> unique;
    for (size_t i = 0; i < victims.size(); ++i) {
      const bool later =
          std::any_of(victims.begin() + static_cast<std::ptrdiff_t>(i) + 1, victims.end(),
                      [&](const Victim& w) { return w.job == victims[i].job; });
      if (!later) unique.push_back(victims[i]);
    }
    return unique;
  }

  // QuotaRoom with the job's queue at `usage` (the cohort's use moves by the same amount).
  int64_t QuotaRoomWith(const JobState& j, const Resources& usage) const {
    Resources all = AllUsage();
    all -= queues[j.queue].usage;
    all += usage;
    return QuotaRoom(j, usage, all);
  }

  bool TryPreempt(JobState& j, std::vector<Decision>* out) {
    if (j.waiting_for > 0) return true;  // its victims are still stopping
    std::vector<int> placement;
    std::vector<Victim> victims = Victims(j, &placement);
    if (victims.empty()) return false;
    const std::string why =
        "job " + j.spec.id + " (priority " + std::to_string(j.spec.priority) + ")";
    for (const Victim& v : victims) {
      JobState& r = *v.job;
      r.nominated.clear();
      r.preempted_for = &j;
      const int keep = static_cast<int>(r.nodes.size()) - v.release;
      if (keep == 0) {
        Stop(r, "preempted by " + why, true, out);
        continue;
      }
      r.phase = JobPhase::kStopping;
      r.requeue = false;
      r.resize_to = std::vector<int>(r.nodes.begin(), r.nodes.begin() + keep);
      r.reason = "shrunk to " + std::to_string(keep) + " workers for " + why;
      out->push_back(Decision{Decision::Kind::kResize, r.spec.id, {}, r.reason});
      for (int n : *r.resize_to) out->back().nodes.push_back(nodes[n].spec.name);
    }
    stats.preempted += victims.size();
    j.waiting_for = victims.size();
    j.nominated = placement;
    j.reason = "waiting for " + std::to_string(victims.size()) + " preempted job(s) to stop";
    return true;
  }

  void CheckTimeLimits(Clock::TimePoint now, std::vector<Decision>* out) {
    std::vector<JobState*> over;
    for (JobState* r : running) {
      if (r->phase == JobPhase::kRunning && r->spec.time_limit &&
          now >= r->started + *r->spec.time_limit) {
        over.push_back(r);
      }
    }
    for (JobState* r : over) Stop(*r, "time limit " + FormatLimit(*r->spec.time_limit), false, out);
  }

  static std::string FormatLimit(milliseconds d) { return std::to_string(d.count() / 1000) + "s"; }

  // The queue whose next job goes first: smallest dominant share, then the higher priority and
  // earlier job. `cursor`: each queue's next untried job.
  int NextQueue(const std::vector<std::map<Key, JobState*>::iterator>& cursor) const {
    int best = kNone;
    double best_share = 0;
    for (size_t q = 0; q < queues.size(); ++q) {
      if (cursor[q] == queues[q].line.end()) continue;
      const double share = DominantShare(queues[q]);
      if (best == kNone || share < best_share ||
          (share == best_share && cursor[q]->first < cursor[best]->first)) {
        best = static_cast<int>(q);
        best_share = share;
      }
    }
    return best;
  }

  std::vector<Decision> Cycle(Clock::TimePoint now) {
    std::vector<Decision> out;
    ++stats.cycles;
    StartCycle();
    CheckTimeLimits(now, &out);
    std::vector<std::map<Key, JobState*>::iterator> cursor;
    for (QueueState& q : queues) cursor.push_back(q.line.begin());
    Constraint constraint;
    std::vector<char> reserved;
    bool blocked = false;
    int tests = 0;
    while (true) {
      const int q = NextQueue(cursor);
      if (q == kNone) break;
      if (blocked && ++tests > options.max_backfill_tests) break;
      auto it = cursor[q]++;
      JobState& j = *it->second;
      ++stats.tried;
      const Outcome outcome = TryStart(j, constraint, now, &out);
      if (outcome == Outcome::kStarted) {
        queues[q].line.erase(it);
        continue;
      }
      if (blocked) continue;
      if (options.preemption && TryPreempt(j, &out)) {
        blocked = true;
        reserved.assign(nodes.size(), 0);
        for (int n : j.nominated) reserved[n] = 1;
        constraint.end_by = now;
        constraint.avoid = &reserved;
      } else if (outcome == Outcome::kNoRoom) {
        blocked = true;
        Reserve(j, now, &constraint, &reserved);
      }
      // kQuota without anyone to preempt: the next in line may fit its queue's quota.
    }
    if (!blocked) Grow(now, &out);
    return out;
  }

  // With nothing waiting, elastic jobs below their maximum take free room (restarting larger).
  void Grow(Clock::TimePoint now, std::vector<Decision>* out) {
    for (JobState* r : std::vector<JobState*>(running.begin(), running.end())) {
      JobState& j = *r;
      const int have = static_cast<int>(j.nodes.size());
      if (j.phase != JobPhase::kRunning || have >= j.spec.max_workers) continue;
      const int64_t room = QuotaRoom(j, queues[j.queue].usage, AllUsage());
      const int more = static_cast<int>(std::min<int64_t>(j.spec.max_workers - have, room));
      if (more <= 0) continue;
      std::vector<int> extra = Place(j, nullptr, 1, more, nullptr);
      if (extra.empty()) continue;
      std::vector<int> placed = j.nodes;
      placed.insert(placed.end(), extra.begin(), extra.end());
      // The extra room is held from now on (as part of the job) so that nothing takes it while
      // the job restarts.
      for (int n : extra) nodes[n].free -= j.spec.per_worker;
      const Resources added = Times(j.spec.per_worker, static_cast<int64_t>(extra.size()));
      free_total -= added;
      queues[j.queue].usage += added;
      j.nodes = placed;
      j.phase = JobPhase::kStopping;
      j.requeue = false;
      j.resize_to = placed;
      j.reason = "grown to " + std::to_string(placed.size()) + " workers";
      out->push_back(Decision{Decision::Kind::kResize, j.spec.id, {}, j.reason});
      for (int n : placed) out->back().nodes.push_back(nodes[n].spec.name);
    }
    (void)now;
  }
};

Scheduler::Scheduler(std::unique_ptr<State> state) : s_(std::move(state)) {}
Scheduler::~Scheduler() = default;

Result<std::unique_ptr<Scheduler>> Scheduler::Make(std::vector<Node> nodes,
                                                   std::vector<QueueSpec> queues,
                                                   SchedulerOptions options) {
  auto s = std::make_unique<State>();
  s->options = options;
  s->total = s->free_total = Resources{0, 0, 0};
  std::set<std::string> names;
  for (Node& n : nodes) {
    if (!names.insert(n.name).second) return InvalidArgumentError("two nodes named " + n.name);
    s->total += n.capacity;
    s->nodes.push_back(State::NodeState{std::move(n), {}, false});
    s->nodes.back().free = s->nodes.back().spec.capacity;
  }
  s->free_total = s->total;
  for (const State::NodeState& n : s->nodes) s->capacities.push_back(n.spec.capacity);
  std::vector<int> order(s->nodes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  // Spot first, cheapest first; on-demand nodes in their given order after them.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const auto& x = s->nodes[a].spec;
    const auto& y = s->nodes[b].spec;
    if (x.spot != y.spot) return x.spot;
    return x.spot && x.cost_per_hour < y.cost_per_hour;
  });
  s->spot_first = order;
  for (int n : order) {
    if (!s->nodes[n].spec.spot) s->on_demand.push_back(n);
  }
  if (queues.empty()) queues.push_back(QueueSpec{"default", s->total, {0, 0, 0}, 1});
  s->quota_total = Resources{0, 0, 0};
  for (QueueSpec& q : queues) {
    if (s->queue_index.count(q.name) != 0)
      return InvalidArgumentError("two queues named " + q.name);
    if (!(q.weight > 0))
      return InvalidArgumentError("queue " + q.name + ": weight must be above 0");
    s->queue_index[q.name] = static_cast<int>(s->queues.size());
    s->quota_total += q.quota;
    s->queues.push_back(State::QueueState{std::move(q), Resources{0, 0, 0}, {}});
  }
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(s)));
}

Status Scheduler::Validate(const JobSpec& spec) const {
  if (spec.id.empty()) return InvalidArgumentError("a job needs an id");
  const auto q = s_->queue_index.find(spec.queue);
  if (q == s_->queue_index.end()) {
    std::string names;
    for (const auto& queue : s_->queues) names += (names.empty() ? "" : ", ") + queue.spec.name;
    return InvalidArgumentError("job " + spec.id + ": no queue '" + spec.queue +
                                "' (queues: " + names + ")");
  }
  const Resources& per = spec.per_worker;
  if (per.cpu_millis < 0 || per.memory_bytes < 0 || per.gpu < 0 ||
      (per.cpu_millis == 0 && per.memory_bytes == 0 && per.gpu == 0)) {
    return InvalidArgumentError("job " + spec.id +
                                ": a worker must ask for some cpu, memory or gpu");
  }
  if (spec.min_workers < 1 || spec.max_workers < spec.min_workers) {
    return InvalidArgumentError("job " + spec.id + ": workers must be 1 or more, min <= max");
  }
  // Could it ever run? On an empty cluster, within its queue's limit.
  State::JobState probe;
  probe.spec = spec;
  if (s_->Place(probe, &s_->capacities, spec.min_workers, spec.min_workers, nullptr).empty()) {
    return InvalidArgumentError("job " + spec.id + ": " + std::to_string(spec.min_workers) +
                                " workers of " + ResourcesText(spec.per_worker) +
                                " do not fit on the cluster's nodes even when idle");
  }
  const QueueSpec& qs = s_->queues[q->second].spec;
  Resources limit = qs.quota;
  limit += qs.borrowing_limit;
  if (FitCount(limit, spec.per_worker) < spec.min_workers) {
    return InvalidArgumentError("job " + spec.id + " needs more than queue " + qs.name +
                                " may ever use (quota + borrowing limit)");
  }
  return Status::Ok();
}

Status Scheduler::Submit(JobSpec spec, Clock::TimePoint now) {
  (void)now;
  if (s_->jobs.count(spec.id) != 0) return InvalidArgumentError("job " + spec.id + " exists");
  REEL_RETURN_IF_ERROR(Validate(spec));
  auto job = std::make_unique<State::JobState>();
  job->spec = std::move(spec);
  job->queue = s_->queue_index.at(job->spec.queue);
  job->seq = s_->next_seq++;
  State::JobState* raw = job.get();
  s_->jobs[raw->spec.id] = std::move(job);
  s_->queues[raw->queue].line[{raw->spec.priority, raw->seq}] = raw;
  return Status::Ok();
}

Status Scheduler::SetPriority(const std::string& id, int priority) {
  const auto it = s_->jobs.find(id);
  if (it == s_->jobs.end()) return NotFoundError("no job " + id);
  State::JobState& j = *it->second;
  if (j.spec.priority == priority) return Status::Ok();
  auto& line = s_->queues[j.queue].line;
  const bool waiting = line.erase({j.spec.priority, j.seq}) > 0;
  j.spec.priority = priority;
  if (waiting) line[{j.spec.priority, j.seq}] = &j;
  return Status::Ok();
}

Status Scheduler::Requeue(const std::string& id) {
  const auto it = s_->jobs.find(id);
  if (it == s_->jobs.end()) return NotFoundError("no job " + id);
  State::JobState& j = *it->second;
  if (j.phase != JobPhase::kDone) return FailedPreconditionError("job " + id + " has not ended");
  ++j.preemptions;
  j.phase = JobPhase::kPending;
  s_->queues[j.queue].line[{j.spec.priority, j.seq}] = &j;
  return Status::Ok();
}

std::vector<Scheduler::NodeView> Scheduler::Nodes() const {
  std::vector<NodeView> out;
  for (const auto& n : s_->nodes) out.push_back(NodeView{n.spec, n.free, n.cordoned});
  return out;
}

std::vector<QueueSpec> Scheduler::Queues() const {
  std::vector<QueueSpec> out;
  for (const auto& q : s_->queues) out.push_back(q.spec);
  return out;
}

Status Scheduler::Adopt(JobSpec spec, const std::vector<std::string>& nodes,
                        Clock::TimePoint started) {
  const std::string id = spec.id;
  REEL_RETURN_IF_ERROR(Submit(std::move(spec), started));
  State::JobState& j = *s_->jobs.at(id);
  std::vector<int> placed;
  std::vector<Resources> free = s_->FreeVector();
  for (const std::string& name : nodes) {
    const auto n = std::find_if(s_->nodes.begin(), s_->nodes.end(),
                                [&](const State::NodeState& x) { return x.spec.name == name; });
    const int index = static_cast<int>(n - s_->nodes.begin());
    if (n == s_->nodes.end() || !j.spec.per_worker.FitsIn(free[index])) {
      s_->queues[j.queue].line.erase({j.spec.priority, j.seq});
      s_->jobs.erase(id);
      return InvalidArgumentError("job " + id + " cannot run again on node " + name +
                                  " (unknown, or without room)");
    }
    free[index] -= j.spec.per_worker;
    placed.push_back(index);
  }
  s_->queues[j.queue].line.erase({j.spec.priority, j.seq});
  s_->Allocate(j, placed, started);
  return Status::Ok();
}

Result<std::optional<Decision>> Scheduler::Cancel(const std::string& id, Clock::TimePoint now) {
  (void)now;
  const auto it = s_->jobs.find(id);
  if (it == s_->jobs.end()) return NotFoundError("no job " + id);
  State::JobState& j = *it->second;
  if (j.phase == JobPhase::kPending) {
    s_->queues[j.queue].line.erase({j.spec.priority, j.seq});
    j.phase = JobPhase::kDone;
    j.reason = "cancelled";
    return std::optional<Decision>();
  }
  if (j.phase != JobPhase::kRunning) return std::optional<Decision>();
  std::vector<Decision> out;
  s_->Stop(j, "cancelled", false, &out);
  return std::optional<Decision>(out.front());
}

std::vector<Decision> Scheduler::Schedule(Clock::TimePoint now) { return s_->Cycle(now); }

Status Scheduler::Finished(const std::string& id, Clock::TimePoint now) {
  const auto it = s_->jobs.find(id);
  if (it == s_->jobs.end()) return NotFoundError("no job " + id);
  State::JobState& j = *it->second;
  if (j.phase != JobPhase::kRunning && j.phase != JobPhase::kStopping) {
    return FailedPreconditionError("job " + id + " is not running");
  }
  // A job asked to stop may end by itself first (its work was done): whoever waited for its
  // room no longer waits for it, and a resize it was stopping for is off.
  s_->Unblock(j);
  j.resize_to.reset();
  s_->Release(j, now);
  j.phase = JobPhase::kDone;
  return Status::Ok();
}

Result<std::optional<Decision>> Scheduler::Stopped(const std::string& id, Clock::TimePoint now) {
  const auto it = s_->jobs.find(id);
  if (it == s_->jobs.end()) return NotFoundError("no job " + id);
  State::JobState& j = *it->second;
  if (j.phase != JobPhase::kStopping) {
    return FailedPreconditionError("job " + id + " was not asked to stop");
  }
  s_->Unblock(j);
  if (j.resize_to) {
    // Everything it held is given back, then what it keeps (a grown job's extra room was held
    // as part of it) is taken again.
    std::vector<int> placed = std::move(*j.resize_to);
    j.resize_to.reset();
    s_->Release(j, now);
    s_->Allocate(j, placed, now);
    return std::optional<Decision>(s_->StartDecision(j));
  }
  s_->Release(j, now);
  if (!j.requeue) {
    j.phase = JobPhase::kDone;
    return std::optional<Decision>();
  }
  ++j.preemptions;
  j.phase = JobPhase::kPending;
  s_->queues[j.queue].line[{j.spec.priority, j.seq}] = &j;  // its old place in line
  return std::optional<Decision>();
}

Result<std::vector<Decision>> Scheduler::Reclaim(const std::string& node, Clock::TimePoint now) {
  (void)now;
  const auto n = std::find_if(s_->nodes.begin(), s_->nodes.end(),
                              [&](const State::NodeState& x) { return x.spec.name == node; });
  if (n == s_->nodes.end()) return NotFoundError("no node " + node);
  const int index = static_cast<int>(n - s_->nodes.begin());
  std::vector<Decision> out;
  if (!n->cordoned) {
    n->cordoned = true;
    s_->free_total -= n->free;
  }
  for (State::JobState* r : std::vector<State::JobState*>(s_->running.begin(), s_->running.end())) {
    if (r->phase != JobPhase::kRunning) continue;
    if (std::find(r->nodes.begin(), r->nodes.end(), index) == r->nodes.end()) continue;
    s_->Stop(*r, (n->spec.spot ? "spot node " : "node ") + node + " reclaimed", true, &out);
  }
  return out;
}

Status Scheduler::Restore(const std::string& node) {
  const auto n = std::find_if(s_->nodes.begin(), s_->nodes.end(),
                              [&](const State::NodeState& x) { return x.spec.name == node; });
  if (n == s_->nodes.end()) return NotFoundError("no node " + node);
  if (n->cordoned) {
    n->cordoned = false;
    s_->free_total += n->free;
  }
  return Status::Ok();
}

Result<JobView> Scheduler::Job(const std::string& id) const {
  const auto it = s_->jobs.find(id);
  if (it == s_->jobs.end()) return NotFoundError("no job " + id);
  const State::JobState& j = *it->second;
  JobView v{j.spec, j.phase, {}, j.preemptions, j.cost, j.reason};
  for (int n : j.nodes) v.nodes.push_back(s_->nodes[n].spec.name);
  return v;
}

size_t Scheduler::pending() const {
  size_t n = 0;
  for (const auto& q : s_->queues) n += q.line.size();
  return n;
}

size_t Scheduler::running() const { return s_->running.size(); }

const SchedulerStats& Scheduler::stats() const { return s_->stats; }

Result<Resources> Scheduler::QueueUsage(const std::string& queue) const {
  const auto q = s_->queue_index.find(queue);
  if (q == s_->queue_index.end()) return NotFoundError("no queue " + queue);
  return s_->queues[q->second].usage;
}

}  // namespace reel::sched
