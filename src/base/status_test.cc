#include "base/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <string>

namespace reel {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(s, Status::Ok());
}

TEST(StatusTest, OkCodeDropsMessage) {
  Status s(StatusCode::kOk, "ignored");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
}

TEST(StatusTest, ToStringNamesCodeAndMessage) {
  EXPECT_EQ(NotFoundError("s3://b/k: NoSuchKey").ToString(), "NotFound: s3://b/k: NoSuchKey");
  EXPECT_EQ(InvalidArgumentError("bad").ToString(), "InvalidArgument: bad");
}

TEST(StatusTest, ConstructorsSetCodes) {
  EXPECT_EQ(CancelledError("x").code(), StatusCode::kCancelled);
  EXPECT_EQ(InvalidArgumentError("x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(NotFoundError("x").code(), StatusCode::kNotFound);
  EXPECT_EQ(AlreadyExistsError("x").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(PermissionDeniedError("x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ResourceExhaustedError("x").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(FailedPreconditionError("x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(OutOfRangeError("x").code(), StatusCode::kOutOfRange);
  EXPECT_EQ(UnimplementedError("x").code(), StatusCode::kUnimplemented);
  EXPECT_EQ(InternalError("x").code(), StatusCode::kInternal);
  EXPECT_EQ(UnavailableError("x").code(), StatusCode::kUnavailable);
  EXPECT_EQ(DataLossError("x").code(), StatusCode::kDataLoss);
  EXPECT_EQ(DeadlineExceededError("x").code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(StatusCodeName(StatusCode::kDeadlineExceeded), "DeadlineExceeded");
}

TEST(StatusTest, WithContextPrefixesMessageAndKeepsCode) {
  Status s = NotFoundError("no such key").WithContext("get s3://b/k");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "get s3://b/k: no such key");
  EXPECT_TRUE(Status::Ok().WithContext("ignored").ok());
  EXPECT_EQ(Status::Ok().WithContext("ignored").message(), "");
}

TEST(StatusTest, EqualityComparesCodeAndMessage) {
  EXPECT_EQ(NotFoundError("a"), NotFoundError("a"));
  EXPECT_FALSE(NotFoundError("a") == NotFoundError("b"));
  EXPECT_FALSE(NotFoundError("a") == InternalError("a"));
}

TEST(StatusTest, ErrnoMapping) {
  EXPECT_EQ(ErrnoToStatus(ENOENT, "open x").code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoToStatus(EACCES, "open x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoToStatus(EPERM, "open x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoToStatus(ENOSPC, "write").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoToStatus(EMFILE, "open").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoToStatus(EEXIST, "mkdir").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(ErrnoToStatus(ECONNREFUSED, "connect").code(), StatusCode::kUnavailable);
  EXPECT_EQ(ErrnoToStatus(EIO, "read").code(), StatusCode::kDataLoss);
  EXPECT_EQ(ErrnoToStatus(ENOENT, "open x").message(), "open x: No such file or directory");
}

TEST(ResultTest, HoldsValue) {
  Result<int> r = 42;
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.status().ok());
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
  ASSERT_TRUE(r.ok());
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
  EXPECT_TRUE(CheckEven(4).ok());
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
