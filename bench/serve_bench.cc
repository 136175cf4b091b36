// serve_bench: `reel serve`'s service (the KServe v2 routes, the batcher, the HTTP layer) against
// the limit it serves, the same model's raw in-process forward pass.
//
// The model is the main job's R(2+1)D (configs/synthetic.yaml's model section, random weights
// saved as a .safetensors file and loaded through serve::LoadModel as `reel serve` loads it).
// Clients are threads in this process, each with its own keep-alive connection, sending
// [1, 3, 8, 112, 112] FP32 clips (a 1.9 MB JSON body, or 1.2 MB with the binary extension) in a
// closed loop. Printed: throughput, p50 and p99 per setting; the ratio to raw forward
// throughput at the same batch size; the request overhead (latency at concurrency 1 minus the
// forward pass); and what dynamic batching buys at concurrency 16.
//
//   serve_bench [--seconds S] [--threads N]
//
// OpenMP: run it with OMP_WAIT_POLICY=PASSIVE (bench/run_serve_bench.sh does), as reel serve
// runs; the setting and the thread counts are printed.
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "base/random.h"
#include "http/client.h"
#include "http/server.h"
#include "models/model_spec.h"
#include "models/model_zoo.h"
#include "models/safetensors.h"
#include "models/state_dict.h"
#include "serve/kserve.h"
#include "serve/model.h"
#include "serve/service.h"

namespace {

using namespace reel;  // NOLINT(google-build-using-namespace): a benchmark's main file
using Clock = std::chrono::steady_clock;

constexpr int64_t kFrames = 8, kSize = 112;

[[noreturn]] void Die(const std::string& what, const Status& status) {
  std::fprintf(stderr, "serve_bench: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::exit(1);
}

// The main job's model with random weights, as a safetensors file and config `reel serve` reads.
std::string WriteModel(const std::string& dir) {
  models::ModelSpec spec;
  spec.name = "r2plus1d";
  spec.num_classes = 8;
  spec.width = 16;
  spec.layers = {1, 1, 1, 1};
  torch::manual_seed(1);
  auto model = models::BuildModel(spec);
  if (!model.ok()) Die("build", model.status());
  auto bytes = models::WriteSafetensors(models::SaveStateDict(*model->ptr()));
  if (!bytes.ok()) Die("save", bytes.status());
  std::ofstream(dir + "/bench.safetensors", std::ios::binary) << *bytes;
  std::ofstream(dir + "/bench.yaml")
      << "model: {name: r2plus1d, num_classes: 8, width: 16, layers: [1, 1, 1, 1]}\n"
      << "data: {dataset: /nonexistent, clip_frames: 8, size: 112}\n";
  return dir + "/bench.safetensors";
}

struct Figures {
  double per_second = 0;  // samples
  double p50_ms = 0, p99_ms = 0;
};

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(q * values.size()))];
}

// Raw in-process forward passes of `batch` samples for `seconds`.
Figures RawForward(const serve::Model& model, int64_t batch, double seconds) {
  std::vector<float> input(static_cast<size_t>(batch * model.info().sample_size()), 0.1f);
  (void)model.Forward(input.data(), batch);  // warm-up
  std::vector<double> ms;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end || ms.size() < 3) {
    const auto t0 = Clock::now();
    auto out = model.Forward(input.data(), batch);
    if (!out.ok()) Die("forward", out.status());
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  double total = 0;
  for (double m : ms) total += m;
  return {1000.0 * batch * ms.size() / total, Percentile(ms, 0.5), Percentile(ms, 0.99)};
}

serve::Body ClipBody(bool binary) {
  std::vector<float> clip(static_cast<size_t>(3 * kFrames * kSize * kSize));
  Rng rng(7);
  // Two decimals, as a client rounding normalised pixels would send: a 1.9 MB JSON body.
  for (float& v : clip) v = static_cast<float>(std::round(rng.Uniform(-2, 2) * 100) / 100);
  serve::InferRequest request;
  request.inputs.push_back(
      serve::MakeTensor("input", serve::DataType::kFp32, {1, 3, kFrames, kSize, kSize}, clip));
  request.outputs.push_back({"probabilities", false, std::nullopt});
  return serve::EncodeInferRequest(request, binary);
}

