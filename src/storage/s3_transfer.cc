#include "storage/s3_transfer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "base/allocator.h"
#include "base/hash.h"
#include "base/logging.h"
#include "base/uri.h"
#include "storage/s3_xml.h"

namespace reel::storage::s3 {
namespace {

std::string FullKey(const S3Store::Impl& impl, std::string_view key) {
  return impl.prefix + std::string(key);
}

std::string Unquote(std::string etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return etag;
}

std::string RangeHeader(uint64_t offset, uint64_t length) {
  return "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + length - 1);
}

// "bytes 0-99/1234" -> 1234; 0 when absent or malformed.
uint64_t TotalFromContentRange(const std::string& header) {
  size_t slash = header.rfind('/');
  if (slash == std::string::npos) return 0;
  return std::strtoull(header.c_str() + slash + 1, nullptr, 10);
}

ObjectInfo InfoFromHeaders(std::string_view key, const HttpResponse& response, uint64_t size) {
  ObjectInfo info;
  info.key = std::string(key);
  info.size = size;
  info.etag = Unquote(response.Header("etag"));
  info.mtime_ms = ParseHttpDateMs(response.Header("last-modified"));
  return info;
}

Status ParallelFor(S3Store::Impl& impl, size_t n, const std::function<Status(size_t)>& fn) {
  return reel::ParallelFor(impl.pool, static_cast<size_t>(impl.options.parallelism), n, fn);
}

// One ranged GET of exactly `length` bytes into `dest`, pinned to `etag` when given.
Status FetchRange(S3Store::Impl& impl, std::string_view key, uint64_t offset, uint64_t length,
                  const std::string& etag, char* dest) {
  HttpRequest request;
  request.url = impl.ObjectUrl(FullKey(impl, key));
  request.headers.emplace_back("Range", RangeHeader(offset, length));
  if (!etag.empty()) request.headers.emplace_back("If-Match", "\"" + etag + "\"");
  request.sink = dest;
  request.sink_capacity = length;
  request.description = impl.Describe("GET", key) + " [" + std::to_string(offset) + ", " +
                        std::to_string(offset + length) + ")";
  REEL_ASSIGN_OR_RETURN(HttpResponse response, impl.http.Execute(request));
  if (response.status == 206 || (response.status == 200 && offset == 0)) {
    if (response.sink_bytes != length) {
      return DataLossError(request.description + ": got " + std::to_string(response.sink_bytes) +
                           " of " + std::to_string(length) + " bytes");
    }
    return Status::Ok();
  }
  if (response.status == 412) {
    return DataLossError(request.description +
                         ": the object changed while being read (ETag is "
                         "no longer '" +
                         etag + "')");
  }
  return impl.ErrorFrom(response, request.description);
}

// Fills dest[0, length) with the object's bytes [offset, offset + length) in part-size ranges.
Status FetchParallel(S3Store::Impl& impl, std::string_view key, uint64_t offset, uint64_t length,
                     const std::string& etag, char* dest) {
  uint64_t chunk = impl.options.part_size;
  size_t n = static_cast<size_t>((length + chunk - 1) / chunk);
  return ParallelFor(impl, n, [&](size_t i) {
    uint64_t start = i * chunk;
    return FetchRange(impl, key, offset + start, std::min(chunk, length - start), etag,
                      dest + start);
  });
}

class MultipartUpload {
 public:
  static Result<std::unique_ptr<MultipartUpload>> Start(S3Store::Impl& impl, std::string_view key) {
    HttpRequest request;
    request.method = "POST";
    request.url = impl.ObjectUrl(FullKey(impl, key));
    request.query = CanonicalQuery({{"uploads", ""}});
    request.headers.emplace_back("Content-Type", "application/octet-stream");
    request.description = impl.Describe("CREATE MULTIPART UPLOAD", key);
    REEL_ASSIGN_OR_RETURN(HttpResponse response, impl.http.Execute(request));
    if (response.status != 200) return impl.ErrorFrom(response, request.description);
    std::string upload_id = XmlText(response.body, "UploadId");
    if (upload_id.empty()) {
      return InternalError(request.description +
                           ": answer has no UploadId: " + response.body.substr(0, 200));
    }
    return std::unique_ptr<MultipartUpload>(new MultipartUpload(impl, key, std::move(upload_id)));
  }

