// serve_bench: `reel serve`'s service (the KServe v2 routes, the batcher, the HTTP layer) against
// the limit it serves, the same model's raw in-process forward pass, and against a peer server
// (bench/fastapi_serve_peer.py: FastAPI + uvicorn + PyTorch) on the same model and requests.
//
// The model is the main job's R(2+1)D (configs/synthetic.yaml's model section, random weights
// saved as a .safetensors file and loaded through serve::LoadModel as `reel serve` loads it), or
// with --model the TorchScript export of that very model (bench/run_serve_bench.sh makes it from
// the weights --write-model writes), which is what the peer serves.
//
// The load generator (bench/serve_load.h) is one thread of this process: an epoll loop over
// keep-alive connections sending [1, 3, 8, 112, 112] FP32 clips (JSON or the binary extension)
// or an encoded video, in a closed loop (`concurrency` connections) or an open loop (Poisson
// arrivals, latency from the scheduled arrival: no coordinated omission).
// Printed: throughput, p50 and p99 per setting; the ratio to raw forward throughput at the same
// batch size, measured just before and after each row (this VM's speed drifts); the CPU a request
// costs beyond the forward, and the load generator's; the request overhead (latency at
// concurrency 1 minus the forward pass); what
// dynamic batching buys at concurrency 16; then Reel (`reel serve`'s default batching) and the
// peer side by side at concurrency 1…64, with encoded video, and under open-loop arrivals.
//
//   serve_bench [--seconds S] [--threads N] [--model FILE.pt] [--peer-url URL] [--peer-model M]
//               [--video FILE] [--concurrency 1,4,16,64] [--video-concurrency 1,4]
//               [--rate R,...] [--requests N] [--seed S] [--precision fp32|bf16|auto]
//               [--rounds N]
//   serve_bench --write-model DIR   writes DIR/bench.safetensors and DIR/bench.yaml, and exits
//   serve_bench --parse-only N      times N parses of the JSON and binary bodies, back to back
//                                   and each after 20 ms asleep, and exits
//   serve_bench --decode-only N --video FILE [--model FILE.pt]
//                                   times N cuts of the video into the model's clips (decode,
//                                   resize, normalise: a BYTES request's work before the
//                                   forward) on one decoder thread and as the server decodes
//                                   a lone request (all cores), and exits
//
// --rate: open-loop arrival rates (requests/s); default half and 0.9× the raw batch-1 forward
// throughput. --requests: per rate; default rate × seconds (at least 20). --rounds: each
// closed-loop row against the peer is N turns of S / N seconds each side, taken alternately
// (default 4): the peer's rate moves with the machine as much as Reel's does.
//
// OpenMP: run it with OMP_WAIT_POLICY=PASSIVE (bench/run_serve_bench.sh does), as reel serve
// runs; the setting and the thread counts are printed (the peer's as its /v2 reports them).
#include <sys/resource.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/allocator.h"
#include "base/files.h"
#include "bench/report.h"
#include "bench/serve_load.h"
#include "console/serving.h"
#include "http/client.h"
#include "http/server.h"
#include "models/cpu_allocator.h"
#include "models/model_spec.h"
#include "models/model_zoo.h"
#include "models/safetensors.h"
#include "models/state_dict.h"
#include "serve/kserve.h"
#include "serve/model.h"
#include "serve/service.h"
#include "serve/video.h"

