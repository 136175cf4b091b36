// gtest assertions for Status and Result<T>, printing the error when they fail:
//   EXPECT_OK(store->Put("k", "v"));
//   ASSERT_OK(result) << "while writing " << key;
//   ASSERT_OK_AND_ASSIGN(auto reader, store->OpenReader("k"));
//   EXPECT_STATUS(store->Get("missing"), StatusCode::kNotFound);
// Tests only.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "base/status.h"

namespace reel::testing::internal {

inline const Status& StatusOf(const Status& s) { return s; }
template <typename T>
const Status& StatusOf(const Result<T>& r) {
  return r.status();
}

template <typename T>
::testing::AssertionResult IsOk(const char* text, const T& value) {
  const Status& status = StatusOf(value);
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << text << " is not OK: " << status.ToString();
}

template <typename T>
::testing::AssertionResult HasCode(const char* text, const char* code_text, const T& value,
                                   StatusCode code) {
  const Status& status = StatusOf(value);
  if (status.code() == code) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << text << " is " << (status.ok() ? std::string("OK") : status.ToString()) << ", expected "
         << StatusCodeName(code) << " (" << code_text << ")";
}

}  // namespace reel::testing::internal

#define EXPECT_OK(expr) EXPECT_PRED_FORMAT1(::reel::testing::internal::IsOk, (expr))
#define ASSERT_OK(expr) ASSERT_PRED_FORMAT1(::reel::testing::internal::IsOk, (expr))
#define EXPECT_STATUS(expr, code) \
  EXPECT_PRED_FORMAT2(::reel::testing::internal::HasCode, (expr), code)
#define ASSERT_STATUS(expr, code) \
  ASSERT_PRED_FORMAT2(::reel::testing::internal::HasCode, (expr), code)

// NOLINTBEGIN(bugprone-macro-parentheses): `lhs` is a declaration.
// ASSERT_OK_AND_ASSIGN(lhs, expr): asserts that the Result `expr` is OK and moves its value into
// `lhs` (a declaration such as `auto x` or an existing variable).
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  REEL_TESTING_ASSIGN_IMPL(REEL_CONCAT(reel_testing_result_, __LINE__), lhs, expr)
#define REEL_TESTING_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  ASSERT_OK(tmp);                                \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