  ~MultipartUpload() {
    if (!finished_) Abort();
  }

  // Returns the part's ETag after checking it is the MD5 of what was sent.
  Result<std::string> UploadPart(int number, std::string_view data) {
    HttpRequest request;
    request.method = "PUT";
    request.url = impl_.ObjectUrl(FullKey(impl_, key_));
    request.query = CanonicalQuery({{"partNumber", std::to_string(number)}, {"uploadId", id_}});
    request.body = data;
    if (impl_.options.content_md5) request.headers.emplace_back("Content-MD5", Md5Base64(data));
    request.description = impl_.Describe("PUT", key_) + " part " + std::to_string(number);
    REEL_ASSIGN_OR_RETURN(HttpResponse response, impl_.http.Execute(request));
    if (response.status != 200) return impl_.ErrorFrom(response, request.description);
    return Unquote(response.Header("etag"));
  }

  Status Complete(const std::vector<std::string>& part_etags) {
    std::string body = CompleteMultipartXml(part_etags);
    HttpRequest request;
    request.method = "POST";
    request.url = impl_.ObjectUrl(FullKey(impl_, key_));
    request.query = CanonicalQuery({{"uploadId", id_}});
    request.body = body;
    request.headers.emplace_back("Content-Type", "application/xml");
    request.description = impl_.Describe("COMPLETE MULTIPART UPLOAD", key_);
    REEL_ASSIGN_OR_RETURN(HttpResponse response, impl_.http.Execute(request));
    // S3 may answer 200 with an <Error> document when completion fails late.
    if (response.status != 200 || !ParseError(response.body).code.empty()) {
      if (response.status == 200) response.status = 500;
      return impl_.ErrorFrom(response, request.description);
    }
    finished_ = true;
    return Status::Ok();
  }

  // Frees the parts on the server; failures are logged, since the caller already has an error.
  void Abort() {
    finished_ = true;
    HttpRequest request;
    request.method = "DELETE";
    request.url = impl_.ObjectUrl(FullKey(impl_, key_));
    request.query = CanonicalQuery({{"uploadId", id_}});
    request.description = impl_.Describe("ABORT MULTIPART UPLOAD", key_);
    auto response = impl_.http.Execute(request);
    if (!response.ok() || (response->status != 204 && response->status != 200)) {
      Logger("storage")->warn(
          "{}: could not abort upload {}: {}", request.description, id_,
          response.ok() ? std::to_string(response->status) : response.status().ToString());
    }
  }

 private:
  MultipartUpload(S3Store::Impl& impl, std::string_view key, std::string id)
      : impl_(impl), key_(key), id_(std::move(id)) {}

  S3Store::Impl& impl_;
  std::string key_;
  std::string id_;
  bool finished_ = false;
};

class S3Reader : public ObjectReader {
 public:
  S3Reader(S3Store::Impl& impl, std::string key, ObjectInfo info)
      : impl_(impl), key_(std::move(key)), info_(std::move(info)) {}

  ~S3Reader() override {
    for (auto& pending : ahead_) pending.wait();
  }

  Result<size_t> Read(char* buffer, size_t n) override {
    if (position_ == current_.size()) {
      // Keep `parallelism` chunks in flight ahead of the reader.
      while (ahead_.size() < static_cast<size_t>(impl_.options.parallelism) &&
             next_offset_ < info_.size) {
        uint64_t offset = next_offset_;
        uint64_t length = std::min<uint64_t>(impl_.options.part_size, info_.size - offset);
        next_offset_ += length;
        ahead_.push_back(impl_.pool.Submit([this, offset, length]() -> Result<std::string> {
          std::string chunk(length, '\0');
          REEL_RETURN_IF_ERROR(FetchRange(impl_, key_, offset, length, info_.etag, chunk.data()));
          return chunk;
        }));
      }
      if (ahead_.empty()) return size_t{0};
      Result<std::string> chunk = ahead_.front().get();
      ahead_.pop_front();
      if (!chunk.ok()) return chunk.status();
      current_ = std::move(chunk).value();
      position_ = 0;
    }
    size_t take = std::min(n, current_.size() - position_);
    std::memcpy(buffer, current_.data() + position_, take);
    position_ += take;
    return take;
  }

