// ObjectStore on any S3-compatible service: AWS S3, Ceph RGW, MinIO, s3rver.
// URI: s3://bucket[/prefix]; keys are stored as prefix + key.
//
// Configuration comes from the standard AWS variables (S3Options::FromEnvironment):
//   AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL   e.g. http://127.0.0.1:7480 (default: AWS itself)
//   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY  (both unset: anonymous requests)
//   AWS_SESSION_TOKEN                         optional
//   AWS_REGION or AWS_DEFAULT_REGION          default us-east-1
//   AWS_S3_ADDRESSING_STYLE=path|virtual      default: path with a custom endpoint
//                                             (MinIO, Ceph RGW), virtual for AWS
// and Reel's tuning variables REEL_S3_MAX_ATTEMPTS, REEL_S3_PART_SIZE_MB,
// REEL_S3_MULTIPART_THRESHOLD_MB, REEL_S3_PARALLELISM, REEL_S3_CONNECT_TIMEOUT_MS,
// REEL_S3_CONTENT_MD5 (1 or 0).
//
// Requests are signed with SigV4 by libcurl. Connections are kept alive and reused. Objects at
// or above multipart_threshold are uploaded as parallel multipart parts; large reads are split
// into parallel ranged GETs pinned to one ETag, so a concurrent overwrite is detected rather
// than spliced. Every part carries Content-MD5 (unless turned off), so the server refuses
// corrupted bytes.
//
// Retries: connection failures, timeouts, HTTP 5xx and 429 are retried with exponential backoff
// and full jitter up to max_attempts; 4xx answers are never retried. When the budget is spent
// the error is Unavailable and names the operation, the attempts and the last failure.
// S3 error codes become Status codes: NoSuchKey / NoSuchBucket -> NotFound, AccessDenied /
// SignatureDoesNotMatch / InvalidAccessKeyId -> PermissionDenied, InvalidRange -> OutOfRange,
// PreconditionFailed on PutIfAbsent -> AlreadyExists; the server's code and message are kept.
//
// Thread-safety: safe from many threads; handles and a small worker pool are shared.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "storage/object_store.h"

namespace reel::storage {

struct S3Options {
  std::string endpoint;  // "http://host:port" or "https://..."; empty means AWS for the region
  std::string region = "us-east-1";
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  bool path_style = true;

  uint64_t multipart_threshold = 64ull << 20;  // objects this large or larger go multipart
  uint64_t part_size = 16ull << 20;            // multipart part and parallel-read chunk size
  int parallelism = 4;                         // concurrent parts / ranges per transfer
  int max_attempts = 8;                        // tries per request, first one included
  int initial_backoff_ms = 100;                // doubled each retry, full jitter
  int max_backoff_ms = 5000;
  int connect_timeout_ms = 10000;
  int stall_timeout_s = 30;  // abort a transfer that moves < 1 KiB/s for this long
  // Send Content-MD5 with every upload so the server refuses corrupted bytes. Costs one MD5
  // pass over the data on the client; turn off only where the network checksums already do.
  bool content_md5 = true;

  // Reads the variables listed above. Errors: InvalidArgument for a malformed value (the
  // message names the variable).
  static Result<S3Options> FromEnvironment();
};

// Counters of what this store sent to the server, for tests and benchmarks.
struct S3Stats {
  uint64_t requests = 0;  // HTTP requests sent, retries included
  uint64_t retries = 0;
  uint64_t connections = 0;  // new TCP connections opened; the rest reused kept-alive ones
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
};

class S3Store : public ObjectStore {
 public:
  // `prefix` is prepended to every key ("" or ending in '/'; a missing '/' is added).
  // Does not contact the server. Errors: InvalidArgument for a bad bucket name or options.
  static Result<std::unique_ptr<S3Store>> Open(std::string bucket, std::string prefix,
                                               const S3Options& options);
  ~S3Store() override;

  std::string uri() const override;
  Status Put(std::string_view key, std::string_view data) override;
  Status PutIfAbsent(std::string_view key, std::string_view data) override;
  Result<std::string> Get(std::string_view key, ObjectInfo* info = nullptr) override;
  Result<std::string> GetRange(std::string_view key, uint64_t offset, uint64_t length) override;
  Result<ObjectInfo> Head(std::string_view key) override;
  Result<ListPage> List(const ListOptions& options) override;
  Status Delete(std::string_view key) override;
  Result<std::unique_ptr<ObjectReader>> OpenReader(std::string_view key) override;
  Result<std::unique_ptr<ObjectWriter>> OpenWriter(std::string_view key) override;

  // Bucket management, for tests and `reel storage mb`. Errors: AlreadyExists
  // (BucketAlreadyOwnedByYou / BucketAlreadyExists), NotFound, FailedPrecondition
  // (BucketNotEmpty).
  Status CreateBucket() override;
  Status DeleteBucket();

  S3Stats stats() const;
  const S3Options& options() const;

  // Internal state shared with readers and writers; defined in s3_store.cc.
  struct Impl;

 private:
  explicit S3Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace reel::storage