namespace {

using namespace reel;         // NOLINT(google-build-using-namespace): a benchmark's main file
using namespace reel::bench;  // NOLINT(google-build-using-namespace)
using Clock = std::chrono::steady_clock;

constexpr int kServerThreads = 72;  // the server's handler threads: concurrency 64 + spare

// ---- flags -----------------------------------------------------------------------------------

// "1,4,16" as numbers, each read by `parse` (std::atoi, std::atof).
template <class T, class Parse>
std::vector<T> List(const std::string& text, Parse parse) {
  std::vector<T> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(parse(item.c_str()));
  return out;
}

struct Flags {
  double seconds = 10;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string write_model, model, peer_url, peer_model = "bench", video, precision = "fp32";
  std::vector<int> concurrency = {1, 4, 16, 64}, video_concurrency = {1, 4};
  std::vector<double> rates;
  size_t requests = 0;
  uint64_t seed = 1;
  int parse_only = 0;
  int decode_only = 0;
  int rounds = 4;  // turns Reel and its peer take in each closed-loop comparison row
};

// Sets `flag` to `value`; false for an unknown flag.
bool SetFlag(Flags* f, const std::string& flag, const std::string& value) {
  if (flag == "--seconds") {
    f->seconds = std::atof(value.c_str());
  } else if (flag == "--threads") {
    f->threads = std::atoi(value.c_str());
  } else if (flag == "--write-model") {
    f->write_model = value;
  } else if (flag == "--model") {
    f->model = value;
  } else if (flag == "--peer-url") {
    f->peer_url = value;
  } else if (flag == "--peer-model") {
    f->peer_model = value;
  } else if (flag == "--video") {
    f->video = value;
  } else if (flag == "--concurrency") {
    f->concurrency = List<int>(value, std::atoi);
  } else if (flag == "--video-concurrency") {
    f->video_concurrency = List<int>(value, std::atoi);
  } else if (flag == "--rate") {
    f->rates = List<double>(value, std::atof);
  } else if (flag == "--requests") {
    f->requests = static_cast<size_t>(std::atoll(value.c_str()));
  } else if (flag == "--precision") {
    f->precision = value;
  } else if (flag == "--parse-only") {
    f->parse_only = std::atoi(value.c_str());
  } else if (flag == "--decode-only") {
    f->decode_only = std::atoi(value.c_str());
  } else if (flag == "--rounds") {
    f->rounds = std::atoi(value.c_str());
  } else if (flag == "--seed") {
    f->seed = static_cast<uint64_t>(std::atoll(value.c_str()));
  } else {
    return false;
  }
  return true;
}

void CheckFlags(const Flags& f) {
  if (f.seconds <= 0 || f.threads < 1) Die("--seconds and --threads must be positive");
  if (f.parse_only < 0) Die("--parse-only: a count of parses");
  if (f.decode_only < 0) Die("--decode-only: a count of decodes");
  if (f.rounds < 1) Die("--rounds: a positive count of turns");
  if (f.decode_only > 0 && f.video.empty()) Die("--decode-only needs --video FILE");
  for (int c : f.concurrency)
    if (c < 1) Die("--concurrency: positive counts");
  for (int c : f.video_concurrency)
    if (c < 1) Die("--video-concurrency: positive counts");
  for (double r : f.rates)
    if (!(r > 0)) Die("--rate: positive rates");
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Die(flag + " needs a value");
    if (!SetFlag(&f, flag, argv[i + 1])) {
      Die("unknown flag " + flag + " (see the top of bench/serve_bench.cc)");
    }
  }
  CheckFlags(f);
  return f;
}

// ---- the bench model and the rows against its raw forward pass -------------------------------

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

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(double{a[i]} - b[i]));
  return d;
}

double MaxAbs(const std::vector<float>& a) {
  double m = 0;
  for (float v : a) m = std::max(m, std::abs(double{v}));
  return m;
}

// The TorchScript export of the bench model: what the peer serves. Its logits must be the
// native model's (it was exported from the weights WriteModel writes).
std::shared_ptr<serve::Model> LoadExport(const std::string& path, const serve::LoadOptions& load,
                                         const serve::Model& native) {
  auto script = serve::LoadModel(path, load);
  if (!script.ok()) Die("load " + path, script.status());
  const std::vector<float> clip = Clip();
  auto a = native.Forward(clip.data(), 1);
  auto b = (*script)->Forward(clip.data(), 1);
  if (!a.ok() || !b.ok()) Die("forward", a.ok() ? b.status() : a.status());
  std::printf("model: %s (%s); max |logit diff| to the native model with the same weights %.2g\n",
              path.c_str(), (*script)->info().platform.c_str(), MaxAbsDiff(*a, *b));
  return std::move(*script);
}

// The bench model written to `dir` and loaded as `reel serve` loads it, or its export (--model).
std::shared_ptr<serve::Model> LoadBenchModel(const Flags& f, const std::string& dir) {
  serve::LoadOptions load;
  load.config = dir + "/bench.yaml";
  Result<serve::Precision> precision = serve::ParsePrecision(f.precision);
  if (!precision.ok()) Die("--precision", precision.status());
  load.precision = *precision;
  auto loaded = serve::LoadModel(WriteModel(dir), load);
  if (!loaded.ok()) Die("load", loaded.status());
  std::shared_ptr<serve::Model> model = std::move(*loaded);
  if (!f.model.empty()) return LoadExport(f.model, load, *model);
  std::printf("model: %s (%s)\n", model->info().source.c_str(), model->info().platform.c_str());
  return model;
}

