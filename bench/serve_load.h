// serve_load: serve_bench's load generator, the requests it sends and the figures it reports.
//
// A Driver keeps HTTP/1.1 keep-alive connections to one KServe v2 server and drives them from
// one epoll loop on the calling thread (blocking in epoll_wait, never spinning), sending one
// prepared request again and again:
//   closed loop: `concurrency` connections, each sending its next request when the last answer
//     arrives; latency from sending to the answer's last byte.
//   open loop: Poisson arrivals at rate λ (a fixed seed), a fixed number of requests, each sent
//     on an idle connection (at most kOpenLoopMaxConns open; beyond that it waits here); latency
//     from the scheduled arrival, not from the send, so a slow server cannot hide its queue (no
//     coordinated omission).
// Answers must carry a Content-Length (both servers' do); status 200 is a success, anything else
// a failure (counted, and the first one's body printed to stderr).
//
// The bodies: a [1, 3, 8, 112, 112] FP32 clip (a 1.6 MB JSON body, or 1.2 MB with the binary
// extension) or an encoded video (BYTES, binary extension).
//
// Errors: what makes the benchmark meaningless (an unresolvable URL, epoll failing, an
// unreadable video) ends the process with "serve_bench: ..." on stderr (Die).
// Thread-safety: a Driver is used by one thread at a time; separate Drivers may run on separate
// threads. The free functions are thread-safe.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "serve/kserve.h"

namespace reel::bench {

using SteadyClock = std::chrono::steady_clock;

inline constexpr int64_t kFrames = 8, kSize = 112;  // the clip: [1, 3, kFrames, kSize, kSize]
inline constexpr int kOpenLoopMaxConns = 64;        // connections the open loop may open

// Prints "serve_bench: WHAT[: STATUS]" to stderr and exits 1.
[[noreturn]] void Die(const std::string& what, const Status& status);
[[noreturn]] void Die(const std::string& what);

double Ms(SteadyClock::duration d);

// The `q` quantile (0..1) of `values` (the nearest rank below); 0 when empty.
double Percentile(std::vector<double> values, double q);

// What one setting measured.
struct Figures {
  double per_second = 0;  // samples (closed loop), requests (the comparison tables)
  double p50_ms = 0, p99_ms = 0;
  int failures = 0;
  size_t requests = 0;
  double seconds = 0;                // how long the run took
  std::vector<double> latencies_ms;  // every answered request's
};

// Runs of the same load taken in turns as one: requests over the runs' seconds, percentiles over
// all their latencies.
Figures Combine(const std::vector<Figures>& runs);

// The clip every request carries: fixed pseudo-random values with two decimals.
std::vector<float> Clip();
// An inference request with Clip() as FP32 input "input", asking for output `output`; JSON, or
// with the binary extension.
serve::Body ClipBody(bool binary, const std::string& output = "probabilities");
// An inference request with the video file at `path` as a BYTES [1] input (binary extension).
serve::Body VideoBody(const std::string& path, const std::string& output = "probabilities");

// Where requests go: http://host:port, model `model`.
struct Endpoint {
  std::string url;
  std::string authority;  // host:port, for the Host header
  std::string model;
  sockaddr_storage address{};
  socklen_t address_length = 0;
};

// `url` is http://HOST:PORT (a path after it is ignored); resolved here.
Endpoint MakeEndpoint(const std::string& url, const std::string& model);

// The whole HTTP message of one inference request to `endpoint`.
std::string HttpRequest(const Endpoint& endpoint, const serve::Body& body);

// Sends `body` to `endpoint` once (a connection of its own) and returns the answer's FP32
// "logits" output, for checking that two servers compute the same thing.
std::vector<float> Logits(const Endpoint& endpoint, const serve::Body& body);

// Sends `request` (an HttpRequest) to `endpoint` over its own connections, opened as needed and
// closed when it is destroyed or a run starts. Both must outlive the Driver.
class Driver {
 public:
  Driver(const Endpoint& endpoint, const std::string& request);
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // `concurrency` connections in a closed loop for `seconds`, or until `limit` requests.
  Figures Closed(int concurrency, double seconds, size_t limit = SIZE_MAX);

  // `requests` Poisson arrivals at `rate` per second (seeded); latency from the arrival.
  // Sets `*max_connections` to the connections it opened.
  Figures Open(double rate, size_t requests, uint64_t seed, int* max_connections);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// `concurrency` clients in a closed loop for `seconds`, against model "bench" at `url`.
Figures Load(const std::string& url, const serve::Body& body, int concurrency, double seconds);

}  // namespace reel::bench
