// Internal to storage: one HTTP request/response exchange with an S3 endpoint on libcurl,
// signed with SigV4, over pooled keep-alive connections, with the retry policy S3Store
// documents. No S3 semantics beyond "which answers are worth retrying".
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "storage/s3_store.h"

namespace reel::storage::s3 {

struct HttpRequest {
  std::string method = "GET";  // GET, PUT, POST, DELETE, HEAD
  std::string url;             // absolute, path already percent-encoded
  std::string query;           // canonical: sorted, encoded, "k=v&k2=" (no leading '?')
  std::vector<std::pair<std::string, std::string>> headers;
  std::string_view body;  // sent for PUT and POST
  // When set, a 2xx body is written here (at most sink_capacity bytes; more is DataLoss)
  // instead of into HttpResponse::body.
  char* sink = nullptr;
  size_t sink_capacity = 0;
  std::string description;  // "PUT s3://bucket/key", used in error messages
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;                            // error bodies always land here
  size_t sink_bytes = 0;                       // bytes written into the request's sink
  int attempts = 0;                            // tries it took, first one included

  std::string Header(const std::string& lower_name) const;
};

class HttpClient {
 public:
  explicit HttpClient(const S3Options& options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends the request, retrying as S3Store documents. A response with any HTTP status is OK
  // here (callers map 4xx); errors are Unavailable after the retry budget, or InvalidArgument
  // for a request libcurl refuses outright (bad URL).
  Result<HttpResponse> Execute(const HttpRequest& request);

  S3Stats stats() const;

 private:
  struct Handle;
  Handle* Acquire();
  void Release(Handle* handle);
  // One attempt. Fills `response`; returns the libcurl result code. `overflow` is set when the
  // server sent more than the sink holds.
  int Attempt(Handle* handle, const HttpRequest& request, HttpResponse* response,
              std::string* curl_error, bool* overflow);

  S3Options options_;
  std::string sigv4_param_;  // "aws:amz:REGION:s3"
  std::string credentials_;  // "key:secret"
  std::string no_proxy_;     // $NO_PROXY plus the loopback names
  std::mutex mu_;
  std::vector<Handle*> idle_;
  std::atomic<uint64_t> requests_{0}, retries_{0}, connections_{0}, bytes_sent_{0},
      bytes_received_{0};
};

}  // namespace reel::storage::s3
