// Which of several scheduler daemons sharing one database leads: a lease row in that database
// (table sched_lease), as Kubernetes' leader election keeps one in a Lease object.
//
// The leader renews the row every duration/5. A standby watches the row by its own clock: when
// the row has not changed for a whole `duration`, the leader is taken to be gone and the standby
// takes the lease with a compare-and-swap on (epoch, renewals), bumping the epoch. A holder on
// this machine under the same identity whose process is gone (a daemon restarted after kill -9)
// is taken over at once. Only elapsed time on each daemon's own clock is compared, so clocks
// of different machines need not agree.
//
// A leader that cannot renew for 2/3 of the duration stops leading before any standby may take
// over. Beyond that timing, every write of a leader carries the fence (CheckFence inside the
// write's transaction): once another daemon holds the lease at a newer epoch, the old leader's
// writes fail, so it can never start a job the new leader also starts.
//
// Thread-safety: one Lease per thread (it uses its database from the calling thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "db/database.h"

namespace reel::sched {

// Proof of leadership that writes carry: the lease's name, its holder and the epoch it holds.
struct Fence {
  std::string name;
  std::string holder;
  int64_t epoch = 0;
};

// FailedPrecondition unless `fence` still holds its lease at its epoch. Call it inside the
// transaction of the write it guards.
Status CheckFence(db::Database& db, const Fence& fence);

struct LeaseOptions {
  std::string name = "scheduler";
  // This daemon among the others: its machine's name by default. The holder recorded is
  // "IDENTITY:PID".
  std::string identity;
  std::string url;  // where this daemon answers; standbys name it to clients
  std::chrono::milliseconds duration{5000};
  Clock* clock = nullptr;  // null: the system's
};

class Lease {
 public:
  Lease(db::Database* db, LeaseOptions options);

  // One round: renews while leading (every duration/5), else watches the holder and takes an
  // expired lease. Errors are the database's; leading() then still says whether this daemon
  // may act (it stops leading once renewals have failed for 2/3 of the duration).
  Status Step();

  bool leading() const { return leading_; }
  // Valid while leading.
  Fence fence() const { return Fence{options_.name, holder_, epoch_}; }
  // The URL of the daemon that held the lease when last seen ("" before any).
  const std::string& leader_url() const { return leader_url_; }
  const std::string& holder() const { return holder_; }

  // Gives the lease up (a clean shutdown): a standby takes over at its next round.
  Status Release();

 private:
  struct Seen {
    std::string holder, url;
    int64_t epoch = 0, renewals = 0;
  };
  struct Outcome {
    bool leading = false;
    int64_t epoch = 0;
    std::string leader_url;
    std::optional<Seen> seen;  // the row as read (none: there was none)
  };

  Result<Outcome> Round();
  Result<Outcome> Renew(const Seen& row);
  Result<Outcome> Watch(const Seen& row);
  bool Expired(const Seen& row) const;
  bool HolderGoneHere(const std::string& holder) const;

  db::Database* db_;
  LeaseOptions options_;
  std::string holder_;
  bool leading_ = false;
  int64_t epoch_ = 0;
  std::string leader_url_;
  Clock::TimePoint renewed_at_{};   // last successful renewal (or acquisition)
  std::optional<Seen> observed_;    // the other holder's row as last seen changing ...
  Clock::TimePoint observed_at_{};  // ... and when, on this daemon's clock
};

}  // namespace reel::sched