// CPU time (ms) of the whole process and of the calling thread, which runs the load generator.
struct CpuClock {
  static double Ms(clockid_t id) {
    timespec t{};
    clock_gettime(id, &t);
    return 1e3 * static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_nsec);
  }
  static double MinorFaults() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_minflt);
  }
  double process = Ms(CLOCK_PROCESS_CPUTIME_ID), thread = Ms(CLOCK_THREAD_CPUTIME_ID);
  double faults = MinorFaults();
};

// CPU per request while a row ran: all of it, and the load generator's share.
struct CpuPer {
  double all_ms = 0, load_ms = 0, faults = 0;
};
CpuPer CpuSince(const CpuClock& start, size_t requests) {
  const CpuClock now;
  const double n = static_cast<double>(std::max<size_t>(1, requests));
  return {(now.process - start.process) / n, (now.thread - start.thread) / n,
          (now.faults - start.faults) / n};
}

// Raw in-process forward passes of `batch` samples for `seconds`.
Figures RawForward(const serve::Model& model, int64_t batch, double seconds,
                   CpuPer* cpu = nullptr) {
  std::vector<float> input(static_cast<size_t>(batch * model.info().sample_size()), 0.1f);
  (void)model.Forward(input.data(), batch);  // warm-up
  const CpuClock start;
  std::vector<double> ms;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end || ms.size() < 3) {
    const auto t0 = Clock::now();
    auto out = model.Forward(input.data(), batch);
    if (!out.ok()) Die("forward", out.status());
    ms.push_back(Ms(Clock::now() - t0));
  }
  if (cpu != nullptr) *cpu = CpuSince(start, ms.size() * batch);
  double total = 0;
  for (double m : ms) total += m;
  Figures figures;
  figures.per_second = 1000.0 * batch * ms.size() / total;
  figures.p50_ms = Percentile(ms, 0.5);
  figures.p99_ms = Percentile(ms, 0.99);
  figures.requests = ms.size();
  figures.seconds = total / 1000;
  figures.latencies_ms = std::move(ms);
  return figures;
}

// `reel serve`'s service and HTTP layer in this process, serving the model as "bench".
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
  http::ServerOptions options = serve::ServingHttpOptions(kServerThreads);
  auto http = http::Server::Start(options, std::move(router));
  if (!http.ok()) Die("server", http.status());
  s.http = std::move(*http);
  return s;
}

// The run's closing table (bench/report.h): every row printed below also lands there.
bench::Report* the_report = nullptr;

void PrintRow(const char* what, const Figures& f, double limit, int limit_batch = 1) {
  std::printf("%-44s %8.2f clips/s  p50 %8.1f ms  p99 %8.1f ms  %5.3fx raw batch %d\n", what,
              f.per_second, f.p50_ms, f.p99_ms, limit > 0 ? f.per_second / limit : 0.0,
              limit_batch);
  the_report->Add(
      {what,
       f.per_second,
       "clips/s",
       bench::Reference{limit, "raw forward, batch " + std::to_string(limit_batch) + ", no server"},
       {}});
}

// Server-side parse cost of one request body, without the network: the mean of `n` parses, of
// a body with the room past its end that the HTTP server gives one. With `idle_ms`, each parse
// comes after that long asleep, as a request at concurrency 1 finds the machine: on this VM a
// vCPU that idled (or ran the forward pass) has lost what its caches held, and the parse runs
// up to twice as long as back to back.
double ParseMs(const serve::Body& body, int n, int idle_ms = 0) {
  std::string bytes;
  bytes.reserve(body.bytes.size() + http::kBodyReadAhead);
  bytes = body.bytes;
  double total = 0;
  for (int i = 0; i < n; ++i) {
    if (idle_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(idle_ms));
    const auto t0 = Clock::now();
    auto parsed = serve::ParseInferRequest(bytes, body.json_length, {}, bytes.capacity());
    total += Ms(Clock::now() - t0);
    if (!parsed.ok()) Die("parse", parsed.status());
  }
  return total / n;
}

// A BYTES request's work before the forward: the mean of `n` cuts of the video into the
// model's clips on `threads` decoder threads.
double DecodeMs(const serve::Model& model, const std::string& path, const std::string& bytes, int n,
                int threads) {
  serve::VideoSettings settings = model.info().video;
  settings.decode_threads = threads;
  double total = 0;
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    auto samples = serve::VideoToSamples(bytes, path, settings);
    total += Ms(Clock::now() - t0);
    if (!samples.ok()) Die("decode", samples.status());
  }
  return total / n;
}

