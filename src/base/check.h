// Checks of invariants that only a bug can break (envoy's "crash on bugs"). A failed check prints
// "file:line: Check failed: cond: message" to stderr and aborts, in every build type: unlike
// assert(), REEL_CHECK stays on under NDEBUG. REEL_DCHECK is for checks too costly for release
// builds; it compiles to nothing (its operands unevaluated) when NDEBUG is defined.
//
//   REEL_CHECK(offset <= size) << "offset " << offset << " past " << size;
//
// The world's errors (files, networks, user input) are never checked this way: they are Status.
#pragma once

#include <sstream>

namespace reel::internal {

// Collects the message and aborts in its destructor, at the end of the full expression.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  const char* file_;
  int line_;
  const char* condition_;
  std::ostringstream stream_;  // the message streamed after the check
};

// Turns `stream << ...` into void so that both branches of the check's ?: have one type.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace reel::internal

// The message after the check streams into the failure, so the replacement list cannot be
// parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define REEL_CHECK(condition)                 \
  (condition) ? (void)0                       \
              : ::reel::internal::Voidify() & \
                    ::reel::internal::CheckFailure(__FILE__, __LINE__, #condition).stream()

#ifdef NDEBUG
#define REEL_DCHECK(condition)         \
  true ? (void)0                       \
       : ::reel::internal::Voidify() & \
             ::reel::internal::CheckFailure(__FILE__, __LINE__, #condition).stream()
#else
#define REEL_DCHECK(condition) REEL_CHECK(condition)
#endif
// NOLINTEND(bugprone-macro-parentheses)
