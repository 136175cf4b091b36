// Model-parallel serving (serve/stages.h): the cut, the wire format, the front's model and the
// stage server. LibTorch's exceptions stop here or in Guarded.
#include "serve/stages.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "base/files.h"
#include "base/strings.h"
#include "base/subprocess.h"
#include "http/client.h"
#include "http/server.h"
#include "models/video_resnet.h"
#include "serve/model_torch_internal.h"

namespace reel::serve {
namespace internal {
namespace {

using Clock = std::chrono::steady_clock;

std::shared_ptr<models::VideoResNetImpl> UnitsOf(const torch::nn::AnyModule& module) {
  return std::dynamic_pointer_cast<models::VideoResNetImpl>(module.ptr());
}

Status NoUnits(const ModelInfo& info) {
  return InvalidArgumentError(info.source + " (" + info.architecture +
                              ") has no units to split between processes; model-parallel "
                              "serving splits Reel's video ResNets (r3d, mc3, r2plus1d)");
}

int64_t UnitBytes(const models::VideoResNetImpl& r, int begin, int end) {
  int64_t bytes = 0;
  for (int u = begin; u < end; ++u) {
    for (const auto& p : r.UnitParameters(u)) bytes += static_cast<int64_t>(p.nbytes());
  }
  return bytes;
}

// The cut whose larger side holds the fewest parameter bytes (each side at least one unit): the
// most even split of the weights, which is what must fit each worker.
int BalancedCut(const models::VideoResNetImpl& r) {
  const int units = r.unit_count();
  const int64_t total = UnitBytes(r, 0, units);
  int best = 1;
  int64_t best_larger = total;
  for (int cut = 1; cut < units; ++cut) {
    const int64_t before = UnitBytes(r, 0, cut);
    const int64_t larger = std::max(before, total - before);
    if (larger < best_larger) best = cut, best_larger = larger;
  }
  return best;
}

// Drops the weights of units [begin, end): this process never runs them.
void FreeUnits(models::VideoResNetImpl& r, int begin, int end) {
  torch::NoGradGuard no_grad;
  for (int u = begin; u < end; ++u) {
    for (auto& p : r.UnitParameters(u)) p.set_data(torch::empty({0}, p.options()));
  }
}

std::string EncodeTensor(const torch::Tensor& t) {
  const torch::Tensor f = t.to(torch::kFloat32).contiguous();
  std::string out;
  const int64_t rank = f.dim();
  out.append(reinterpret_cast<const char*>(&rank), sizeof(rank));
  for (int64_t d : f.sizes()) out.append(reinterpret_cast<const char*>(&d), sizeof(d));
  out.append(static_cast<const char*>(f.data_ptr()), f.nbytes());
  return out;
}

Result<torch::Tensor> DecodeTensor(const std::string& body, const std::string& what) {
  int64_t rank = 0;
  if (body.size() < sizeof(rank)) return InvalidArgumentError(what + ": no tensor header");
  std::memcpy(&rank, body.data(), sizeof(rank));
  if (rank < 1 || rank > 8) {
    return InvalidArgumentError(what + ": a tensor of rank " + std::to_string(rank) +
                                " (expected 1..8)");
  }
  const size_t header = sizeof(int64_t) * static_cast<size_t>(rank + 1);
  if (body.size() < header) return InvalidArgumentError(what + ": a cut-off tensor header");
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  std::memcpy(dims.data(), body.data() + sizeof(int64_t), dims.size() * sizeof(int64_t));
  uint64_t values = 1;
  for (int64_t d : dims) {
    if (d < 0 || d > (int64_t{1} << 31)) return InvalidArgumentError(what + ": a bad dimension");
    values *= static_cast<uint64_t>(d);
    if (values > body.size()) break;
  }
  if (body.size() - header != values * sizeof(float)) {
    return InvalidArgumentError(what + ": " + std::to_string(body.size() - header) +
                                " bytes of values, expected " +
                                std::to_string(values * sizeof(float)));
  }
  torch::Tensor t = torch::empty(dims, torch::kFloat32);
  std::memcpy(t.data_ptr(), body.data() + header, t.nbytes());
  return t;
}

// The front: units [0, cut) here, the rest behind `address`.
class StagedModel : public Model {
 public:
  StagedModel(ModelInfo info, torch::nn::AnyModule module, int cut, bool bf16, std::string address,
              pid_t stage_pid)
      : module_(std::move(module)),
        units_(UnitsOf(module_)),
        cut_(cut),
        bf16_(bf16),
        address_(std::move(address)),
        stage_pid_(stage_pid) {
    info_ = std::move(info);
  }
  ~StagedModel() override { StopStage(); }

