#include "sched/lease.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include "base/logging.h"
#include "base/strings.h"
#include "base/subprocess.h"
#include "sched/run_store.h"

namespace reel::sched {

Status CheckFence(db::Database& db, const Fence& fence) {
  REEL_ASSIGN_OR_RETURN(
      std::vector<db::Row> rows,
      db.Query("SELECT 1 FROM sched_lease WHERE name = ? AND holder = ? AND epoch = ?",
               {fence.name, fence.holder, fence.epoch}));
  if (rows.empty()) {
    return FailedPreconditionError("this scheduler (" + fence.holder +
                                   ") no longer leads: another took the lease");
  }
  return Status::Ok();
}

Lease::Lease(db::Database* db, LeaseOptions options) : db_(db), options_(std::move(options)) {
  if (options_.clock == nullptr) options_.clock = Clock::System();
  if (options_.identity.empty()) options_.identity = MachineName();
  holder_ = options_.identity + ":" + std::to_string(getpid());
}

Status Lease::Step() {
  // A leader between renewals has nothing to read or write: the daemon ticks ten times a second,
  // and a write transaction each time would hold up every other writer of the database.
  if (leading_ && options_.clock->Now() - renewed_at_ < options_.duration / 5) {
    return Status::Ok();
  }
  Outcome out;
  Status s = db_->Transact([&]() -> Status {
    REEL_ASSIGN_OR_RETURN(out, Round());
    return Status::Ok();
  });
  const Clock::TimePoint now = options_.clock->Now();
  if (!s.ok()) {
    if (leading_ && now - renewed_at_ >= options_.duration * 2 / 3) {
      leading_ = false;
      Logger("sched")->error("lease {}: cannot renew ({}); no longer leading", options_.name,
                             s.message());
    }
    return s;
  }
  if (out.leading) renewed_at_ = now;  // every leading round wrote: a renewal or the takeover
  leading_ = out.leading;
  epoch_ = out.epoch;
  leader_url_ = out.leader_url;
  if (!leading_ && out.seen) {
    const Seen& row = *out.seen;
    if (!observed_ || observed_->holder != row.holder || observed_->epoch != row.epoch ||
        observed_->renewals != row.renewals) {
      observed_ = row;
      observed_at_ = now;
    }
  }
  return Status::Ok();
}

Result<Lease::Outcome> Lease::Round() {
  REEL_ASSIGN_OR_RETURN(
      std::vector<db::Row> rows,
      db_->Query("SELECT holder, url, epoch, renewals FROM sched_lease WHERE name = ?",
                 {options_.name}));
  if (rows.empty()) {
    REEL_RETURN_IF_ERROR(db_->Exec("INSERT INTO sched_lease (name, holder, url, epoch, renewals, "
                                   "renewed_ms) VALUES (?, ?, ?, 1, 0, ?)",
                                   {options_.name, holder_, options_.url, NowUnixMs()})
                             .status());
    return Outcome{true, 1, options_.url, std::nullopt};
  }
  Seen row{rows[0].Text(0), rows[0].Text(1), rows[0].Int(2), rows[0].Int(3)};
  if (leading_ && row.holder == holder_ && row.epoch == epoch_) return Renew(row);
  return Watch(row);
}

Result<Lease::Outcome> Lease::Renew(const Seen& row) {
  REEL_ASSIGN_OR_RETURN(
      int64_t changed,
      db_->Exec("UPDATE sched_lease SET renewals = renewals + 1, url = ?, renewed_ms = ? "
                "WHERE name = ? AND holder = ? AND epoch = ?",
                {options_.url, NowUnixMs(), options_.name, holder_, epoch_}));
  if (changed != 1) return Outcome{false, 0, row.url, row};
  return Outcome{true, epoch_, options_.url, row};
}

Result<Lease::Outcome> Lease::Watch(const Seen& row) {
  if (!Expired(row)) return Outcome{false, 0, row.url, row};
  REEL_ASSIGN_OR_RETURN(
      int64_t changed,
      db_->Exec("UPDATE sched_lease SET holder = ?, url = ?, epoch = ?, renewals = 0, "
                "renewed_ms = ? WHERE name = ? AND epoch = ? AND renewals = ?",
                {holder_, options_.url, row.epoch + 1, NowUnixMs(), options_.name, row.epoch,
                 row.renewals}));
  if (changed != 1) return Outcome{false, 0, row.url, row};
  return Outcome{true, row.epoch + 1, options_.url, row};
}

// Gone: released, on this machine under our identity with its process ended, or unchanged
// for a whole duration by our clock.
bool Lease::Expired(const Seen& row) const {
  if (row.holder.empty() || HolderGoneHere(row.holder)) return true;
  const bool unchanged = observed_ && observed_->holder == row.holder &&
                         observed_->epoch == row.epoch && observed_->renewals == row.renewals;
  return unchanged && options_.clock->Now() - observed_at_ >= options_.duration;
}

bool Lease::HolderGoneHere(const std::string& holder) const {
  const size_t colon = holder.rfind(':');
  if (colon == std::string::npos || holder.substr(0, colon) != options_.identity) return false;
  const std::optional<int64_t> pid = ParseInt64(holder.substr(colon + 1));
  if (!pid || *pid <= 0 || *pid == getpid()) return false;
  return kill(static_cast<pid_t>(*pid), 0) != 0 && errno == ESRCH;
}

Status Lease::Release() {
  if (!leading_) return Status::Ok();
  leading_ = false;
  return db_
      ->Exec("UPDATE sched_lease SET holder = '' WHERE name = ? AND holder = ? AND epoch = ?",
             {options_.name, holder_, epoch_})
      .status();
}

}  // namespace reel::sched
