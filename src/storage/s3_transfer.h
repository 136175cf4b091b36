// Internal to storage: S3Store's shared state and the data-moving operations (single and
// multipart uploads, whole, ranged and parallel downloads, streaming readers and writers).
// s3_store.cc keeps the request plumbing for the small operations; this file moves bytes.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "storage/s3_http.h"
#include "storage/s3_store.h"

namespace reel::storage {

struct S3Store::Impl {
  Impl(std::string bucket, std::string prefix, const S3Options& options);

  // "s3://bucket/prefix/key" style description for error messages.
  std::string Describe(std::string_view method, std::string_view key) const;
  // URL of a full key (prefix included), percent-encoded.
  std::string ObjectUrl(std::string_view full_key) const;
  // Turns a non-success answer into a Status whose message starts with `what`.
  Status ErrorFrom(const s3::HttpResponse& response, const std::string& what);

  std::string bucket;
  std::string prefix;  // "" or ending in '/'
  S3Options options;
  std::string bucket_url;  // "http://host:port/bucket" or "https://bucket.host"
  s3::HttpClient http;
  ThreadPool pool;  // helpers for parallel parts and ranges; the calling thread works too
  std::atomic<bool> bucket_exists{false};  // learned from a bucket probe; saves later probes
};

namespace s3 {

// Sorted, SigV4-encoded query string: libcurl signs the query exactly as given.
std::string CanonicalQuery(std::vector<std::pair<std::string, std::string>> params);

Status PutSingle(S3Store::Impl& impl, std::string_view key, std::string_view data, bool if_absent);
Status UploadMultipart(S3Store::Impl& impl, std::string_view key, std::string_view data);
Result<std::string> GetWhole(S3Store::Impl& impl, std::string_view key, ObjectInfo* info);
Result<std::string> GetPart(S3Store::Impl& impl, std::string_view key, uint64_t offset,
                            uint64_t length);
Result<ObjectInfo> HeadObject(S3Store::Impl& impl, std::string_view key);
Result<std::unique_ptr<ObjectReader>> OpenObjectReader(S3Store::Impl& impl, std::string_view key);
Result<std::unique_ptr<ObjectWriter>> OpenObjectWriter(S3Store::Impl& impl, std::string_view key);

}  // namespace s3
}  // namespace reel::storage