  Result<std::vector<float>> Forward(const float* input, int64_t n) const override {
    std::string body;  // the first stage's output, for the second
    Result<std::vector<float>> first = Guarded(bf16_, [&] {
      torch::Tensor x = InputTensor(input, n, info_.sample_shape);
      body = EncodeTensor(units_->forward_units(x, 0, cut_));
      return Result<std::vector<float>>(std::vector<float>{});
    });
    REEL_RETURN_IF_ERROR(first.status());
    REEL_ASSIGN_OR_RETURN(http::Response answer, Send(body));
    if (answer.status != 200) return StatusFromResponse(answer, "the model's second stage");
    REEL_ASSIGN_OR_RETURN(torch::Tensor logits, DecodeTensor(answer.body, "the second stage"));
    return LogitsOf(logits, n);
  }

 private:
  Result<http::Response> Send(const std::string& body) const {
    std::optional<http::Client> client;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        client.emplace(std::move(idle_.back()));
        idle_.pop_back();
      }
    }
    if (!client) {
      REEL_ASSIGN_OR_RETURN(http::Client made, http::Client::Make("http://" + address_));
      client.emplace(std::move(made));
    }
    http::Headers headers;
    headers["X-Reel-From-Unit"] = std::to_string(cut_);
    Result<http::Response> answer =
        client->Send("POST", "/stage/v1/forward", body, "application/octet-stream", headers);
    if (answer.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      idle_.push_back(std::move(*client));
    }
    return answer;
  }