// The limit beside a row: the raw forward measured just before it and just after it, averaged.
// This VM's speed drifts by up to 2x within minutes, so one raw figure at the start is no limit
// for a row measured a minute later.
Figures Bracket(const Figures& before, const Figures& after) {
  Figures mean;
  mean.per_second = 0.5 * (before.per_second + after.per_second);
  mean.p50_ms = 0.5 * (before.p50_ms + after.p50_ms);
  mean.p99_ms = 0.5 * (before.p99_ms + after.p99_ms);
  mean.requests = before.requests + after.requests;
  return mean;
}

// Where a request's CPU goes on this machine, whose cores the load generator shares: the raw
// forward's CPU per clip, the server's own beyond it (receive, parse, queue, respond, and OpenMP
// threads waiting on one another longer), and the load generator's.
void PrintCpu(const CpuPer& json, const CpuPer& binary, const CpuPer& raw) {
  auto server = [&](const CpuPer& c) { return c.all_ms - c.load_ms - raw.all_ms; };
  std::printf(
      "  CPU ms a request: raw forward %.2f; server beyond it JSON %.2f, binary %.2f; load "
      "generator JSON %.2f, binary %.2f; page faults a request: raw %.0f, JSON %.0f, binary "
      "%.0f\n",
      raw.all_ms, server(json), server(binary), json.load_ms, binary.load_ms, raw.faults,
      json.faults, binary.faults);
}

// The served model's cumulative figures from `reel serve`'s /metrics (Triton's names).
struct ServerMetrics {
  double success = 0, request_us = 0, queue_us = 0, compute_us = 0;
};

ServerMetrics Scrape(const std::string& url) {
  auto client = http::Client::Make(url);
  if (!client.ok()) Die("metrics client", client.status());
  auto answer = client->Get("/metrics");
  if (!answer.ok()) Die("metrics", answer.status());
  auto samples = console::ParsePrometheusText(answer->body);
  if (!samples.ok()) Die("metrics", samples.status());
  ServerMetrics m;
  const std::map<std::string, double*> wanted = {
      {"nv_inference_request_success", &m.success},
      {"nv_inference_request_duration_us", &m.request_us},
      {"nv_inference_queue_duration_us", &m.queue_us},
      {"nv_inference_compute_infer_duration_us", &m.compute_us}};
  for (const console::MetricSample& sample : *samples) {
    const auto it = wanted.find(sample.name);
    if (it != wanted.end()) *it->second += sample.value;
  }
  return m;
}

// The mean forward pass a request between two scrapes, in ms.
double ComputeMs(const ServerMetrics& a, const ServerMetrics& b) {
  return (b.compute_us - a.compute_us) / std::max(1.0, b.success - a.success) / 1e3;
}

// The server's own time a request between two scrapes, in ms: from the handler's start (the
// body already read) to its answer encoded, less the forward pass; and the queue's share of it.
std::pair<double, double> HandlingMs(const ServerMetrics& a, const ServerMetrics& b) {
  const double n = std::max(1.0, b.success - a.success);
  return {((b.request_us - a.request_us) - (b.compute_us - a.compute_us)) / n / 1e3,
          (b.queue_us - a.queue_us) / n / 1e3};
}

