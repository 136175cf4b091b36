#include "storage/s3_http.h"

#include <curl/curl.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "base/allocator.h"
#include "base/logging.h"
#include "base/sync_point.h"
#include "storage/s3_xml.h"

namespace reel::storage::s3 {
namespace {

void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// Failures of the transport that a later attempt may not see.
bool IsRetryableCurlCode(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

bool IsRetryableStatus(long status) { return status >= 500 || status == 429; }

std::string ErrorSummary(const std::string& body) {
  S3Error error = ParseError(body);
  if (error.code.empty()) return body.substr(0, 200);
  return error.code + (error.message.empty() ? "" : ": " + error.message);
}

struct Transfer {
  const HttpRequest* request;
  HttpResponse* response;
  size_t upload_offset = 0;
  bool overflow = false;
};

size_t ReadBody(char* buffer, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view body = t->request->body;
  size_t n = std::min(size * count, body.size() - t->upload_offset);
  std::memcpy(buffer, body.data() + t->upload_offset, n);
  t->upload_offset += n;
  return n;
}

size_t WriteBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * count;
  bool success = t->response->status >= 200 && t->response->status < 300;
  if (success && t->request->sink != nullptr) {
    if (t->response->sink_bytes + n > t->request->sink_capacity) {
      t->overflow = true;
      return 0;  // aborts the transfer with CURLE_WRITE_ERROR
    }
    std::memcpy(t->request->sink + t->response->sink_bytes, data, n);
    t->response->sink_bytes += n;
  } else {
    t->response->body.append(data, n);
  }
  return n;
}

// A body that lands in the response string gets its room up front, in huge pages when large:
// appending to a string that grows as bytes arrive cost a third of a 256 MiB GET's speed. The
// server's word is trusted only up to kMaxReservation; beyond it the string grows.
void ReserveBody(Transfer& t, std::string_view content_length) {
  constexpr uint64_t kMaxReservation = uint64_t{1} << 30;
  const bool success = t.response->status >= 200 && t.response->status < 300;
  if (!success || t.request->sink != nullptr || t.request->method == "HEAD") return;
  uint64_t length = 0;
  auto [end, error] =
      std::from_chars(content_length.data(), content_length.data() + content_length.size(), length);
  if (error != std::errc() || end != content_length.data() + content_length.size()) return;
  ReserveBuffer(&t.response->body, static_cast<size_t>(std::min(length, kMaxReservation)));
}

size_t WriteHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * count;
  std::string_view line(data, n);
  if (line.substr(0, 5) == "HTTP/") {
    // A new status line (after 100 Continue, or a redirect) starts a fresh header set.
    t->response->headers.clear();
    size_t space = line.find(' ');
    if (space != std::string_view::npos) {
      t->response->status =
          std::strtol(std::string(line.substr(space + 1, 3)).c_str(), nullptr, 10);
    }
    return n;
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return n;
  std::string name(line.substr(0, colon));
  std::transform(name.begin(), name.end(), name.begin(), ::tolower);
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) {
    value.remove_suffix(1);
  }
  if (name == "content-length") ReserveBody(*t, value);
  t->response->headers[name] = std::string(value);
  return n;
}

}  // namespace

std::string HttpResponse::Header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

struct HttpClient::Handle {
  CURL* curl = nullptr;
};

HttpClient::HttpClient(const S3Options& options) : options_(options) {
  GlobalInitOnce();
  sigv4_param_ = "aws:amz:" + options_.region + ":s3";
  credentials_ = options_.access_key_id + ":" + options_.secret_access_key;
  for (const char* name : {"NO_PROXY", "no_proxy"}) {
    if (const char* value = std::getenv(name); value && *value) {
      no_proxy_ = std::string(value) + ",";
      break;
    }
  }
  no_proxy_ += "127.0.0.1,localhost,::1";
}

HttpClient::~HttpClient() {
  for (Handle* handle : idle_) {
    curl_easy_cleanup(handle->curl);
    delete handle;
  }
}

HttpClient::Handle* HttpClient::Acquire() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      Handle* handle = idle_.back();
      idle_.pop_back();
      return handle;
    }
  }
  auto* handle = new Handle;
  handle->curl = curl_easy_init();
  return handle;
}

void HttpClient::Release(Handle* handle) {
  std::lock_guard lock(mu_);
  idle_.push_back(handle);
}

