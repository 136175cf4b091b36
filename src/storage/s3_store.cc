#include "storage/s3_store.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <future>
#include <mutex>

#include "base/hash.h"
#include "base/thread_pool.h"
#include "base/uri.h"
#include "storage/s3_http.h"
#include "storage/s3_transfer.h"
#include "storage/s3_xml.h"

namespace reel::storage {

using s3::HttpRequest;
using s3::HttpResponse;

namespace {

Result<int64_t> EnvInt(const char* name, int64_t fallback, int64_t min, int64_t max) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  long long parsed = std::strtoll(value, &end, 10);
  if (*end != '\0' || parsed < min || parsed > max) {
    return InvalidArgumentError(std::string(name) + "='" + value + "': expected an integer in [" +
                                std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return static_cast<int64_t>(parsed);
}

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

bool ValidBucketName(const std::string& bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (char c : bucket) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  }
  return std::isalnum(static_cast<unsigned char>(bucket.front())) &&
         std::isalnum(static_cast<unsigned char>(bucket.back()));
}

}  // namespace

Result<S3Options> S3Options::FromEnvironment() {
  S3Options o;
  o.endpoint = Env("AWS_ENDPOINT_URL_S3");
  if (o.endpoint.empty()) o.endpoint = Env("AWS_ENDPOINT_URL");
  o.region = Env("AWS_REGION");
  if (o.region.empty()) o.region = Env("AWS_DEFAULT_REGION");
  if (o.region.empty()) o.region = "us-east-1";
  o.access_key_id = Env("AWS_ACCESS_KEY_ID");
  o.secret_access_key = Env("AWS_SECRET_ACCESS_KEY");
  o.session_token = Env("AWS_SESSION_TOKEN");
  if (o.access_key_id.empty() != o.secret_access_key.empty()) {
    return InvalidArgumentError(
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together (or both unset for "
        "anonymous access)");
  }
  std::string style = Env("AWS_S3_ADDRESSING_STYLE");
  if (style.empty() || style == "auto") {
    o.path_style = !o.endpoint.empty();
  } else if (style == "path" || style == "virtual") {
    o.path_style = style == "path";
  } else {
    return InvalidArgumentError("AWS_S3_ADDRESSING_STYLE='" + style +
                                "': expected 'path', 'virtual' or 'auto'");
  }
  REEL_ASSIGN_OR_RETURN(o.max_attempts, EnvInt("REEL_S3_MAX_ATTEMPTS", o.max_attempts, 1, 100));
  REEL_ASSIGN_OR_RETURN(int64_t part_mb, EnvInt("REEL_S3_PART_SIZE_MB", 16, 5, 5120));
  o.part_size = static_cast<uint64_t>(part_mb) << 20;
  REEL_ASSIGN_OR_RETURN(int64_t threshold_mb,
                        EnvInt("REEL_S3_MULTIPART_THRESHOLD_MB", 64, 5, 5120));
  o.multipart_threshold = static_cast<uint64_t>(threshold_mb) << 20;
  REEL_ASSIGN_OR_RETURN(o.parallelism, EnvInt("REEL_S3_PARALLELISM", o.parallelism, 1, 64));
  REEL_ASSIGN_OR_RETURN(o.connect_timeout_ms,
                        EnvInt("REEL_S3_CONNECT_TIMEOUT_MS", o.connect_timeout_ms, 100, 600000));
  REEL_ASSIGN_OR_RETURN(int64_t md5, EnvInt("REEL_S3_CONTENT_MD5", 1, 0, 1));
  o.content_md5 = md5 == 1;
  return o;
}

S3Store::Impl::Impl(std::string bucket_in, std::string prefix_in, const S3Options& options_in)
    : bucket(std::move(bucket_in)),
      prefix(std::move(prefix_in)),
      options(options_in),
      http(options_in),
      pool(static_cast<size_t>(std::max(1, options_in.parallelism - 1))) {
  std::string endpoint = options.endpoint;
  if (endpoint.empty()) endpoint = "https://s3." + options.region + ".amazonaws.com";
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  if (options.path_style) {
    bucket_url = endpoint + "/" + bucket;
  } else {
    size_t scheme_end = endpoint.find("://");
    size_t host_start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
    bucket_url = endpoint.substr(0, host_start) + bucket + "." + endpoint.substr(host_start);
  }
}

std::string S3Store::Impl::ObjectUrl(std::string_view full_key) const {
  return bucket_url + "/" + PercentEncode(full_key, /*keep_slash=*/true);
}

std::string S3Store::Impl::Describe(std::string_view method, std::string_view key) const {
  return std::string(method) + " s3://" + bucket + "/" + prefix + std::string(key);
}

Status S3Store::Impl::ErrorFrom(const HttpResponse& response, const std::string& what) {
  s3::S3Error error = s3::ParseError(response.body);
  std::string detail = error.code.empty()
                           ? "HTTP " + std::to_string(response.status)
                           : error.code + (error.message.empty() ? "" : ": " + error.message);
  std::string message = what + ": " + detail;
  switch (response.status) {
    case 404:
      if (error.code == "NoSuchBucket") {
        return NotFoundError(what + ": bucket '" + bucket + "' does not exist (NoSuchBucket)");
      }
      if (error.code.empty() && !bucket_exists.load()) {
        // HEAD answers carry no body; tell a missing bucket from a missing key. Once the bucket
        // has been seen, a bodiless 404 is a missing key and costs no second request.
        HttpRequest probe;
        probe.method = "HEAD";
        probe.url = bucket_url + (options.path_style ? "" : "/");
        probe.description = "HEAD s3://" + bucket;
        auto bucket_head = http.Execute(probe);
        if (bucket_head.ok() && bucket_head->status == 404) {
          return NotFoundError(what + ": bucket '" + bucket + "' does not exist (NoSuchBucket)");
        }
        if (bucket_head.ok() && bucket_head->status == 200) bucket_exists = true;
        return NotFoundError(what + ": no such key (NoSuchKey)");
      }
      return NotFoundError(message);
    case 403: {
      std::string hint;
      if (error.code == "SignatureDoesNotMatch") hint = " (check AWS_SECRET_ACCESS_KEY)";
      if (error.code == "InvalidAccessKeyId") hint = " (check AWS_ACCESS_KEY_ID)";
      if (error.code.empty()) message = what + ": AccessDenied (HTTP 403)";
      return PermissionDeniedError(message + hint);
    }
    case 409:
      if (error.code == "BucketAlreadyExists" || error.code == "BucketAlreadyOwnedByYou") {
        return AlreadyExistsError(message);
      }
      return FailedPreconditionError(message);
    case 412:
      return FailedPreconditionError(message);
    case 416:
      return OutOfRangeError(message);
    default:
      if (response.status >= 400 && response.status < 500) return InvalidArgumentError(message);
      return InternalError(message + " (unexpected HTTP " + std::to_string(response.status) + ")");
  }
}

S3Store::S3Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
S3Store::~S3Store() = default;

Result<std::unique_ptr<S3Store>> S3Store::Open(std::string bucket, std::string prefix,
                                               const S3Options& options) {
  if (!ValidBucketName(bucket)) {
    return InvalidArgumentError("invalid S3 bucket name '" + bucket +
                                "': 3-63 characters of a-z, 0-9, '.', '-', starting and ending "
                                "with a letter or digit");
  }
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  if (!prefix.empty()) REEL_RETURN_IF_ERROR(ValidateKey(prefix.substr(0, prefix.size() - 1)));
  if (options.part_size < (5u << 20)) {
    return InvalidArgumentError("S3 part size must be at least 5 MiB (an S3 limit)");
  }
  if (options.max_attempts < 1 || options.parallelism < 1) {
    return InvalidArgumentError("S3 max_attempts and parallelism must be at least 1");
  }
  return std::unique_ptr<S3Store>(
      new S3Store(std::make_unique<Impl>(std::move(bucket), std::move(prefix), options)));
}

std::string S3Store::uri() const {
  std::string uri = "s3://" + impl_->bucket;
  if (!impl_->prefix.empty()) uri += "/" + impl_->prefix.substr(0, impl_->prefix.size() - 1);
  return uri;
}

S3Stats S3Store::stats() const { return impl_->http.stats(); }
const S3Options& S3Store::options() const { return impl_->options; }

Status S3Store::Put(std::string_view key, std::string_view data) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  if (data.size() >= impl_->options.multipart_threshold) {
    return s3::UploadMultipart(*impl_, key, data);
  }
  return s3::PutSingle(*impl_, key, data, /*if_absent=*/false);
}

Status S3Store::PutIfAbsent(std::string_view key, std::string_view data) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  if (data.size() > (5ull << 30)) {
    return InvalidArgumentError("PutIfAbsent of '" + std::string(key) +
                                "': objects over 5 GiB cannot be created atomically on S3");
  }
  return s3::PutSingle(*impl_, key, data, /*if_absent=*/true);
}