  uint64_t size() const override { return info_.size; }

 private:
  S3Store::Impl& impl_;
  std::string key_;
  ObjectInfo info_;
  uint64_t next_offset_ = 0;
  std::deque<std::future<Result<std::string>>> ahead_;
  std::string current_;
  size_t position_ = 0;
};

// Buffers up to the multipart threshold; past it, streams part-size parts with at most
// `parallelism` in flight, so memory stays near threshold + parallelism * part size.
class S3Writer : public ObjectWriter {
 public:
  S3Writer(S3Store::Impl& impl, std::string key) : impl_(impl), key_(std::move(key)) {}

  ~S3Writer() override {
    for (auto& pending : in_flight_) pending.wait();
    // upload_'s destructor aborts an unfinished upload.
  }

  Status Write(std::string_view data) override {
    if (closed_) return FailedPreconditionError("write to a closed writer for '" + key_ + "'");
    REEL_RETURN_IF_ERROR(error_);
    buffer_.append(data);
    if (!upload_ && buffer_.size() >= impl_.options.multipart_threshold) {
      auto upload = MultipartUpload::Start(impl_, key_);
      if (!upload.ok()) return error_ = upload.status();
      upload_ = std::move(upload).value();
    }
    if (upload_) SubmitFullParts();
    return error_;
  }

  Status Close() override {
    if (closed_) return FailedPreconditionError("writer for '" + key_ + "' closed twice");
    closed_ = true;
    REEL_RETURN_IF_ERROR(error_);
    if (!upload_) return PutSingle(impl_, key_, buffer_, /*if_absent=*/false);
    if (!buffer_.empty()) SubmitPart(std::move(buffer_));
    while (!in_flight_.empty()) CollectOldest();
    REEL_RETURN_IF_ERROR(error_);
    return upload_->Complete(etags_);
  }

 private:
  void SubmitFullParts() {
    size_t part = impl_.options.part_size;
    size_t offset = 0;
    while (error_.ok() && buffer_.size() - offset >= part) {
      SubmitPart(buffer_.substr(offset, part));
      offset += part;
    }
    buffer_.erase(0, offset);
  }

  void SubmitPart(std::string data) {
    while (in_flight_.size() >= static_cast<size_t>(impl_.options.parallelism)) CollectOldest();
    int number = ++parts_submitted_;
    auto part = std::make_shared<std::string>(std::move(data));
    MultipartUpload* upload = upload_.get();
    in_flight_.push_back(
        impl_.pool.Submit([upload, number, part]() { return upload->UploadPart(number, *part); }));
  }

  void CollectOldest() {
    Result<std::string> etag = in_flight_.front().get();
    in_flight_.pop_front();
    if (!etag.ok()) {
      if (error_.ok()) error_ = etag.status();
      return;
    }
    etags_.push_back(std::move(etag).value());
  }