// The server at batch 1, JSON and binary bodies at concurrency 1, 4 and 16, each pair between
// two raw batch-1 forwards, and the request overhead at concurrency 1.
void BatchOneRows(const std::shared_ptr<serve::Model>& model, const serve::Body& json,
                  const serve::Body& binary, const Figures& raw1, double seconds) {
  Server s = StartServer(model, 1, 0);
  Figures before = raw1;
  for (int c : {1, 4, 16}) {
    const ServerMetrics m0 = Scrape(s.http->url());
    const CpuClock json_start;
    const Figures fj = Load(s.http->url(), json, c, seconds);
    const CpuPer json_cpu = CpuSince(json_start, fj.requests);
    const ServerMetrics m1 = Scrape(s.http->url());
    const CpuClock binary_start;
    const Figures fb = Load(s.http->url(), binary, c, seconds);
    const CpuPer binary_cpu = CpuSince(binary_start, fb.requests);
    const ServerMetrics m2 = Scrape(s.http->url());
    CpuPer raw_cpu;
    const Figures after = RawForward(*model, 1, seconds, &raw_cpu);
    const Figures limit = Bracket(before, after);
    before = after;
    std::printf("raw forward beside the next two rows: %.2f, %.2f clips/s\n", limit.per_second,
                after.per_second);
    const std::string j = "server, JSON, batch 1, concurrency " + std::to_string(c);
    const std::string b = "server, binary, batch 1, concurrency " + std::to_string(c);
    PrintRow(j.c_str(), fj, limit.per_second);
    PrintRow(b.c_str(), fb, limit.per_second);
    if (c == 1) {
      std::printf(
          "request overhead at concurrency 1 (p50 - raw p50): JSON %.2f ms, binary %.2f ms\n",
          fj.p50_ms - limit.p50_ms, fb.p50_ms - limit.p50_ms);
      const auto [json_ms, json_queue] = HandlingMs(m0, m1);
      const auto [binary_ms, binary_queue] = HandlingMs(m1, m2);
      std::printf(
          "  of it the handler's, from /metrics (request - compute duration; body already read): "
          "JSON %.2f ms (queue %.2f), binary %.2f ms (queue %.2f)\n",
          json_ms, json_queue, binary_ms, binary_queue);
      std::printf(
          "  the forward itself, mean: in the server JSON %.2f ms, binary %.2f ms; raw %.2f ms\n",
          ComputeMs(m0, m1), ComputeMs(m1, m2), 1e3 / limit.per_second);
    }
    PrintCpu(json_cpu, binary_cpu, raw_cpu);
  }
}

