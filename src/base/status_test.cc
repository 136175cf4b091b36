#include "base/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <string>

#include "testing/status_matchers.h"

namespace reel {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_OK(s);
  EXPECT_STATUS(s, StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(s, Status::Ok());
}

TEST(StatusTest, OkCodeDropsMessage) {
  Status s(StatusCode::kOk, "ignored");
  EXPECT_OK(s);
  EXPECT_EQ(s.message(), "");
}

TEST(StatusTest, ToStringNamesCodeAndMessage) {
  EXPECT_EQ(NotFoundError("s3://b/k: NoSuchKey").ToString(), "NotFound: s3://b/k: NoSuchKey");
  EXPECT_EQ(InvalidArgumentError("bad").ToString(), "InvalidArgument: bad");
}

TEST(StatusTest, ConstructorsSetCodes) {
  EXPECT_STATUS(CancelledError("x"), StatusCode::kCancelled);
  EXPECT_STATUS(InvalidArgumentError("x"), StatusCode::kInvalidArgument);
  EXPECT_STATUS(NotFoundError("x"), StatusCode::kNotFound);
  EXPECT_STATUS(AlreadyExistsError("x"), StatusCode::kAlreadyExists);
  EXPECT_STATUS(PermissionDeniedError("x"), StatusCode::kPermissionDenied);
  EXPECT_STATUS(ResourceExhaustedError("x"), StatusCode::kResourceExhausted);
  EXPECT_STATUS(FailedPreconditionError("x"), StatusCode::kFailedPrecondition);
  EXPECT_STATUS(OutOfRangeError("x"), StatusCode::kOutOfRange);
  EXPECT_STATUS(UnimplementedError("x"), StatusCode::kUnimplemented);
  EXPECT_STATUS(InternalError("x"), StatusCode::kInternal);
  EXPECT_STATUS(UnavailableError("x"), StatusCode::kUnavailable);
  EXPECT_STATUS(DataLossError("x"), StatusCode::kDataLoss);
  EXPECT_STATUS(DeadlineExceededError("x"), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(StatusCodeName(StatusCode::kDeadlineExceeded), "DeadlineExceeded");
}

TEST(StatusTest, WithContextPrefixesMessageAndKeepsCode) {
  Status s = NotFoundError("no such key").WithContext("get s3://b/k");
  EXPECT_STATUS(s, StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "get s3://b/k: no such key");
  EXPECT_OK(Status::Ok().WithContext("ignored"));
  EXPECT_EQ(Status::Ok().WithContext("ignored").message(), "");
}

TEST(StatusTest, EqualityComparesCodeAndMessage) {
  EXPECT_EQ(NotFoundError("a"), NotFoundError("a"));
  EXPECT_FALSE(NotFoundError("a") == NotFoundError("b"));
  EXPECT_FALSE(NotFoundError("a") == InternalError("a"));
}

TEST(StatusTest, ErrnoMapping) {
  EXPECT_STATUS(ErrnoToStatus(ENOENT, "open x"), StatusCode::kNotFound);
  EXPECT_STATUS(ErrnoToStatus(EACCES, "open x"), StatusCode::kPermissionDenied);
  EXPECT_STATUS(ErrnoToStatus(EPERM, "open x"), StatusCode::kPermissionDenied);
  EXPECT_STATUS(ErrnoToStatus(ENOSPC, "write"), StatusCode::kResourceExhausted);
  EXPECT_STATUS(ErrnoToStatus(EMFILE, "open"), StatusCode::kResourceExhausted);
  EXPECT_STATUS(ErrnoToStatus(EEXIST, "mkdir"), StatusCode::kAlreadyExists);
  EXPECT_STATUS(ErrnoToStatus(ECONNREFUSED, "connect"), StatusCode::kUnavailable);
  EXPECT_STATUS(ErrnoToStatus(EIO, "read"), StatusCode::kDataLoss);
  EXPECT_EQ(ErrnoToStatus(ENOENT, "open x").message(), "open x: No such file or directory");
}

TEST(ResultTest, HoldsValue) {
  Result<int> r = 42;
  ASSERT_OK(r);
  EXPECT_OK(r.status());
  EXPECT_EQ(*r, 42);
  EXPECT_EQ(r.value_or(7), 42);
}

TEST(ResultTest, HoldsError) {
  Result<int> r = NotFoundError("gone");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status(), NotFoundError("gone"));
  EXPECT_EQ(r.value_or(7), 7);
}

TEST(ResultTest, MoveOnlyValue) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(5);
  ASSERT_OK(r);
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 5);
}

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  REEL_ASSIGN_OR_RETURN(int half, Half(x));
  REEL_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

Status CheckEven(int x) {
  REEL_RETURN_IF_ERROR(Half(x));
  return Status::Ok();
}

TEST(ResultTest, MacrosPropagateErrors) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status(), InvalidArgumentError("odd"));  // 6/2 = 3 is odd
  EXPECT_EQ(Quarter(5).status(), InvalidArgumentError("odd"));
  EXPECT_OK(CheckEven(4));
  EXPECT_EQ(CheckEven(3), InvalidArgumentError("odd"));
}

}  // namespace
}  // namespace reel

#include "base/strings.h"

namespace reel {
namespace {

TEST(PrintableForMessageTest, EscapesControlBytesAndCuts) {
  EXPECT_EQ(PrintableForMessage("ok"), "ok");
  EXPECT_EQ(PrintableForMessage(std::string("a\0b\n", 4)), "a\\x00b\\x0a");
  EXPECT_EQ(PrintableForMessage("abcdef", 3), "abc...");
}

}  // namespace
}  // namespace reel