  S3Store::Impl& impl_;
  std::string key_;
  std::string buffer_;
  std::unique_ptr<MultipartUpload> upload_;
  std::deque<std::future<Result<std::string>>> in_flight_;
  std::vector<std::string> etags_;
  int parts_submitted_ = 0;
  Status error_;
  bool closed_ = false;
};

}  // namespace

std::string CanonicalQuery(std::vector<std::pair<std::string, std::string>> params) {
  for (auto& [name, value] : params) {
    name = PercentEncode(name, /*keep_slash=*/false);
    value = PercentEncode(value, /*keep_slash=*/false);
  }
  std::sort(params.begin(), params.end());
  std::string query;
  for (const auto& [name, value] : params) {
    if (!query.empty()) query += '&';
    query += name + "=" + value;
  }
  return query;
}

Status PutSingle(S3Store::Impl& impl, std::string_view key, std::string_view data, bool if_absent) {
  // The MD5 is needed for Content-MD5 (the server refuses bytes that do not match it) and for
  // recognising our own write after a retried PutIfAbsent.
  const bool need_md5 = impl.options.content_md5 || if_absent;
  std::string md5_raw = need_md5 ? Md5Raw(data) : std::string();
  HttpRequest request;
  request.method = "PUT";
  request.url = impl.ObjectUrl(FullKey(impl, key));
  request.body = data;
  if (need_md5) request.headers.emplace_back("Content-MD5", Base64Encode(md5_raw));
  request.headers.emplace_back("Content-Type", "application/octet-stream");
  if (if_absent) request.headers.emplace_back("If-None-Match", "*");
  request.description = impl.Describe("PUT", key);
  bool retried = false;
  for (int attempt = 1;; ++attempt) {
    REEL_ASSIGN_OR_RETURN(HttpResponse response, impl.http.Execute(request));
    retried = retried || response.attempts > 1;
    if (response.status == 200) return Status::Ok();
    if (!if_absent) return impl.ErrorFrom(response, request.description);
    if (response.status == 412) {
      // After a retry, the 412 may answer our own earlier attempt that succeeded unseen.
      if (retried) {
        auto head = HeadObject(impl, key);
        if (head.ok() && head->etag == HexEncode(md5_raw)) return Status::Ok();
      }
      return AlreadyExistsError(request.description + ": key '" + std::string(key) +
                                "' already exists");
    }
    // AWS answers 409 while a competing conditional write is in flight: ask again, and the
    // winner's object will answer 412.
    if (response.status == 409 && ParseError(response.body).code == "ConditionalRequestConflict" &&
        attempt < impl.options.max_attempts) {
      std::this_thread::sleep_for(std::chrono::milliseconds(impl.options.initial_backoff_ms));
      continue;
    }
    return impl.ErrorFrom(response, request.description);
  }
}

Status UploadMultipart(S3Store::Impl& impl, std::string_view key, std::string_view data) {
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<MultipartUpload> upload, MultipartUpload::Start(impl, key));
  uint64_t part = impl.options.part_size;
  size_t n = static_cast<size_t>((data.size() + part - 1) / part);
  std::vector<std::string> etags(n);
  REEL_RETURN_IF_ERROR(ParallelFor(impl, n, [&](size_t i) -> Status {
    REEL_ASSIGN_OR_RETURN(etags[i],
                          upload->UploadPart(static_cast<int>(i + 1), data.substr(i * part, part)));
    return Status::Ok();
  }));
  return upload->Complete(etags);
}

Result<std::string> GetWhole(S3Store::Impl& impl, std::string_view key, ObjectInfo* info) {
  // The first range also tells the size and ETag, so small objects cost one request and large
  // ones need no separate HEAD before the parallel ranges. It lands in the response body, which
  // grows with what arrives, so a tiny object does not cost a part-size buffer.
  uint64_t chunk = impl.options.part_size;
  HttpRequest request;
  request.url = impl.ObjectUrl(FullKey(impl, key));
  request.headers.emplace_back("Range", RangeHeader(0, chunk));
  request.description = impl.Describe("GET", key);
  REEL_ASSIGN_OR_RETURN(HttpResponse response, impl.http.Execute(request));
  uint64_t total = 0;
  if (response.status == 206) {
    total = TotalFromContentRange(response.Header("content-range"));
  } else if (response.status == 200) {
    total = response.body.size();  // the server ignored the range: this is the whole object
  } else if (response.status == 416) {
    // An empty object has no byte 0; read it plainly.
    request.headers.clear();
    REEL_ASSIGN_OR_RETURN(response, impl.http.Execute(request));
    if (response.status != 200) return impl.ErrorFrom(response, request.description);
    total = response.body.size();
  } else {
    return impl.ErrorFrom(response, request.description);
  }
  if (info) *info = InfoFromHeaders(key, response, total);
  uint64_t first_length = std::min(chunk, total);
  if (response.status == 200) first_length = total;
  if (response.body.size() != first_length) {
    return DataLossError(request.description + ": got " + std::to_string(response.body.size()) +
                         " of " + std::to_string(first_length) + " bytes");
  }
  std::string data = std::move(response.body);
  if (first_length == total) return data;
  const std::string etag = Unquote(response.Header("etag"));
  Status fetched;
  AppendInPlace(&data, total - first_length, [&](char* dest, size_t n) {
    fetched = FetchParallel(impl, key, first_length, n, etag, dest);
    return n;  // on a failure the bytes are not used
  });
  REEL_RETURN_IF_ERROR(fetched);
  return data;
}