// The server with dynamic batching (<= 8, 20 ms) at concurrency 16 against raw batch 8, measured
// just before and after it.
void DynamicBatchRow(const std::shared_ptr<serve::Model>& model, const serve::Body& binary,
                     double seconds) {
  Server s = StartServer(model, 8, 20'000);
  const Figures raw8_before = RawForward(*model, 8, seconds);
  const CpuClock start;
  const Figures dyn = Load(s.http->url(), binary, 16, seconds);
  const CpuPer dyn_cpu = CpuSince(start, dyn.requests);
  CpuPer raw8_cpu;
  const Figures raw8 = Bracket(raw8_before, RawForward(*model, 8, seconds, &raw8_cpu));
  PrintRow("server, binary, dynamic batch <=8, conc. 16", dyn, raw8.per_second, 8);
  std::printf("dynamic batching: %.3fx raw batch-8 forward throughput (%.2f clips/s beside it)\n",
              dyn.per_second / raw8.per_second, raw8.per_second);
  std::printf(
      "  CPU ms a clip: raw batch-8 forward %.2f; server beyond it %.2f; load generator %.2f; "
      "page faults a clip: raw %.0f, server %.0f\n",
      raw8_cpu.all_ms, dyn_cpu.all_ms - dyn_cpu.load_ms - raw8_cpu.all_ms, dyn_cpu.load_ms,
      raw8_cpu.faults, dyn_cpu.faults);
}

// ---- Reel against the peer -------------------------------------------------------------------

// A server under test: its name in the tables and where it is.
struct Target {
  std::string label;
  Endpoint endpoint;
};

// "max |diff| D (of max |logit| M)" for one request sent to both servers.
std::string Agreement(const Target& a, const Target& b, const serve::Body& body) {
  const std::vector<float> la = Logits(a.endpoint, body), lb = Logits(b.endpoint, body);
  char text[96];
  std::snprintf(text, sizeof(text), "max |diff| %.2g (of max |logit| %.2g)", MaxAbsDiff(la, lb),
                MaxAbs(la));
  return text;
}

struct Pair {
  Figures reel, peer;
  bool has_peer = false;
};

void PrintPairHeader(const char* first, const char* unit, bool has_peer) {
  std::printf("  %-12s  %-38s", first, "Reel (reel serve batching)");
  if (has_peer) std::printf("  %-38s  %s", "FastAPI + uvicorn + PyTorch", "Reel/FastAPI");
  std::printf("\n  %-12s  %9s %9s %9s %8s", "", unit, "p50 ms", "p99 ms", "answers");
  if (has_peer) {
    std::printf("  %9s %9s %9s %8s  %6s %6s", unit, "p50 ms", "p99 ms", "answers", "thr", "p99");
  }
  std::printf("\n");
}

void PrintPair(const std::string& table, const std::string& first, const Pair& p) {
  std::optional<bench::Reference> peer;
  if (p.has_peer) peer = bench::Reference{p.peer.per_second, "FastAPI + uvicorn + PyTorch"};
  the_report->Add({table + " " + first + ": throughput", p.reel.per_second, "/s", {}, peer});
  if (p.has_peer) peer = bench::Reference{p.peer.p99_ms, "FastAPI + uvicorn + PyTorch"};
  the_report->Add({table + " " + first + ": p99", p.reel.p99_ms, "ms", {}, peer});
  std::printf("  %-12s  %9.2f %9.1f %9.1f %8zu", first.c_str(), p.reel.per_second, p.reel.p50_ms,
              p.reel.p99_ms, p.reel.requests);
  if (p.has_peer) {
    std::printf("  %9.2f %9.1f %9.1f %8zu  %5.2fx %5.2fx", p.peer.per_second, p.peer.p50_ms,
                p.peer.p99_ms, p.peer.requests,
                p.peer.per_second > 0 ? p.reel.per_second / p.peer.per_second : 0,
                p.peer.p99_ms > 0 ? p.reel.p99_ms / p.peer.p99_ms : 0);
  }
  if (p.reel.failures || p.peer.failures) {
    std::printf("  (failed: Reel %d, peer %d)", p.reel.failures, p.peer.failures);
  }
  std::printf("\n");
}

// The peer's /v2 metadata (its thread settings), for the record.
std::string PeerMetadata(const std::string& url) {
  auto client = http::Client::Make(url);
  if (!client.ok()) Die("client", client.status());
  auto answer = client->Get("/v2");
  if (!answer.ok()) Die("peer " + url, answer.status());
  return answer->body;
}

constexpr int kCompareMaxBatch = 8, kCompareMaxDelayUs = 0;  // reel serve's defaults

// The servers the comparison drives: Reel (`reel`) first, then the peer when there is one.
std::vector<Target> Targets(const Flags& f, const Server& reel) {
  std::vector<Target> targets = {{"Reel", MakeEndpoint(reel.http->url(), "bench")}};
  if (!f.peer_url.empty()) targets.push_back({"FastAPI", MakeEndpoint(f.peer_url, f.peer_model)});
  return targets;
}

void PrintCompareSetup(const Flags& f, bool has_peer) {
  std::printf(
      "\nReel vs peer. Reel: this process, max batch %d, max delay %d us, 1 instance, %d HTTP io "
      "threads and %d handler threads (reel serve's defaults), LibTorch threads %d.\n",
      kCompareMaxBatch, kCompareMaxDelayUs, serve::ServingHttpOptions(kServerThreads).threads,
      kServerThreads, at::get_num_threads());
  if (has_peer) std::printf("peer %s: %s\n", f.peer_url.c_str(), PeerMetadata(f.peer_url).c_str());
  std::printf("load generator: 1 thread (epoll), keep-alive connections; %g s per row\n",
              f.seconds);
}

// Both answer the same request alike? (The same TorchScript: equal up to float noise; video:
// each decodes and cuts on its own.)
void PrintAgreement(const Flags& f, const std::vector<Target>& targets) {
  std::printf("same request, both servers' logits: JSON clip %s",
              Agreement(targets[0], targets[1], ClipBody(false, "logits")).c_str());
  if (!f.video.empty()) {
    std::printf("; video %s",
                Agreement(targets[0], targets[1], VideoBody(f.video, "logits")).c_str());
  }
  std::printf("\n");
}

// The HTTP message of an inference request with `body` to each target.
std::vector<std::string> Requests(const std::vector<Target>& targets, const serve::Body& body) {
  std::vector<std::string> requests;
  requests.reserve(targets.size());
  for (const Target& t : targets) requests.push_back(HttpRequest(t.endpoint, body));
  return requests;
}

// Closed loop at each of `levels` (concurrency): one driver per server, warmed up first.
// Each level's row: with a peer, Reel and the peer take turns in `rounds` runs of seconds / rounds
// each (who goes first alternating), so that both see the same minutes of a machine whose speed
// drifts; each side's runs are then combined.
std::vector<Pair> Sweep(const std::vector<Target>& targets, const serve::Body& body,
                        const std::vector<int>& levels, double seconds, int rounds) {
  const std::vector<std::string> requests = Requests(targets, body);
  std::vector<std::unique_ptr<Driver>> drivers;
  for (size_t t = 0; t < targets.size(); ++t) {
    drivers.push_back(std::make_unique<Driver>(targets[t].endpoint, requests[t]));
    (void)drivers.back()->Closed(1, 1e9, 3);  // warm-up
  }
  if (targets.size() == 1) rounds = 1;
  std::vector<Pair> rows(levels.size());
  for (size_t i = 0; i < levels.size(); ++i) {
    std::vector<Figures> runs[2];
    for (int r = 0; r < rounds; ++r) {
      for (size_t k = 0; k < targets.size(); ++k) {
        const size_t t = r % 2 == 0 ? k : targets.size() - 1 - k;
        runs[t].push_back(drivers[t]->Closed(levels[i], seconds / rounds));
      }
    }
    rows[i].reel = Combine(runs[0]);
    rows[i].has_peer = targets.size() > 1;
    if (rows[i].has_peer) rows[i].peer = Combine(runs[1]);
  }
  return rows;
}

// A closed-loop table under its title: the header, then a row per concurrency level.
std::vector<Pair> ClosedTable(const std::string& title, const std::vector<Target>& targets,
                              const serve::Body& body, const std::vector<int>& levels,
                              const char* unit, double seconds, int rounds) {
  PrintPairHeader("concurrency", unit, targets.size() > 1);
  std::vector<Pair> rows = Sweep(targets, body, levels, seconds, rounds);
  for (size_t i = 0; i < rows.size(); ++i) {
    PrintPair(title + ", concurrency", std::to_string(levels[i]), rows[i]);
  }
  return rows;
}

// One open-loop row: `n` Poisson arrivals at `rate` on each server, the same schedule for both.
void OpenRow(const std::vector<Target>& targets, const std::vector<std::string>& requests,
             double rate, size_t n, uint64_t seed) {
  Pair row;
  row.has_peer = targets.size() > 1;
  int conns[2] = {0, 0};
  for (size_t t = 0; t < targets.size(); ++t) {
    Driver driver(targets[t].endpoint, requests[t]);
    (t == 0 ? row.reel : row.peer) = driver.Open(rate, n, seed, &conns[t]);
  }
  char label[32];
  std::snprintf(label, sizeof(label), "%.2f", rate);
  PrintPair("open loop JSON, offered/s", label, row);
  std::printf("  %-12s  %zu requests; connections used: Reel %d%s\n", "", n, conns[0],
              row.has_peer ? (", peer " + std::to_string(conns[1])).c_str() : "");
}

// Open loop: Poisson arrivals, the same seed (the same schedule) for both servers.
void OpenTable(const Flags& f, const std::vector<Target>& targets, const serve::Body& json,
               double raw1_per_second) {
  std::vector<double> rates = f.rates;
  if (rates.empty()) rates = {0.5 * raw1_per_second, 0.9 * raw1_per_second};
  std::printf(
      "\nopen loop, JSON: Poisson arrivals (seed %llu), latency from the scheduled "
      "arrival, at most %d connections\n",
      static_cast<unsigned long long>(f.seed), kOpenLoopMaxConns);
  PrintPairHeader("offered/s", "req/s", targets.size() > 1);
  const std::vector<std::string> requests = Requests(targets, json);
  for (double rate : rates) {
    const size_t n =
        f.requests > 0 ? f.requests : std::max<size_t>(20, std::llround(rate * f.seconds));
    OpenRow(targets, requests, rate, n, f.seed);
  }
}

// The goals against the peer, from the closed-loop tables.
void PrintGoals(const Flags& f, const std::vector<Pair>& closed, const std::vector<Pair>& videos) {
  std::printf("\n");
  for (size_t i = 0; i < f.concurrency.size(); ++i) {
    if (f.concurrency[i] != 16) continue;
    const Pair& p = closed[i];
    std::printf(
        "JSON at concurrency 16: Reel/FastAPI throughput %.2fx (goal > 1x), p99 %.2fx "
        "(goal <= 0.5x)\n",
        p.reel.per_second / std::max(1e-9, p.peer.per_second),
        p.reel.p99_ms / std::max(1e-9, p.peer.p99_ms));
  }
  for (size_t i = 0; i < videos.size(); ++i) {
    const Pair& p = videos[i];
    std::printf("encoded video at concurrency %d: Reel/FastAPI throughput %.2fx (goal >= 2x)\n",
                f.video_concurrency[i], p.reel.per_second / std::max(1e-9, p.peer.per_second));
  }
}

// Reel at `reel serve`'s default batching and the peer, side by side.
void Compare(const Flags& f, std::shared_ptr<serve::Model> model, double raw1_per_second) {
  Server s = StartServer(std::move(model), kCompareMaxBatch, kCompareMaxDelayUs);
  const std::vector<Target> targets = Targets(f, s);
  const bool has_peer = targets.size() > 1;
  PrintCompareSetup(f, has_peer);
  const serve::Body json = ClipBody(false);
  std::optional<serve::Body> video;
  if (!f.video.empty()) video = VideoBody(f.video);
  if (has_peer) PrintAgreement(f, targets);

  std::printf("\nclosed loop, JSON FP32 [1,3,%lld,%lld,%lld] (%.2f MB a request)\n",
              static_cast<long long>(kFrames), static_cast<long long>(kSize),
              static_cast<long long>(kSize), json.bytes.size() / 1e6);
  const std::vector<Pair> closed =
      ClosedTable("JSON clip", targets, json, f.concurrency, "req/s", f.seconds, f.rounds);
  std::vector<Pair> videos;
  if (video) {
    std::printf(
        "\nclosed loop, encoded video (BYTES, binary extension, %.2f MB: %s), %d clips a "
        "video, averaged\n",
        video->bytes.size() / 1e6, f.video.c_str(), 4);
    videos = ClosedTable("encoded video", targets, *video, f.video_concurrency, "videos/s",
                         f.seconds, f.rounds);
  }
  OpenTable(f, targets, json, raw1_per_second);
  if (has_peer) PrintGoals(f, closed, videos);
}

}  // namespace