int HttpClient::Attempt(Handle* handle, const HttpRequest& request, HttpResponse* response,
                        std::string* curl_error, bool* overflow) {
  CURL* curl = handle->curl;
  // Reset keeps the handle's live connections, so keep-alive survives between requests.
  curl_easy_reset(curl);
  *response = HttpResponse{};
  Transfer transfer{&request, response};

  std::string url = request.url;
  if (!request.query.empty()) url += "?" + request.query;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  // Proxies from the environment still apply, but never to a loopback endpoint.
  curl_easy_setopt(curl, CURLOPT_NOPROXY, no_proxy_.c_str());
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout_ms));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options_.stall_timeout_s));
  curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 512L * 1024);
  curl_easy_setopt(curl, CURLOPT_UPLOAD_BUFFERSIZE, 2L * 1024 * 1024);
  // Large PUTs wait for "100 Continue"; a server that never sends it costs at most this.
  curl_easy_setopt(curl, CURLOPT_EXPECT_100_TIMEOUT_MS, 200L);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, WriteHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  char error_buffer[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
  if (!options_.access_key_id.empty()) {
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4_param_.c_str());
    curl_easy_setopt(curl, CURLOPT_USERPWD, credentials_.c_str());
  }

  if (request.method == "GET") {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  } else if (request.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT") {
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, ReadBody);
    curl_easy_setopt(curl, CURLOPT_READDATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  } else if (request.method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
  } else {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  struct curl_slist* headers = nullptr;
  // The payload is protected by Content-MD5 where it matters; SigV4 signs the rest.
  headers = curl_slist_append(headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
  // No "Expect:" override here: libcurl's SigV4 would sign the empty header it then omits.
  if (!options_.session_token.empty()) {
    headers =
        curl_slist_append(headers, ("x-amz-security-token: " + options_.session_token).c_str());
  }
  for (const auto& [name, value] : request.headers) {
    headers = curl_slist_append(headers, (name + ": " + value).c_str());
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);

  CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  *overflow = transfer.overflow;
  if (transfer.overflow) {
    *curl_error = "the server sent more bytes than the requested range";
  } else if (code != CURLE_OK) {
    *curl_error = error_buffer[0] ? error_buffer : curl_easy_strerror(code);
  }
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  if (code == CURLE_OK) response->status = status;
  curl_off_t up = 0, down = 0;
  curl_easy_getinfo(curl, CURLINFO_SIZE_UPLOAD_T, &up);
  curl_easy_getinfo(curl, CURLINFO_SIZE_DOWNLOAD_T, &down);
  long new_connections = 0;
  curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &new_connections);
  connections_ += static_cast<uint64_t>(new_connections);
  bytes_sent_ += static_cast<uint64_t>(up);
  bytes_received_ += static_cast<uint64_t>(down);
  return static_cast<int>(code);
}

Result<HttpResponse> HttpClient::Execute(const HttpRequest& request) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  auto started = std::chrono::steady_clock::now();
  std::string last_failure;
  HttpResponse response;
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    Handle* handle = Acquire();
    std::string curl_error;
    ++requests_;
    bool overflow = false;
    auto code = static_cast<CURLcode>(Attempt(handle, request, &response, &curl_error, &overflow));
    REEL_SYNC_POINT("HttpClient::Execute:Attempted");  // its bytes counted in stats()
    if (code != CURLE_OK) {
      // A handle whose transfer failed may hold a broken connection: start afresh.
      curl_easy_cleanup(handle->curl);
      handle->curl = curl_easy_init();
    }
    Release(handle);
    if (overflow) return DataLossError(request.description + ": " + curl_error);
    response.attempts = attempt;
    if (code == CURLE_OK && !IsRetryableStatus(response.status)) return response;
    if (code == CURLE_URL_MALFORMAT || code == CURLE_UNSUPPORTED_PROTOCOL) {
      return InvalidArgumentError(request.description + ": " + curl_error +
                                  " (check the endpoint '" + options_.endpoint + "')");
    }
    if (code != CURLE_OK && !IsRetryableCurlCode(code)) {
      return UnavailableError(request.description + ": " + curl_error);
    }
    last_failure = code != CURLE_OK ? curl_error
                                    : "HTTP " + std::to_string(response.status) + " " +
                                          ErrorSummary(response.body);
    if (attempt == options_.max_attempts) break;
    ++retries_;
    // Full jitter: sleep uniformly in [0, min(cap, base * 2^(attempt-1))].
    int64_t ceiling = std::min<int64_t>(
        options_.max_backoff_ms, int64_t{options_.initial_backoff_ms} << std::min(attempt - 1, 20));
    int64_t sleep_ms = std::uniform_int_distribution<int64_t>(0, ceiling)(rng);
    Logger("storage")->debug("{}: attempt {} failed ({}); retrying in {} ms", request.description,
                             attempt, last_failure, sleep_ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  char elapsed[32];
  std::snprintf(elapsed, sizeof elapsed, "%.1f", seconds);
  return UnavailableError(request.description + ": gave up after " +
                          std::to_string(options_.max_attempts) + " attempts in " + elapsed +
                          " s; last failure: " + last_failure);
}

S3Stats HttpClient::stats() const {
  S3Stats s;
  s.requests = requests_.load();
  s.retries = retries_.load();
  s.connections = connections_.load();
  s.bytes_sent = bytes_sent_.load();
  s.bytes_received = bytes_received_.load();
  return s;
}

}  // namespace reel::storage::s3