Result<std::string> S3Store::Get(std::string_view key, ObjectInfo* info) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  return s3::GetWhole(*impl_, key, info);
}

Result<std::string> S3Store::GetRange(std::string_view key, uint64_t offset, uint64_t length) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  return s3::GetPart(*impl_, key, offset, length);
}

Result<ObjectInfo> S3Store::Head(std::string_view key) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  return s3::HeadObject(*impl_, key);
}

Result<ListPage> S3Store::List(const ListOptions& options) {
  if (options.max_keys < 1 || options.max_keys > 1000) {
    return InvalidArgumentError("list: max_keys must be between 1 and 1000, got " +
                                std::to_string(options.max_keys));
  }
  std::vector<std::pair<std::string, std::string>> params = {{"list-type", "2"}};
  if (!options.page_token.empty()) params.emplace_back("continuation-token", options.page_token);
  if (!options.delimiter.empty()) params.emplace_back("delimiter", options.delimiter);
  params.emplace_back("max-keys", std::to_string(options.max_keys));
  params.emplace_back("prefix", impl_->prefix + options.prefix);
  HttpRequest request;
  request.url = impl_->bucket_url + (impl_->options.path_style ? "" : "/");
  request.query = s3::CanonicalQuery(std::move(params));
  request.description = "LIST " + uri() + "/" + options.prefix;
  REEL_ASSIGN_OR_RETURN(HttpResponse response, impl_->http.Execute(request));
  if (response.status != 200) {
    if (response.status == 400 && !options.page_token.empty()) {
      return InvalidArgumentError(request.description + ": the server refused page token '" +
                                  options.page_token + "'");
    }
    return impl_->ErrorFrom(response, request.description);
  }
  REEL_ASSIGN_OR_RETURN(s3::ListResult parsed, s3::ParseListObjectsV2(response.body));
  ListPage page;
  size_t strip = impl_->prefix.size();
  for (auto& object : parsed.objects) {
    if (object.key.size() <= strip) continue;  // the prefix itself, if someone stored it
    object.key = object.key.substr(strip);
    page.objects.push_back(std::move(object));
  }
  for (auto& common : parsed.common_prefixes) page.common_prefixes.push_back(common.substr(strip));
  if (parsed.truncated) page.next_page_token = parsed.next_token;
  return page;
}

