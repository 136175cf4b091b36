#include "parallel/ps_client.h"

#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <optional>
#include <thread>

#include "base/strings.h"
#include "http/client.h"
#include "parallel/ps_wire.h"

namespace reel::parallel {
namespace {

using Clock = std::chrono::steady_clock;

bool Transient(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded;
}

}  // namespace

struct PsClient::Shard {
  PsShardTensors tensors;
  uint64_t bytes = 0;  // of the parameters and buffers
  std::optional<http::Client> client;
  std::string address;
  // The last push, kept until a later one replaces it, for a shard that asks for it again.
  int64_t kept_step = -1;
  bool kept_finite = true;
  std::string kept_body;
};

PsClient::PsClient(PsClientOptions options, PsAddressLookup lookup)
    : options_(options), lookup_(std::move(lookup)) {}

PsClient::~PsClient() = default;

Result<std::unique_ptr<PsClient>> PsClient::Make(PsClientOptions options,
                                                 std::vector<PsShardTensors> shards,
                                                 PsAddressLookup lookup) {
  if (shards.empty() || !lookup || options.timeout.count() <= 0 || options.worker < 0) {
    return InvalidArgumentError(
        "parameter-server client: need shards, an address lookup, a worker >= 0 and a timeout");
  }
  std::unique_ptr<PsClient> client(new PsClient(options, std::move(lookup)));
  for (auto& s : shards) {
    for (const auto* list : {&s.parameters, &s.buffers}) {
      for (const auto& t : *list) {
        if (!t.defined() || !t.is_contiguous()) {
          return InvalidArgumentError("parameter-server client: tensors must be contiguous");
        }
      }
    }
    auto shard = std::make_unique<Shard>();
    shard->bytes = ps_wire::Bytes(s.parameters) + ps_wire::Bytes(s.buffers);
    shard->tensors = std::move(s);
    client->shards_.push_back(std::move(shard));
  }
  return client;
}

namespace {

// One call to shard `k`, asked again while the server is unreachable or busy (503).
Result<http::Response> CallShard(size_t k, std::optional<http::Client>& client,
                                 std::string& address, const PsAddressLookup& lookup,
                                 std::chrono::milliseconds timeout, int64_t* retries,
                                 std::string_view method, const std::string& target,
                                 std::string_view body) {
  const auto deadline = Clock::now() + timeout;
  auto backoff = std::chrono::milliseconds(20);
  Status last = Status::Ok();
  while (true) {
    if (!client) {
      Result<std::string> found = lookup(static_cast<int>(k));
      if (found.ok()) {
        address = *found;
        http::ClientOptions co;
        co.timeout = std::chrono::milliseconds(120'000);
        auto made = http::Client::Make("http://" + address, co);
        if (!made.ok()) return made.status();
        client.emplace(std::move(*made));
      } else {
        last = found.status();
      }
    }
    if (client) {
      Result<http::Response> answer =
          client->Send(method, target, body, body.empty() ? "" : "application/octet-stream");
      if (answer.ok() && answer->status != 503) return answer;
      if (!answer.ok() && !Transient(answer.status())) return answer.status();
      if (answer.ok()) {
        last = StatusFromResponse(*answer, "parameter server");
        backoff = std::chrono::milliseconds(0);  // the server waited before saying busy
      } else {
        last = answer.status();
        client.reset();  // look the address up again: a restarted server listens elsewhere
      }
    }
    if (Clock::now() > deadline) {
      return UnavailableError("parameter server shard " + std::to_string(k) + " (" + address +
                              ") gave no answer for " + std::to_string(timeout.count() / 1000) +
                              " s: " + last.message());
    }
    ++*retries;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(std::chrono::milliseconds(1000),
                       std::max(std::chrono::milliseconds(20), backoff * 2));
  }
}

std::string Query(const char* path, int worker, int64_t step) {
  std::string q = std::string(path) + "?worker=" + std::to_string(worker);
  if (step >= 0) q += "&step=" + std::to_string(step);
  return q;
}

}  // namespace

Result<http::Response> PsClient::Call(size_t k, std::string_view method, const std::string& target,
                                      std::string_view body) {
  Shard& s = *shards_[k];
  return CallShard(k, s.client, s.address, lookup_, options_.timeout, &stats_.retries, method,
                   target, body);
}

Result<int64_t> PsClient::ResumeStep() {
  int64_t step = -1;
  for (size_t k = 0; k < shards_.size(); ++k) {
    REEL_ASSIGN_OR_RETURN(http::Response r,
                          Call(k, "GET", Query("/ps/v1/state", options_.worker, -1), {}));
    if (r.status != 200) return StatusFromResponse(r, "parameter server state");
    try {
      const int64_t pushed = nlohmann::json::parse(r.body).at("pushed").get<int64_t>();
      step = step < 0 ? pushed : std::min(step, pushed);
    } catch (const std::exception& e) {
      return DataLossError("parameter server shard " + std::to_string(k) +
                           ": a state that is not JSON: " + e.what());
    }
  }
  return step;
}

Status PsClient::PushShard(size_t k, int64_t step, bool finite, const std::string& body) {
  const std::string target =
      Query("/ps/v1/push", options_.worker, step) + "&finite=" + (finite ? "1" : "0");
  REEL_ASSIGN_OR_RETURN(http::Response r, Call(k, "POST", target, body));
  if (r.status != 200) return StatusFromResponse(r, "parameter server push");
  stats_.bytes_sent += body.size();
  return Status::Ok();
}

Status PsClient::Pull(int64_t step) {
  const auto start = Clock::now();
  for (size_t k = 0; k < shards_.size(); ++k) {
    Shard& s = *shards_[k];
    while (true) {
      REEL_ASSIGN_OR_RETURN(http::Response r,
                            Call(k, "GET", Query("/ps/v1/pull", options_.worker, step), {}));
      const std::string resend = r.Header("X-Reel-Resend");
      if (r.status == 409 && !resend.empty()) {
        if (ParseInt64(resend) != s.kept_step) {
          return DataLossError("parameter server shard " + std::to_string(k) +
                               " lost this worker's gradient of step " + resend +
                               ", which the worker no longer holds");
        }
        REEL_RETURN_IF_ERROR(PushShard(k, s.kept_step, s.kept_finite, s.kept_body));
        ++stats_.resends;
        continue;
      }
      if (r.status != 200) return StatusFromResponse(r, "parameter server pull");
      if (r.body.size() != s.bytes) {
        return DataLossError("parameter server shard " + std::to_string(k) + " sent " +
                             std::to_string(r.body.size()) + " bytes, expected " +
                             std::to_string(s.bytes));
      }
      const char* in = r.body.data();
      for (auto& t : s.tensors.parameters) in = ps_wire::CopyInto(in, t);
      for (auto& t : s.tensors.buffers) in = ps_wire::CopyInto(in, t);
      stats_.bytes_received += r.body.size();
      if (auto slowest = ParseInt64(r.Header("X-Reel-Slowest")))
        stats_.max_staleness = std::max(stats_.max_staleness, step - *slowest);
      break;
    }
  }
  stats_.wait_s += std::chrono::duration<double>(Clock::now() - start).count();
  return Status::Ok();
}

Status PsClient::Push(int64_t step, bool finite) {
  for (size_t k = 0; k < shards_.size(); ++k) {
    Shard& s = *shards_[k];
    std::string body;
    body.reserve(s.bytes);
    for (const auto& p : s.tensors.parameters) {
      if (p.grad().defined()) {
        ps_wire::Append(&body, p.grad().contiguous());
      } else {
        ps_wire::AppendZeros(&body, p);
      }
    }
    for (const auto& b : s.tensors.buffers) ps_wire::Append(&body, b);
    REEL_RETURN_IF_ERROR(PushShard(k, step, finite, body));
    s.kept_step = step;
    s.kept_finite = finite;
    s.kept_body = std::move(body);
  }
  return Status::Ok();
}

Status PsClient::Done() {
  for (size_t k = 0; k < shards_.size(); ++k) {
    REEL_ASSIGN_OR_RETURN(http::Response r,
                          Call(k, "POST", Query("/ps/v1/done", options_.worker, -1), {}));
    if (r.status != 200) return StatusFromResponse(r, "parameter server done");
  }
  return Status::Ok();
}

Result<c10::intrusive_ptr<c10d::Store>> ConnectPsStore(const WorldInfo& world,
                                                       std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(world.master_port);
  o.isServer = !world.agent_store && world.rank == 0;
  o.waitWorkers = false;
  o.timeout = timeout;
  try {
    return c10::intrusive_ptr<c10d::Store>(
        c10::make_intrusive<c10d::TCPStore>(world.master_addr, o));
  } catch (const std::exception& e) {
    return UnavailableError("rank " + std::to_string(world.rank) + ": the rendezvous store at " +
                            world.master_addr + ":" + std::to_string(world.master_port) + ": " +
                            e.what());
  }
}

Status PublishPsAddress(c10d::Store& store, int shard, const std::string& address) {
  try {
    store.set("ps/" + std::to_string(shard), std::vector<uint8_t>(address.begin(), address.end()));
  } catch (const std::exception& e) {
    return UnavailableError("publishing parameter server " + std::to_string(shard) + ": " +
                            e.what());
  }
  return Status::Ok();
}

PsAddressLookup StoreLookup(const c10::intrusive_ptr<c10d::Store>& store) {
  return [store](int shard) -> Result<std::string> {
    try {
      std::vector<uint8_t> v = store->get("ps/" + std::to_string(shard));
      return std::string(v.begin(), v.end());
    } catch (const std::exception& e) {
      return UnavailableError("looking up parameter server " + std::to_string(shard) + ": " +
                              e.what());
    }
  };
}

}  // namespace reel::parallel
