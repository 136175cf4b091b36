// Mark-and-sweep garbage collection of weight chunks, and the protocol that keeps it from
// removing a chunk that a concurrent push relies on.
//
// A chunk is needed when a version's manifest names it, or when a needed chunk is stored as a
// delta against it. An unreferenced chunk younger than the grace period is kept as if needed
// (with its bases): it may belong to a push still writing its chunks.
//
// The race the grace period cannot close: a push finds an old, unreferenced chunk already stored
// and reuses it instead of writing it; a collection that marked before the push's version
// existed then removes it. So a collection holds a lease in the database (registry_gc) while it
// runs and moves a generation counter when it begins and ends. A push notes the generation
// before it starts (waiting while a lease is held) and its commit, in the same transaction that
// adds the version, checks that no lease is held and the generation has not moved; otherwise it
// commits nothing and pushes again, which stores whatever went missing. The collector renews its
// lease as it works and checks it before every removal, so a collector that died lets pushes go
// on once its lease runs out. This relies on the clocks of the machines sharing a registry
// agreeing to well within kLeaseMs.
#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "base/sync_point.h"
#include "registry/registry_impl.h"

namespace reel::registry {
namespace {

constexpr int64_t kLeaseMs = 60'000;
constexpr int kMaxPushAttempts = 20;

struct GcRow {
  int64_t generation = 0;
  int64_t lease_until_ms = 0;  // 0: no lease
  std::string holder;
};

Result<GcRow> ReadGcRow(db::Database& d) {
  REEL_ASSIGN_OR_RETURN(
      auto rows,
      d.Query("SELECT generation, lease_until_ms, holder FROM registry_gc WHERE id = 1"));
  if (rows.empty()) return DataLossError("registry: the garbage collector's row is missing");
  GcRow row;
  row.generation = rows[0].Int(0);
  if (!rows[0].IsNull(1)) row.lease_until_ms = rows[0].Int(1);
  if (!rows[0].IsNull(2)) row.holder = rows[0].Text(2);
  return row;
}

// One collection's hold on the registry: taken, renewed and released in transactions.
class GcLease {
 public:
  explicit GcLease(LocalRegistry::Impl& im) : im_(im) {}
  ~GcLease() {
    if (generation_ != 0) Release().IgnoreError();  // an error return: let pushes go on
  }

  Status Acquire(const std::string& holder) {
    return im_.db().Transact([&]() -> Status {
      REEL_ASSIGN_OR_RETURN(GcRow row, ReadGcRow(im_.db()));
      const int64_t now = im_.NowMs();
      if (row.lease_until_ms > now) {
        return FailedPreconditionError(
            "registry: a garbage collection by '" + row.holder + "' is running (its lease has " +
            std::to_string((row.lease_until_ms - now) / 1000) + " s left)");
      }
      generation_ = row.generation + 1;
      until_ = now + kLeaseMs;
      return Write(generation_, until_, holder);
    });
  }

  // OK while the lease holds; renews it once half of it has passed. Errors: FailedPrecondition
  // when the lease was lost (it ran out, and pushes may have gone on).
  Status Check() {
    const int64_t now = im_.NowMs();
    if (now < until_ - kLeaseMs / 2) return Status::Ok();
    return im_.db().Transact([&]() -> Status {
      REEL_ASSIGN_OR_RETURN(GcRow row, ReadGcRow(im_.db()));
      if (row.generation != generation_ || row.lease_until_ms <= now) {
        generation_ = 0;  // not ours to release any more
        return FailedPreconditionError(
            "registry: the garbage collection lost its lease (it ran longer than " +
            std::to_string(kLeaseMs / 1000) + " s between two renewals); removed nothing more");
      }
      until_ = now + kLeaseMs;
      return Write(generation_, until_, row.holder);
    });
  }

  Status Release() {
    const int64_t mine = generation_;
    generation_ = 0;
    return im_.db().Transact([&]() -> Status {
      REEL_ASSIGN_OR_RETURN(GcRow row, ReadGcRow(im_.db()));
      if (row.generation != mine) return Status::Ok();  // lost, and taken by another
      return Write(mine + 1, std::nullopt, std::nullopt);
    });
  }

 private:
  Status Write(int64_t generation, std::optional<int64_t> until,
               const std::optional<std::string>& holder) {
    auto value = [](const auto& v) { return v ? db::Value(*v) : db::Value(std::monostate{}); };
    return im_.db()
        .Exec("UPDATE registry_gc SET generation = ?, lease_until_ms = ?, holder = ? WHERE id = 1",
              {generation, value(until), value(holder)})
        .status();
  }