  void StopStage() {
    if (stage_pid_ <= 0) return;
    kill(stage_pid_, SIGTERM);
    for (int i = 0; i < 500; ++i) {
      if (waitpid(stage_pid_, nullptr, WNOHANG) == stage_pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(stage_pid_, SIGKILL);
    waitpid(stage_pid_, nullptr, 0);
  }

  torch::nn::AnyModule module_;
  std::shared_ptr<models::VideoResNetImpl> units_;
  int cut_;
  bool bf16_;
  std::string address_;
  pid_t stage_pid_;
  mutable std::mutex mu_;
  mutable std::vector<http::Client> idle_;  // connections to the stage, one per forward at once
};

struct StartedStage {
  std::string address;
  pid_t pid = -1;
};

// Starts the stage process for units [cut, ...) and waits for the address it writes.
Result<StartedStage> StartStageProcess(const std::string& source, const LoadOptions& options,
                                       int cut) {
  static std::atomic<int> counter{0};
  const std::string file =
      (std::filesystem::temp_directory_path() /
       ("reel-stage-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + ".address"))
          .string();
  std::vector<std::string> argv = options.stage_command;
  if (argv.empty()) {
    REEL_ASSIGN_OR_RETURN(std::string self, ThisProgram());
    argv = {self, "serve-stage"};
  }
  argv.insert(argv.end(), {source, "--from-unit", std::to_string(cut), "--address-file", file,
                           "--precision", PrecisionName(options.precision)});
  if (!options.registry.empty()) argv.insert(argv.end(), {"--registry", options.registry});
  if (!options.config.empty()) argv.insert(argv.end(), {"--config", options.config});
  REEL_ASSIGN_OR_RETURN(pid_t pid, SpawnProcess(argv, CurrentEnvironment({})));
  const auto deadline = Clock::now() + std::chrono::seconds(300);
  while (true) {
    if (Result<std::string> text = ReadFileToString(file, "stage address"); text.ok()) {
      std::filesystem::remove(file);
      return StartedStage{*text, pid};
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      const ProcessEnd end = DecodeWaitStatus(status);
      return UnavailableError("the stage process for " + source + " ended (" +
                              (end.signal ? "signal " + std::to_string(end.signal)
                                          : "exit " + std::to_string(end.exit_code)) +
                              ") before listening; its errors are above");
    }
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return UnavailableError("the stage process for " + source + " did not listen within 300 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string UnitRange(int begin, int end) {
  return end - begin == 1 ? "unit " + std::to_string(begin)
                          : "units " + std::to_string(begin) + "-" + std::to_string(end - 1);
}

std::string Megabytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f MB", static_cast<double>(bytes) / 1e6);
  return text;
}

}  // namespace

Result<std::unique_ptr<Model>> LoadStagedModel(const std::string& source,
                                               const LoadOptions& options) {
  if (options.stages != 2) {
    return InvalidArgumentError("model-parallel serving splits a model into 2 stages, not " +
                                std::to_string(options.stages));
  }
  if (IsTorchScriptPath(source)) {
    return InvalidArgumentError(source +
                                " is TorchScript, which cannot be split between "
                                "processes; serve it in one (stages 1)");
  }
  REEL_ASSIGN_OR_RETURN(Parts parts, ReadParts(source, options));
  REEL_ASSIGN_OR_RETURN(ReelModule built, BuildReelModule(parts));
  auto units = UnitsOf(built.module);
  if (!units) return NoUnits(built.info);
  const int cut = BalancedCut(*units);
  StartedStage stage{options.stage_address, -1};
  if (stage.address.empty()) {
    REEL_ASSIGN_OR_RETURN(stage, StartStageProcess(source, options, cut));
  }
  const int count = units->unit_count();
  built.info.placement = UnitRange(0, cut) + " here (" + Megabytes(UnitBytes(*units, 0, cut)) +
                         "), " + UnitRange(cut, count) + " at " + stage.address + " (" +
                         Megabytes(UnitBytes(*units, cut, count)) + ")";
  FreeUnits(*units, cut, count);
  auto model = std::make_unique<StagedModel>(std::move(built.info), std::move(built.module), cut,
                                             options.precision == Precision::kBf16, stage.address,
                                             stage.pid);
  REEL_RETURN_IF_ERROR(CheckClasses(*model));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace internal

struct StageServer::Impl {
  torch::nn::AnyModule module;
  std::shared_ptr<models::VideoResNetImpl> units;
  int from = 0;
  int64_t bytes = 0;
  bool bf16 = false;
  std::unique_ptr<http::Server> server;

  http::Response Forward(const http::Request& r) const {
    const std::string asked = r.Header("X-Reel-From-Unit");
    if (!asked.empty() && ParseInt64(asked) != from) {
      return http::Response::Error(InvalidArgumentError(
          "this stage runs from unit " + std::to_string(from) + ", the front cut at " + asked));
    }
    Result<torch::Tensor> input = internal::DecodeTensor(r.body, "the first stage's output");
    if (!input.ok()) return http::Response::Error(input.status());
    Result<std::vector<float>> logits = internal::Guarded(bf16, [&] {
      torch::Tensor out = units->forward_units(*input, from, units->unit_count());
      return Result<std::vector<float>>(internal::FloatsOf(out));
    });
    if (!logits.ok()) return http::Response::Error(logits.status());
    const int64_t n = input->size(0);
    const int64_t classes = n > 0 ? static_cast<int64_t>(logits->size()) / n : 0;
    torch::Tensor t = torch::from_blob(logits->data(), {n, classes}, torch::kFloat32);
    http::Response answer;
    answer.body = internal::EncodeTensor(t);
    answer.headers["Content-Type"] = "application/octet-stream";
    return answer;
  }
};

StageServer::StageServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StageServer::~StageServer() {
  if (impl_->server) impl_->server->Shutdown();
}

Result<std::unique_ptr<StageServer>> StageServer::Start(const StageServerOptions& options) {
  try {
    if (internal::IsTorchScriptPath(options.source)) {
      return InvalidArgumentError(options.source + " is TorchScript, which cannot be split");
    }
    REEL_ASSIGN_OR_RETURN(internal::Parts parts, internal::ReadParts(options.source, options.load));
    REEL_ASSIGN_OR_RETURN(internal::ReelModule built, internal::BuildReelModule(parts));
    auto impl = std::make_unique<Impl>();
    impl->units = internal::UnitsOf(built.module);
    if (!impl->units) return internal::NoUnits(built.info);
    const int count = impl->units->unit_count();
    impl->from = options.from_unit < 0 ? internal::BalancedCut(*impl->units) : options.from_unit;
    if (impl->from < 1 || impl->from >= count) {
      return InvalidArgumentError("a stage must start at a unit in 1.." +
                                  std::to_string(count - 1) + " of " + options.source + ", not " +
                                  std::to_string(impl->from));
    }
    impl->bytes = internal::UnitBytes(*impl->units, impl->from, count);
    internal::FreeUnits(*impl->units, 0, impl->from);
    impl->module = std::move(built.module);
    impl->bf16 = options.load.precision == Precision::kBf16;
    http::Router router;
    const Impl* self = impl.get();
    REEL_RETURN_IF_ERROR(router.Add("POST", "/stage/v1/forward",
                                    [self](const http::Request& r) { return self->Forward(r); }));
    http::ServerOptions so;
    so.host = options.host;
    so.port = options.port;
    so.handler_threads = 4;
    so.max_body_bytes = 1ull << 30;
    REEL_ASSIGN_OR_RETURN(impl->server, http::Server::Start(so, std::move(router)));
    return std::unique_ptr<StageServer>(new StageServer(std::move(impl)));
  } catch (const c10::Error& e) {
    return InternalError(options.source + ": LibTorch: " + e.what_without_backtrace());
  }
}

std::string StageServer::address() const { return impl_->server->address(); }
std::string StageServer::Describe() const {
  return internal::UnitRange(impl_->from, impl_->units->unit_count()) + " (" +
         internal::Megabytes(impl_->bytes) + ")";
}
int StageServer::from_unit() const { return impl_->from; }
int StageServer::unit_count() const { return impl_->units->unit_count(); }
int64_t StageServer::parameter_bytes() const { return impl_->bytes; }

}  // namespace reel::serve
