// Errors as values. Every function that can fail because of the world (a missing file, a refused
// connection, a corrupt object) returns Status or Result<T>; bugs are asserted, not returned.
// Codes follow absl/gRPC so that they mean the same thing at every module boundary.
//
// Thread-safety: Status and Result are values; distinct objects may be used from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "base/check.h"

namespace reel {

enum class StatusCode {
  kOk = 0,
  kCancelled,
  kInvalidArgument,     // the caller asked for something malformed; retrying will not help
  kNotFound,            // a file, object, bucket or key does not exist
  kAlreadyExists,       // create-if-absent lost the race, or the target exists
  kPermissionDenied,    // credentials refused, signature mismatch, file mode
  kResourceExhausted,   // disk full, quota, too many open files
  kFailedPrecondition,  // the system is not in a state where this works (e.g. not a directory)
  kOutOfRange,          // a read past the end of an object
  kUnimplemented,
  kInternal,     // an invariant of a dependency broke; the message says which
  kUnavailable,  // a server or network could not be reached; retrying later may help
  kDataLoss,     // stored bytes are corrupt or truncated
  kDeadlineExceeded,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "NotFound: s3://b/k: NoSuchKey: The specified key does not exist."
  std::string ToString() const;

  // Returns a copy whose message is "context: message" (no-op when OK). Used to add the file,
  // key or operation as an error travels up.
  Status WithContext(std::string_view context) const;

  // Drops this status on purpose. Every call site says why in a comment; Status is [[nodiscard]]
  // so that no error is dropped by accident.
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

Status CancelledError(std::string message);
Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status AlreadyExistsError(std::string message);
Status PermissionDeniedError(std::string message);
Status ResourceExhaustedError(std::string message);
Status FailedPreconditionError(std::string message);
Status OutOfRangeError(std::string message);
Status UnimplementedError(std::string message);
Status InternalError(std::string message);
Status UnavailableError(std::string message);
Status DataLossError(std::string message);
Status DeadlineExceededError(std::string message);

// An errno value after a failed system call, mapped to the closest code:
// ENOENT -> NotFound, EACCES/EPERM -> PermissionDenied, ENOSPC/EMFILE -> ResourceExhausted, ...
Status ErrnoToStatus(int err, std::string_view context);

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : state_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    REEL_CHECK(!std::get<Status>(state_).ok()) << "a Result built from an OK status has no value";
  }

  bool ok() const { return std::holds_alternative<T>(state_); }
  const Status& status() const& {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(state_);
  }
  // By value on a temporary, so `const auto& s = F().status();` holds no dangling reference.
  Status status() && { return ok() ? Status() : std::get<Status>(std::move(state_)); }

  T& value() & {
    REEL_CHECK(ok()) << "value() of an error Result: " << std::get<Status>(state_).ToString();
    return std::get<T>(state_);
  }
  const T& value() const& {
    REEL_CHECK(ok()) << "value() of an error Result: " << std::get<Status>(state_).ToString();
    return std::get<T>(state_);
  }
  T&& value() && {
    REEL_CHECK(ok()) << "value() of an error Result: " << std::get<Status>(state_).ToString();
    return std::get<T>(std::move(state_));
  }
  T value_or(T fallback) const& { return ok() ? std::get<T>(state_) : std::move(fallback); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> state_;
};

namespace internal {
inline const Status& AsStatus(const Status& s) { return s; }
template <typename T>
const Status& AsStatus(const Result<T>& r) {
  return r.status();
}
}  // namespace internal

}  // namespace reel

#define REEL_CONCAT_INNER(a, b) a##b
#define REEL_CONCAT(a, b) REEL_CONCAT_INNER(a, b)

// Returns from the current function with the error of a Status or Result expression.
#define REEL_RETURN_IF_ERROR(expr)                                \
  do {                                                            \
    const auto& reel_status_or_result_ = (expr);                  \
    if (!::reel::internal::AsStatus(reel_status_or_result_).ok()) \
      return ::reel::internal::AsStatus(reel_status_or_result_);  \
  } while (0)

// REEL_ASSIGN_OR_RETURN(auto x, Foo());  — x gets the value, or the error is returned. `lhs` is a
// declaration, which parentheses would break.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define REEL_ASSIGN_OR_RETURN(lhs, expr) \
  REEL_ASSIGN_OR_RETURN_IMPL(REEL_CONCAT(reel_result_, __LINE__), lhs, expr)
#define REEL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