  LocalRegistry::Impl& im_;
  int64_t generation_ = 0;  // 0: not held
  int64_t until_ = 0;
};

void AddChunks(const WeightManifest& m, std::set<std::string>* out) {
  for (const auto& [name, t] : m.tensors) {
    for (const ChunkRef& c : t.chunks) out->insert(c.sha256);
  }
}

}  // namespace

Result<GcTicket> LocalRegistry::Impl::GcTicketForPush(int attempt) {
  if (attempt > kMaxPushAttempts) {
    return UnavailableError("registry: garbage collections kept running during this push (" +
                            std::to_string(kMaxPushAttempts) + " attempts); try again later");
  }
  for (;;) {
    REEL_ASSIGN_OR_RETURN(GcRow row, ReadGcRow(db()));
    const int64_t left = row.lease_until_ms == 0 ? 0 : row.lease_until_ms - NowMs();
    if (left <= 0) return GcTicket{row.generation};
    // A collection is running: it ends, or its lease runs out, within kLeaseMs.
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(left, 200)));
  }
}

Result<bool> LocalRegistry::Impl::GcMovedSince(const GcTicket& ticket) {
  REEL_ASSIGN_OR_RETURN(GcRow row, ReadGcRow(db()));
  return row.generation != ticket.generation ||
         (row.lease_until_ms != 0 && row.lease_until_ms > NowMs());
}

Result<GcStats> LocalRegistry::CollectGarbage(const GcOptions& options, const Actor& who) {
  if (!who.admin) {
    return PermissionDeniedError("registry: only an admin may collect garbage ('" + who.name +
                                 "' is not one)");
  }
  if (options.grace_ms < 0) return InvalidArgumentError("registry gc: a negative grace period");
  Impl& im = *impl_;
  GcLease lease(im);
  REEL_RETURN_IF_ERROR(lease.Acquire(who.name));
  const int64_t now = im.NowMs();

  // Mark: what the versions name, what is young, and every base those are deltas against.
  std::set<std::string> referenced;
  REEL_ASSIGN_OR_RETURN(auto rows, im.db().Query("SELECT model, version, weights, optimizer "
                                                 "FROM registry_version_documents"));
  for (const db::Row& r : rows) {
    const std::string what = VersionUri(r.Text(0), r.Int(1));
    REEL_ASSIGN_OR_RETURN(WeightManifest w, ManifestFromJson(r.Text(2), what + " weights"));
    AddChunks(w, &referenced);
    if (!r.IsNull(3)) {
      REEL_ASSIGN_OR_RETURN(WeightManifest o, ManifestFromJson(r.Text(3), what + " optimizer"));
      AddChunks(o, &referenced);
    }
  }
  REEL_ASSIGN_OR_RETURN(auto stored, im.weights().ListChunks());
  std::set<std::string> keep;
  std::vector<std::string> pending;
  GcStats stats;
  for (const auto& [address, info] : stored) {
    const bool young = info.mtime_ms > now - options.grace_ms;
    if (referenced.count(address) == 0 && young) ++stats.chunks_young;
    if (referenced.count(address) != 0 || young) {
      keep.insert(address);
      pending.push_back(address);
    }
  }
  while (!pending.empty()) {
    const std::string address = std::move(pending.back());
    pending.pop_back();
    REEL_RETURN_IF_ERROR(lease.Check());
    REEL_ASSIGN_OR_RETURN(std::string base, im.weights().StoredBase(address));
    if (!base.empty() && stored.count(base) != 0 && keep.insert(base).second) {
      pending.push_back(base);
    }
  }
  stats.chunks_live = static_cast<int64_t>(keep.size()) - stats.chunks_young;
  for (const std::string& address : referenced) stats.chunks_missing += stored.count(address) == 0;
  REEL_SYNC_POINT("Registry::CollectGarbage:Marked");

  // Sweep.
  for (const auto& [address, info] : stored) {
    if (keep.count(address) != 0) continue;
    REEL_RETURN_IF_ERROR(lease.Check());
    if (!options.dry_run) REEL_RETURN_IF_ERROR(im.weights().DeleteChunk(address));
    ++stats.chunks_removed;
    stats.bytes_removed += info.size;
  }
  REEL_RETURN_IF_ERROR(lease.Release());
  return stats;
}

}  // namespace reel::registry