Result<std::string> GetPart(S3Store::Impl& impl, std::string_view key, uint64_t offset,
                            uint64_t length) {
  auto out_of_range = [&](uint64_t size) {
    return OutOfRangeError(impl.Describe("GET", key) + ": range starts at " +
                           std::to_string(offset) + ", past the end of the object (" +
                           std::to_string(size) + " bytes)");
  };
  if (length == 0 || length > impl.options.part_size) {
    REEL_ASSIGN_OR_RETURN(ObjectInfo head, HeadObject(impl, key));
    if (offset > head.size) return out_of_range(head.size);
    length = std::min(length, head.size - offset);
    std::string data;
    Status fetched;
    AppendInPlace(&data, length, [&](char* dest, size_t n) {
      fetched = FetchParallel(impl, key, offset, n, head.etag, dest);
      return n;  // on a failure the bytes are not used
    });
    REEL_RETURN_IF_ERROR(fetched);
    return data;
  }
  HttpRequest request;
  request.url = impl.ObjectUrl(FullKey(impl, key));
  request.headers.emplace_back("Range", RangeHeader(offset, length));
  request.sink_capacity = length;
  request.description = impl.Describe("GET", key);
  std::string data;
  Result<HttpResponse> sent = InternalError("not sent");
  AppendInPlace(&data, length, [&](char* dest, size_t) {
    request.sink = dest;
    sent = impl.http.Execute(request);
    // The server clips a range at the end of the object.
    return sent.ok() && sent->status == 206 ? sent->sink_bytes : 0;
  });
  REEL_ASSIGN_OR_RETURN(HttpResponse response, std::move(sent));
  if (response.status == 206) return data;
  if (response.status == 200) {  // range ignored: the whole object came back
    return impl.ErrorFrom(response, request.description + ": the server ignored the Range header");
  }
  if (response.status == 416) {
    REEL_ASSIGN_OR_RETURN(ObjectInfo head, HeadObject(impl, key));
    if (offset == head.size) return std::string();
    return out_of_range(head.size);
  }
  return impl.ErrorFrom(response, request.description);
}

Result<ObjectInfo> HeadObject(S3Store::Impl& impl, std::string_view key) {
  HttpRequest request;
  request.method = "HEAD";
  request.url = impl.ObjectUrl(FullKey(impl, key));
  request.description = impl.Describe("HEAD", key);
  REEL_ASSIGN_OR_RETURN(HttpResponse response, impl.http.Execute(request));
  if (response.status != 200) return impl.ErrorFrom(response, request.description);
  uint64_t size = std::strtoull(response.Header("content-length").c_str(), nullptr, 10);
  return InfoFromHeaders(key, response, size);
}

Result<std::unique_ptr<ObjectReader>> OpenObjectReader(S3Store::Impl& impl, std::string_view key) {
  REEL_ASSIGN_OR_RETURN(ObjectInfo info, HeadObject(impl, key));
  return std::unique_ptr<ObjectReader>(
      std::make_unique<S3Reader>(impl, std::string(key), std::move(info)));
}

Result<std::unique_ptr<ObjectWriter>> OpenObjectWriter(S3Store::Impl& impl, std::string_view key) {
  return std::unique_ptr<ObjectWriter>(std::make_unique<S3Writer>(impl, std::string(key)));
}

}  // namespace reel::storage::s3