int main(int argc, char** argv) {
  reel::RetainFreedHeapMemory();  // the heap settings of `reel serve`, whose service this times
  const std::string json_path = bench::TakeJsonFlag(&argc, argv);
  const Flags f = ParseFlags(argc, argv);
  if (!f.write_model.empty()) {
    std::filesystem::create_directories(f.write_model);
    std::printf("%s\n", WriteModel(f.write_model).c_str());
    return 0;
  }
  if (f.parse_only > 0) {
    const serve::Body json = ClipBody(false), binary = ClipBody(true);
    std::printf("parse of one request, mean of %d: JSON (%.2f MB) %.3f ms, binary %.3f ms\n",
                f.parse_only, json.bytes.size() / 1e6, ParseMs(json, f.parse_only),
                ParseMs(binary, f.parse_only));
    std::printf("the same, each after 20 ms asleep: JSON %.3f ms, binary %.3f ms\n",
                ParseMs(json, f.parse_only, 20), ParseMs(binary, f.parse_only, 20));
    return 0;
  }
  models::UseCachingCpuAllocator();  // as reel serve does
  serve::SetComputeThreads(f.threads);
  bench::Report report("serve_bench", f.threads);
  the_report = &report;
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  std::printf("serve_bench: LibTorch threads %d, cores %u, OMP_WAIT_POLICY=%s, %s, %g s per row\n",
              f.threads, std::thread::hardware_concurrency(), policy ? policy : "(unset)",
              f.precision.c_str(), f.seconds);
  Result<std::string> video = std::string();
  if (f.decode_only > 0) video = ReadFileToString(f.video, "video");
  if (!video.ok()) Die("--video", video.status());
  const std::string dir =
      std::filesystem::temp_directory_path() / ("reel_serve_bench_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::shared_ptr<serve::Model> model = LoadBenchModel(f, dir);
  if (f.decode_only > 0) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::printf(
        "cut of the video into %d clips, mean of %d: %.1f ms on 1 decoder thread, "
        "%.1f ms as a lone request's (%d cores; frame threads from 1 Mpixel a frame)\n",
        model->info().video.clips, f.decode_only,
        DecodeMs(*model, f.video, *video, f.decode_only, 1),
        DecodeMs(*model, f.video, *video, f.decode_only, cores), cores);
    std::filesystem::remove_all(dir);
    return 0;
  }

  const Figures raw1 = RawForward(*model, 1, f.seconds);
  const Figures raw8 = RawForward(*model, 8, f.seconds);
  PrintRow("raw forward, batch 1 (the limit)", raw1, raw1.per_second);
  PrintRow("raw forward, batch 8", raw8, raw1.per_second);

  const serve::Body json = ClipBody(false), binary = ClipBody(true);
  std::printf(
      "request bodies: JSON %.2f MB, binary %.2f MB; parse %.2f ms (JSON), %.2f ms (binary)\n",
      json.bytes.size() / 1e6, binary.bytes.size() / 1e6, ParseMs(json, 20), ParseMs(binary, 20));
  BatchOneRows(model, json, binary, raw1, f.seconds);
  DynamicBatchRow(model, binary, f.seconds);
  Compare(f, model, raw1.per_second);
  std::filesystem::remove_all(dir);
  return report.Finish(json_path);
}