// `concurrency` clients in a closed loop for `seconds`.
Figures Load(const std::string& url, const serve::Body& body, int concurrency, double seconds) {
  std::vector<std::vector<double>> latencies(static_cast<size_t>(concurrency));
  std::atomic<int> failures{0};
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> clients;
  for (int c = 0; c < concurrency; ++c) {
    clients.emplace_back([&, c] {
      http::ClientOptions options;
      if (body.json_length) {
        options.headers["Inference-Header-Content-Length"] = std::to_string(*body.json_length);
      }
      auto client = http::Client::Make(url, options);
      if (!client.ok()) Die("client", client.status());
      while (Clock::now() < end) {
        const auto t0 = Clock::now();
        auto answer = client->Post("/v2/models/bench/infer", body.bytes);
        if (!answer.ok() || answer->status != 200) {
          ++failures;
          continue;
        }
        latencies[c].push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
    });
  }
  for (auto& t : clients) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  if (failures > 0) std::fprintf(stderr, "serve_bench: %d failed requests\n", failures.load());
  return {all.size() / elapsed, Percentile(all, 0.5), Percentile(all, 0.99)};
}

struct Server {
  std::unique_ptr<serve::Service> service;
  std::unique_ptr<http::Server> http;
};

Server StartServer(std::shared_ptr<serve::Model> model, int max_batch, int delay_us) {
  Server s;
  s.service = std::make_unique<serve::Service>();
  serve::BatcherOptions batching;
  batching.max_batch = max_batch;
  batching.max_delay = std::chrono::microseconds(delay_us);
  if (Status st = s.service->AddModel("bench", std::move(model), batching); !st.ok())
    Die("add", st);
  http::Router router;
  if (Status st = s.service->AddRoutes(&router); !st.ok()) Die("routes", st);
  http::ServerOptions options;
  options.threads = 72;
  auto http = http::Server::Start(options, std::move(router));
  if (!http.ok()) Die("server", http.status());
  s.http = std::move(*http);
  return s;
}

void PrintRow(const char* what, const Figures& f, double limit) {
  std::printf("%-44s %8.2f clips/s  p50 %8.1f ms  p99 %8.1f ms  %5.3fx raw\n", what, f.per_second,
              f.p50_ms, f.p99_ms, limit > 0 ? f.per_second / limit : 0.0);
}

// Server-side parse cost of one request body, without the network: the mean of `n` parses.
double ParseMs(const serve::Body& body, int n) {
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    auto parsed = serve::ParseInferRequest(body.bytes, body.json_length);
    if (!parsed.ok()) Die("parse", parsed.status());
  }
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / n;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 10;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--seconds") seconds = std::atof(argv[i + 1]);
    if (flag == "--threads") threads = std::atoi(argv[i + 1]);
  }
  serve::SetComputeThreads(threads);
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  std::printf("serve_bench: LibTorch threads %d, cores %u, OMP_WAIT_POLICY=%s, %g s per row\n",
              threads, std::thread::hardware_concurrency(), policy ? policy : "(unset)", seconds);
  const std::string dir = std::filesystem::temp_directory_path() / "reel_serve_bench";
  std::filesystem::create_directories(dir);
  serve::LoadOptions load;
  load.config = dir + "/bench.yaml";
  auto loaded = serve::LoadModel(WriteModel(dir), load);
  if (!loaded.ok()) Die("load", loaded.status());
  std::shared_ptr<serve::Model> model = std::move(*loaded);

  const Figures raw1 = RawForward(*model, 1, seconds);
  const Figures raw8 = RawForward(*model, 8, seconds);
  PrintRow("raw forward, batch 1 (the limit)", raw1, raw1.per_second);
  PrintRow("raw forward, batch 8", raw8, raw1.per_second);

  const serve::Body json = ClipBody(false), binary = ClipBody(true);
  std::printf(
      "request bodies: JSON %.2f MB, binary %.2f MB; parse %.2f ms (JSON), %.2f ms (binary)\n",
      json.bytes.size() / 1e6, binary.bytes.size() / 1e6, ParseMs(json, 20), ParseMs(binary, 20));
  {
    Server s = StartServer(model, 1, 0);
    for (int c : {1, 4, 16}) {
      const Figures fj = Load(s.http->url(), json, c, seconds);
      const Figures fb = Load(s.http->url(), binary, c, seconds);
      const std::string j = "server, JSON, batch 1, concurrency " + std::to_string(c);
      const std::string b = "server, binary, batch 1, concurrency " + std::to_string(c);
      PrintRow(j.c_str(), fj, raw1.per_second);
      PrintRow(b.c_str(), fb, raw1.per_second);
      if (c == 1) {
        std::printf(
            "request overhead at concurrency 1 (p50 - raw p50): JSON %.2f ms, binary %.2f ms\n",
            fj.p50_ms - raw1.p50_ms, fb.p50_ms - raw1.p50_ms);
      }
    }
  }
  {
    Server s = StartServer(model, 8, 20'000);
    const Figures dyn = Load(s.http->url(), binary, 16, seconds);
    PrintRow("server, binary, dynamic batch <=8, conc. 16", dyn, raw1.per_second);
    std::printf("dynamic batching: %.3fx raw batch-8 forward throughput\n",
                dyn.per_second / raw8.per_second);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
