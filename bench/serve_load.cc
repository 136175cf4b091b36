#include "bench/serve_load.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string_view>

#include "base/random.h"
#include "http/client.h"

namespace reel::bench {

void Die(const std::string& what, const Status& status) {
  std::fprintf(stderr, "serve_bench: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::exit(1);
}

void Die(const std::string& what) {
  std::fprintf(stderr, "serve_bench: %s\n", what.c_str());
  std::exit(1);
}

double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(q * values.size()))];
}

// ---- request bodies --------------------------------------------------------------------------

std::vector<float> Clip() {
  std::vector<float> clip(static_cast<size_t>(3 * kFrames * kSize * kSize));
  Rng rng(7);
  // Two decimals, as a client rounding normalised pixels would send: a 1.6 MB JSON body.
  for (float& v : clip) v = static_cast<float>(std::round(rng.Uniform(-2, 2) * 100) / 100);
  return clip;
}

serve::Body ClipBody(bool binary, const std::string& output) {
  serve::InferRequest request;
  request.inputs.push_back(
      serve::MakeTensor("input", serve::DataType::kFp32, {1, 3, kFrames, kSize, kSize}, Clip()));
  request.outputs.push_back({output, false, std::nullopt});
  return serve::EncodeInferRequest(request, binary);
}

// A video file is not UTF-8, so the codec sends it with the binary extension (as every KServe
// client must).
serve::Body VideoBody(const std::string& path, const std::string& output) {
  std::ifstream file(path, std::ios::binary);
  if (!file) Die("cannot read the video '" + path + "'");
  std::stringstream bytes;
  bytes << file.rdbuf();
  serve::InferRequest request;
  request.inputs.push_back(serve::MakeBytesTensor("input", {bytes.str()}));
  request.outputs.push_back({output, false, std::nullopt});
  return serve::EncodeInferRequest(request, false);
}

// ---- endpoints and requests ------------------------------------------------------------------

Endpoint MakeEndpoint(const std::string& url, const std::string& model) {
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) Die("'" + url + "': only http://HOST:PORT URLs are supported");
  std::string rest = url.substr(kScheme.size());
  rest = rest.substr(0, rest.find('/'));
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) Die("'" + url + "' has no port");
  std::string host = rest.substr(0, colon);
  const std::string port = rest.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int e = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); e != 0 || !found) {
    Die("cannot resolve '" + url + "': " + gai_strerror(e));
  }
  Endpoint endpoint;
  endpoint.url = url;
  endpoint.authority = rest;
  endpoint.model = model;
  std::memcpy(&endpoint.address, found->ai_addr, found->ai_addrlen);
  endpoint.address_length = found->ai_addrlen;
  freeaddrinfo(found);
  return endpoint;
}

std::string HttpRequest(const Endpoint& endpoint, const serve::Body& body) {
  std::string message =
      "POST /v2/models/" + endpoint.model + "/infer HTTP/1.1\r\nHost: " + endpoint.authority +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.bytes.size()) +
      "\r\n";
  if (body.json_length) {
    message += "Inference-Header-Content-Length: " + std::to_string(*body.json_length) + "\r\n";
  }
  return message + "\r\n" + body.bytes;
}