Status S3Store::Delete(std::string_view key) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  HttpRequest request;
  request.method = "DELETE";
  request.url = impl_->ObjectUrl(impl_->prefix + std::string(key));
  request.description = impl_->Describe("DELETE", key);
  REEL_ASSIGN_OR_RETURN(HttpResponse response, impl_->http.Execute(request));
  if (response.status == 204 || response.status == 200) return Status::Ok();
  if (response.status == 404 && s3::ParseError(response.body).code == "NoSuchKey") {
    return Status::Ok();
  }
  return impl_->ErrorFrom(response, request.description);
}

Result<std::unique_ptr<ObjectReader>> S3Store::OpenReader(std::string_view key) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  return s3::OpenObjectReader(*impl_, key);
}

Result<std::unique_ptr<ObjectWriter>> S3Store::OpenWriter(std::string_view key) {
  REEL_RETURN_IF_ERROR(ValidateKey(key));
  return s3::OpenObjectWriter(*impl_, key);
}

Status S3Store::CreateBucket() {
  HttpRequest request;
  request.method = "PUT";
  request.url = impl_->bucket_url + (impl_->options.path_style ? "" : "/");
  request.description = "CREATE BUCKET s3://" + impl_->bucket;
  std::string body;
  if (impl_->options.region != "us-east-1") {
    body = "<CreateBucketConfiguration><LocationConstraint>" + impl_->options.region +
           "</LocationConstraint></CreateBucketConfiguration>";
  }
  request.body = body;
  REEL_ASSIGN_OR_RETURN(HttpResponse response, impl_->http.Execute(request));
  if (response.status == 200) return Status::Ok();
  return impl_->ErrorFrom(response, request.description);
}

Status S3Store::DeleteBucket() {
  HttpRequest request;
  request.method = "DELETE";
  request.url = impl_->bucket_url + (impl_->options.path_style ? "" : "/");
  request.description = "DELETE BUCKET s3://" + impl_->bucket;
  REEL_ASSIGN_OR_RETURN(HttpResponse response, impl_->http.Execute(request));
  if (response.status == 204 || response.status == 200) return Status::Ok();
  return impl_->ErrorFrom(response, request.description);
}

}  // namespace reel::storage