std::vector<float> Logits(const Endpoint& endpoint, const serve::Body& body) {
  http::ClientOptions options;
  options.timeout = std::chrono::milliseconds(120'000);
  if (body.json_length) {
    options.headers["Inference-Header-Content-Length"] = std::to_string(*body.json_length);
  }
  auto client = http::Client::Make(endpoint.url, options);
  if (!client.ok()) Die("client", client.status());
  auto answer = client->Post("/v2/models/" + endpoint.model + "/infer", body.bytes);
  if (!answer.ok()) Die(endpoint.url, answer.status());
  if (answer->status != 200) {
    Die(endpoint.url + " answered " + std::to_string(answer->status) + ": " + answer->body);
  }
  auto json_length = serve::JsonLengthHeader(answer->Header("Inference-Header-Content-Length"),
                                             answer->body.size());
  if (!json_length.ok()) Die("answer", json_length.status());
  auto parsed = serve::ParseInferResponse(answer->body, *json_length);
  if (!parsed.ok()) Die("answer of " + endpoint.url, parsed.status());
  for (const serve::Tensor& t : parsed->outputs) {
    if (t.name != "logits" || t.datatype != serve::DataType::kFp32) continue;
    std::vector<float> p(t.data.size() / sizeof(float));
    std::memcpy(p.data(), t.data.data(), p.size() * sizeof(float));
    return p;
  }
  Die(endpoint.url + ": no FP32 'logits' in the answer");
}

// ---- the epoll loop --------------------------------------------------------------------------

namespace {

// `requests` arrival times from `start`, with exponential gaps of mean 1/`rate` s (seeded).
std::vector<SteadyClock::time_point> PoissonArrivals(SteadyClock::time_point start, double rate,
                                                     size_t requests, uint64_t seed) {
  Rng rng(seed);
  std::vector<SteadyClock::time_point> arrivals;
  auto t = start;
  for (size_t i = 0; i < requests; ++i) {
    arrivals.push_back(t);
    t += std::chrono::duration_cast<SteadyClock::duration>(
        std::chrono::duration<double>(-std::log(1.0 - rng.Uniform()) / rate));
  }
  return arrivals;
}

std::string LowerCase(std::string text) {
  for (char& ch : text) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return text;
}

}  // namespace

class Driver::Impl {
 public:
  Impl(const Endpoint& endpoint, const std::string& request)
      : endpoint_(endpoint), request_(request) {
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    timer_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (epoll_ < 0 || timer_ < 0) Die(std::string("epoll/timerfd: ") + std::strerror(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kTimerTag;
    epoll_ctl(epoll_, EPOLL_CTL_ADD, timer_, &ev);
  }
  ~Impl() {
    for (auto& c : conns_) CloseConn(c.get());
    close(timer_);
    close(epoll_);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  Figures Closed(int concurrency, double seconds, size_t limit) {
    Reset();
    const auto start = SteadyClock::now();
    const auto end = start + std::chrono::duration<double>(seconds);
    size_t started = 0;
    on_done_ = [&](Conn* c) {
      if (SteadyClock::now() < end && started < limit && failures_ < kMaxFailures) {
        ++started;
        Start(c, SteadyClock::now());
      }
    };
    for (int i = 0; i < concurrency && started < limit; ++i) {
      Conn* c = NewConn();
      ++started;
      Start(c, SteadyClock::now());
    }
    Loop([&] { return busy_ == 0; });
    return Result(SteadyClock::now() - start);
  }

  Figures Open(double rate, size_t requests, uint64_t seed, int* max_connections) {
    Reset();
    OpenLoop open;
    open.arrivals =
        PoissonArrivals(SteadyClock::now() + std::chrono::milliseconds(20), rate, requests, seed);
    on_done_ = [&](Conn* c) {
      open.idle.push_back(c);
      Dispatch(&open);
    };
    on_timer_ = [&] { Arrive(&open); };
    ArmTimer(open.arrivals[0]);
    Loop([&] { return open.next == open.arrivals.size() && open.waiting.empty() && busy_ == 0; });
    on_timer_ = nullptr;
    *max_connections = static_cast<int>(conns_.size());
    return Result(last_answer_ - open.arrivals[0]);
  }

 private:
  static constexpr uint64_t kTimerTag = ~uint64_t{0};
  static constexpr int kMaxFailures = 1000;  // a server that fails everything ends the row

  struct Conn {
    int fd = -1;
    size_t index = 0;
    bool busy = false;
    size_t sent = 0;
    std::string in;
    SteadyClock::time_point origin;
  };

  // The open loop's schedule and queues.
  struct OpenLoop {
    std::vector<SteadyClock::time_point> arrivals;
    size_t next = 0;                              // the first arrival still to come
    std::deque<SteadyClock::time_point> waiting;  // arrived, no connection free yet
    std::vector<Conn*> idle;
  };

  void Reset() {
    last_answer_ = SteadyClock::time_point{};
    latencies_.clear();
    failures_ = 0;
    busy_ = 0;
    for (auto& c : conns_) CloseConn(c.get());
    conns_.clear();
  }

  Figures Result(SteadyClock::duration elapsed) const {
    const double s = std::max(1e-9, std::chrono::duration<double>(elapsed).count());
    if (failures_ > 0) {
      std::fprintf(stderr, "serve_bench: %s: %d failed requests\n", endpoint_.url.c_str(),
                   failures_);
    }
    return {latencies_.size() / s,
            Percentile(latencies_, 0.5),
            Percentile(latencies_, 0.99),
            failures_,
            latencies_.size(),
            s,
            latencies_};
  }

  // The timer fired: queues the arrivals due, sends what it can, and waits for the next.
  void Arrive(OpenLoop* open) {
    const auto now = SteadyClock::now();
    while (open->next < open->arrivals.size() && open->arrivals[open->next] <= now) {
      open->waiting.push_back(open->arrivals[open->next++]);
    }
    Dispatch(open);
    if (open->next < open->arrivals.size()) ArmTimer(open->arrivals[open->next]);
  }

  // Sends the waiting arrivals on idle connections, or new ones while under the cap.
  void Dispatch(OpenLoop* open) {
    while (!open->waiting.empty()) {
      Conn* c = nullptr;
      if (!open->idle.empty()) {
        c = open->idle.back();
        open->idle.pop_back();
      } else if (static_cast<int>(conns_.size()) < kOpenLoopMaxConns) {
        c = NewConn();
      } else {
        return;
      }
      Start(c, open->waiting.front());
      open->waiting.pop_front();
    }
  }

  Conn* NewConn() {
    conns_.push_back(std::make_unique<Conn>());
    conns_.back()->index = conns_.size() - 1;
    return conns_.back().get();
  }

  bool Connect(Conn* c) {
    c->fd = socket(endpoint_.address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0) return false;
    // Blocking connect (to a local server: at once), then non-blocking traffic.
    if (connect(c->fd, reinterpret_cast<const sockaddr*>(&endpoint_.address),
                endpoint_.address_length) != 0) {
      CloseConn(c);
      return false;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT;
    ev.data.u64 = c->index;
    epoll_ctl(epoll_, EPOLL_CTL_ADD, c->fd, &ev);
    return true;
  }

  void CloseConn(Conn* c) {
    if (c->fd < 0) return;
    epoll_ctl(epoll_, EPOLL_CTL_DEL, c->fd, nullptr);
    close(c->fd);
    c->fd = -1;
  }

  void Watch(Conn* c, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = c->index;
    epoll_ctl(epoll_, EPOLL_CTL_MOD, c->fd, &ev);
  }

  void ArmTimer(SteadyClock::time_point when) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch());
    itimerspec spec{};
    spec.it_value.tv_sec = static_cast<time_t>(ns.count() / 1'000'000'000);
    spec.it_value.tv_nsec = static_cast<long>(ns.count() % 1'000'000'000);
    if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;
    timerfd_settime(timer_, TFD_TIMER_ABSTIME, &spec, nullptr);
  }

  // Sends the request on `c` (connecting first when needed); `origin` is where latency starts.
  void Start(Conn* c, SteadyClock::time_point origin) {
    c->busy = true;
    ++busy_;
    c->origin = origin;
    c->sent = 0;
    c->in.clear();
    if (c->fd < 0 && !Connect(c)) {
      Fail(c);
      return;
    }
    Watch(c, EPOLLIN | EPOLLOUT);
    Write(c);
  }

  void Write(Conn* c) {
    while (c->sent < request_.size()) {
      const ssize_t n =
          send(c->fd, request_.data() + c->sent, request_.size() - c->sent, MSG_NOSIGNAL);
      if (n > 0) {
        c->sent += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;  // EPOLLOUT says when to go on
      } else {
        Fail(c);
        return;
      }
    }
    Watch(c, EPOLLIN);
  }

  // Appends what `c` has to read; false when it closed or broke (whatever was in flight failed).
  bool Drain(Conn* c) {
    char buffer[64 << 10];
    for (;;) {
      const ssize_t n = recv(c->fd, buffer, sizeof(buffer), 0);
      if (n > 0) {
        c->in.append(buffer, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (c->busy) {
        Fail(c);
      } else {
        CloseConn(c);
      }
      return false;
    }
  }

  // Reads, and completes the request in flight once its whole answer is in.
  void Read(Conn* c) {
    if (!Drain(c) || !c->busy) return;
    const size_t head_end = c->in.find("\r\n\r\n");
    if (head_end == std::string::npos) return;
    const std::string head = LowerCase(c->in.substr(0, head_end));
    const size_t cl = head.find("\r\ncontent-length:");
    if (cl == std::string::npos) {
      Fail(c);  // chunked or unframed: not what these servers send
      return;
    }
    const size_t length = std::strtoull(head.c_str() + cl + 17, nullptr, 10);
    if (c->in.size() < head_end + 4 + length) return;
    Answered(c, head, head_end, length);
  }

  // The whole answer is in `c->in`: a success when its status is 200.
  void Answered(Conn* c, const std::string& head, size_t head_end, size_t length) {
    const int status = c->in.size() > 12 ? std::atoi(c->in.c_str() + 9) : 0;
    const bool close_after = head.find("\r\nconnection: close") != std::string::npos ||
                             c->sent < request_.size() || c->in.size() > head_end + 4 + length;
    if (status != 200) {
      if (failures_ == 0) {
        std::fprintf(stderr, "serve_bench: %s answered %d: %s\n", endpoint_.url.c_str(), status,
                     c->in.substr(head_end + 4, 300).c_str());
      }
      Fail(c);
      return;
    }
    last_answer_ = SteadyClock::now();
    latencies_.push_back(Ms(last_answer_ - c->origin));
    if (close_after) CloseConn(c);
    Finish(c);
  }

  void Fail(Conn* c) {
    ++failures_;
    CloseConn(c);
    Finish(c);
  }

  void Finish(Conn* c) {
    c->busy = false;
    --busy_;
    on_done_(c);
  }

  template <class Done>
  void Loop(const Done& done) {
    epoll_event events[64];
    while (!done()) {
      const int n = epoll_wait(epoll_, events, 64, 1000);
      if (n < 0 && errno != EINTR) Die(std::string("epoll_wait: ") + std::strerror(errno));
      for (int i = 0; i < n; ++i) Handle(events[i]);
    }
  }

  void Handle(const epoll_event& event) {
    if (event.data.u64 == kTimerTag) {
      uint64_t expirations = 0;
      (void)!read(timer_, &expirations, sizeof(expirations));
      if (on_timer_) on_timer_();
      return;
    }
    Conn* c = conns_[event.data.u64].get();
    if (c->fd < 0) return;
    if ((event.events & EPOLLOUT) && c->busy && c->sent < request_.size()) Write(c);
    if (c->fd >= 0 && (event.events & (EPOLLIN | EPOLLHUP | EPOLLERR))) Read(c);
  }

  const Endpoint& endpoint_;
  const std::string& request_;
  int epoll_ = -1, timer_ = -1;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<double> latencies_;
  int failures_ = 0;
  int busy_ = 0;
  SteadyClock::time_point last_answer_;
  std::function<void(Conn*)> on_done_;
  std::function<void()> on_timer_;
};

Driver::Driver(const Endpoint& endpoint, const std::string& request)
    : impl_(std::make_unique<Impl>(endpoint, request)) {}

Driver::~Driver() = default;

Figures Driver::Closed(int concurrency, double seconds, size_t limit) {
  return impl_->Closed(concurrency, seconds, limit);
}

Figures Driver::Open(double rate, size_t requests, uint64_t seed, int* max_connections) {
  return impl_->Open(rate, requests, seed, max_connections);
}

Figures Combine(const std::vector<Figures>& runs) {
  Figures all;
  for (const Figures& run : runs) {
    all.failures += run.failures;
    all.requests += run.requests;
    all.seconds += run.seconds;
    all.latencies_ms.insert(all.latencies_ms.end(), run.latencies_ms.begin(),
                            run.latencies_ms.end());
  }
  all.per_second = static_cast<double>(all.requests) / std::max(1e-9, all.seconds);
  all.p50_ms = Percentile(all.latencies_ms, 0.5);
  all.p99_ms = Percentile(all.latencies_ms, 0.99);
  return all;
}

Figures Load(const std::string& url, const serve::Body& body, int concurrency, double seconds) {
  const Endpoint endpoint = MakeEndpoint(url, "bench");
  const std::string request = HttpRequest(endpoint, body);
  Driver driver(endpoint, request);
  return driver.Closed(concurrency, seconds);
}

}  // namespace reel::bench
