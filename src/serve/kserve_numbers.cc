// The request parser's fast path for the common request: FP32 (or UINT8) "data" as the text of
// a JSON array of plain numbers. simdjson reads a number per call through its iterator; here the
// separators of the whole array are found first (16 bytes a step), so every number's start and
// end are known before it is read and the CPU overlaps the reads of successive numbers, and the
// usual short number is read without a branch per digit or on its sign. A large array is read
// in two halves at once when a core is free: at concurrency 1 the parse is a request's wait.
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include "base/check.h"
#include "base/thread_pool.h"
#include "serve/kserve_internal.h"

namespace reel::serve::internal {
namespace {

constexpr double kExactPowersOfTen[] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                        1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
constexpr uint64_t kPowersOfTen[] = {1,
                                     10,
                                     100,
                                     1'000,
                                     10'000,
                                     100'000,
                                     1'000'000,
                                     10'000'000,
                                     100'000'000,
                                     1'000'000'000,
                                     10'000'000'000,
                                     100'000'000'000,
                                     1'000'000'000'000,
                                     10'000'000'000'000,
                                     100'000'000'000'000,
                                     1'000'000'000'000'000};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
const char* SkipSpace(const char* p, const char* end) {
  while (p < end && IsJsonSpace(*p)) ++p;
  return p;
}

// ---- any number, one character at a time ------------------------------------------------------

const char* SkipDigits(const char* p, const char* end) {
  while (p < end && IsDigit(*p)) ++p;
  return p;
}

// One JSON number at p, its grammar checked here (from_chars alone would take "01", "1." or
// "inf"), into *value as the correctly rounded double that simdjson (and strtod) would give;
// nullptr if it is not a JSON number or not a finite, normal-range double.
const char* ReadNumber(const char* p, const char* end, double* value) {
  const char* start = p;
  if (p < end && *p == '-') ++p;
  const char* digits = p;
  p = (p < end && *p == '0') ? p + 1 : SkipDigits(p, end);
  if (p == digits) return nullptr;
  if (p < end && *p == '.') {
    const char* fraction = ++p;
    p = SkipDigits(p, end);
    if (p == fraction) return nullptr;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    ++p;
    if (p < end && (*p == '-' || *p == '+')) ++p;
    const char* exponent = p;
    p = SkipDigits(p, end);
    if (p == exponent) return nullptr;
  }
  const auto [stop, error] = std::from_chars(start, p, *value);
  return error == std::errc() && stop == p ? p : nullptr;
}

// ---- the short number, a word at a time ---------------------------------------------------------

uint64_t Load8(const char* p) {
  uint64_t word = 0;
  std::memcpy(&word, p, sizeof(word));
  return word;
}

constexpr uint64_t kZeros = 0x3030303030303030;  // '0' in every byte: XOR makes digits 0-9
// The words below hold the first byte in memory lowest; elsewhere the full reader does it all.
constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

// Eight digit values (0-9), the most significant first in memory, as their number: pairs, then
// the four pairs weighted in two multiplications.
uint64_t EightDigits(uint64_t v) {
  v = v * 10 + (v >> 8);
  constexpr uint64_t kPairs = 0x000000FF000000FF;
  return (((v & kPairs) * (100 + (uint64_t{1'000'000} << 32))) +
          (((v >> 16) & kPairs) * (1 + (uint64_t{10'000} << 32)))) >>
         32;
}

// Bit i set where byte i of the 16 at p is a digit.
uint32_t DigitBits(const char* p) {
#if defined(__SSE2__)
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i value = _mm_sub_epi8(bytes, _mm_set1_epi8('0'));
  const __m128i digits = _mm_cmpeq_epi8(_mm_min_epu8(value, _mm_set1_epi8(9)), value);
  return static_cast<uint32_t>(_mm_movemask_epi8(digits));
#else
  uint32_t bits = 0;
  for (int i = 0; i < 16; ++i) bits |= static_cast<uint32_t>(IsDigit(p[i])) << i;
  return bits;
#endif
}

// The n (0-15) last digits of the 16 bytes that end at `end` as their number.
uint64_t LastDigits(const char* end, int n) {
  // Masks keeping the top n bytes of the 16: of the word nearer the end, then of the other.
  static constexpr auto kMasks = [] {
    struct Masks {
      uint64_t near[16] = {}, far[16] = {};
    } m;
    for (int n = 1; n < 16; ++n) {
      m.near[n] = n >= 8 ? ~uint64_t{0} : ~uint64_t{0} << (8 * (8 - n));
      m.far[n] = n > 8 ? ~uint64_t{0} << (8 * (16 - n)) : 0;
    }
    return m;
  }();
  const uint64_t near = (Load8(end - 8) ^ kZeros) & kMasks.near[n];
  const uint64_t far = (Load8(end - 16) ^ kZeros) & kMasks.far[n];
  return EightDigits(far) * 100'000'000 + EightDigits(near);
}

// 10^-k rounded to double. For m < 2^24 and k <= 7, m / 10^k is never within 2^-49 (relative)
// of a point halfway between two floats, and m times one of these is within 2^-52 of it, so the
// product rounded to float is the correctly rounded float: what a correctly rounded double
// (simdjson's) then rounded to float gives, for a multiplication's cost instead of a division's.
constexpr double kTenToMinus[] = {1e0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7};
constexpr int kMultipliedDigits = 7;

// Bit i set where byte i of `word` is not a digit (eight bytes at once: no byte's sum carries
// into the next). For the one-word reader: DigitBits' last 8 bits say the same, but the trip
// through a vector register cost 7% of the read.
uint32_t NonDigitBytes(uint64_t word) {
  constexpr uint64_t kLow7 = 0x7F7F7F7F7F7F7F7F, kHigh = 0x8080808080808080;
  const uint64_t value = word ^ kZeros;                                        // digits 0-9
  const uint64_t above_nine = ((value & kLow7) + 0x7676767676767676) | value;  // high bit: > 9
  return static_cast<uint32_t>((((above_nine & kHigh) >> 7) * 0x0102040810204080) >> 56);
}

// ReadShortNumber's number when it is at most 8 bytes long (as most of a tensor's are): read from
// the one word that ends where it does, the dot taken out of the word, so that a single
// EightDigits gives the digits' number.
bool ReadWordNumber(const char* begin, const char* end, float* value) {
  // Masks keeping the bytes above byte i (none above 6: a dot there has no fraction after it).
  static constexpr auto kAbove = [] {
    struct Masks {
      uint64_t at[9] = {};
    } m;
    for (int i = 0; i < 7; ++i) m.at[i] = ~uint64_t{0} << (8 * (i + 1));
    return m;
  }();
  const auto length = static_cast<int>(end - begin);
  const uint64_t word = Load8(end - 8);  // the number in its top `length` bytes
  const int negative = begin[0] == '-' ? 1 : 0;
  const int first = 8 - length + negative;                        // the first digit's byte
  const uint32_t other = NonDigitBytes(word) & (0xFFU << first);  // the dot alone, or nothing
  const int has_dot = other != 0 ? 1 : 0;
  const int dot = has_dot != 0 ? __builtin_ctz(other) : 8;
  const int whole = dot - first;
  const int fraction = has_dot != 0 ? 7 - dot : 0;
  const bool extra_dots = (other & (other - 1)) != 0;
  const bool not_a_dot = (has_dot != 0) & (end[dot - 8] != '.');
  const bool no_fraction = (has_dot != 0) & (fraction < 1);
  const bool leading_zero = (begin[negative] == '0') & (whole > 1);
  if (extra_dots | not_a_dot | no_fraction | leading_zero | (whole < 1)) return false;
  // The whole digits move up a byte over the dot; then what came before the number is cleared.
  const uint64_t digits = word ^ kZeros;
  const uint64_t above = kAbove.at[dot];
  const uint64_t joined = has_dot != 0 ? (digits & above) | ((digits << 8) & ~above) : digits;
  const uint64_t number = joined & (~uint64_t{0} << (8 * (first + has_dot)));
  // At most 7 digits with a fraction, so the product rounds as the exact quotient does.
  const auto magnitude =
      static_cast<float>(static_cast<double>(EightDigits(number)) * kTenToMinus[fraction]);
  uint32_t bits = 0;
  std::memcpy(&bits, &magnitude, sizeof(bits));
  bits |= static_cast<uint32_t>(negative) << 31;
  std::memcpy(value, &bits, sizeof(bits));
  return true;
}

// The common number, [begin, end) with nothing around it: a '-' or not, whole digits within the
// first 8 bytes, a fraction or not, at most 15 digits in all, no exponent. The caller makes sure
// that 16 bytes can be read from begin and the 16 before end. Sets *value (the correctly rounded
// double, as exact Clinger's case gives it, then rounded to float) and returns true; false for
// anything else (ReadNumber then reads it). No branch depends on the digits or the sign: signs in
// a tensor are random, and a branch on them mispredicts half the time.
bool ReadShortNumber(const char* begin, const char* end, float* value) {
  const int length = static_cast<int>(end - begin);
  if (length < 1 || length > 16) return false;
  if (length <= 8) return ReadWordNumber(begin, end, value);
  const int negative = begin[0] == '-' ? 1 : 0;
  const uint32_t body = ((uint32_t{1} << length) - 1) & ~static_cast<uint32_t>(negative);
  const uint32_t other = body & ~DigitBits(begin);  // no digit: the dot alone, or nothing
  const int dot = other != 0 ? __builtin_ctz(other) : length;
  const int whole = dot - negative;
  const int fraction = other != 0 ? length - dot - 1 : 0;
  // One test of them all, with bitwise operators: '||' would branch on each (and a number below
  // 1 starts with '0', which is random too).
  const bool extra_dots = (other & (other - 1)) != 0;
  const bool not_a_dot = (other != 0) & (begin[dot] != '.');
  const bool no_fraction = (other != 0) & (fraction < 1);
  const bool leading_zero = (begin[negative] == '0') & (whole > 1);
  if (extra_dots | not_a_dot | no_fraction | leading_zero | (whole < 1) | (whole > 8 - negative) |
      (whole + fraction > 15)) {
    return false;
  }
  // The whole digits right-aligned in a word (the sign's byte shifted out first).
  const uint64_t whole_digits = ((Load8(begin) ^ kZeros) >> (8 * negative)) << (8 * (8 - whole));
  const auto mantissa = static_cast<double>(EightDigits(whole_digits) * kPowersOfTen[fraction] +
                                            LastDigits(end, fraction));
  // A request's numbers are mostly all short or all long: this branch predicts well.
  const float magnitude = whole + fraction <= kMultipliedDigits
                              ? static_cast<float>(mantissa * kTenToMinus[fraction])
                              : static_cast<float>(mantissa / kExactPowersOfTen[fraction]);
  uint32_t bits = 0;
  std::memcpy(&bits, &magnitude, sizeof(bits));
  bits |= static_cast<uint32_t>(negative) << 31;
  std::memcpy(value, &bits, sizeof(bits));
  return true;
}

// ---- the array's structure -------------------------------------------------------------------

// Set bits of a 16-bit mask, without the library call __builtin_popcount is on x86-64's base
// instruction set.
int BitCount16(uint32_t x) {
  x -= (x >> 1) & 0x5555;
  x = (x & 0x3333) + ((x >> 2) & 0x3333);
  x = (x + (x >> 4)) & 0x0F0F;
  return static_cast<int>((x + (x >> 8)) & 0x1F);
}

constexpr size_t kBlock = 8 * 1024;  // text searched for separators a round at a time

// Offsets of every ',', '[' and ']' in text[from, to) (at most kBlock bytes) into `found`, which
// has room for kBlock + 4; how many, or -1 if a '"' is there (a string could hide separators, and
// an array of numbers has none).
int FindSeparators(std::string_view text, size_t from, size_t to, uint32_t* found) {
  uint32_t* at = found;
  size_t i = from;
#if defined(__SSE2__)
  __m128i quotes = _mm_setzero_si128();
  for (; i + 16 <= to; i += 16) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + i));
    quotes = _mm_or_si128(quotes, _mm_cmpeq_epi8(bytes, _mm_set1_epi8('"')));
    const __m128i hits = _mm_or_si128(_mm_cmpeq_epi8(bytes, _mm_set1_epi8(',')),
                                      _mm_or_si128(_mm_cmpeq_epi8(bytes, _mm_set1_epi8('[')),
                                                   _mm_cmpeq_epi8(bytes, _mm_set1_epi8(']'))));
    auto bits = static_cast<uint32_t>(_mm_movemask_epi8(hits));
    // Four written whatever the count (most blocks of 16 bytes hold 1-4 numbers), so the loop
    // does not branch on how many there are.
    const int n = BitCount16(bits);
    for (int k = 0; k < 4; ++k) {
      at[k] = static_cast<uint32_t>(i) + static_cast<uint32_t>(__builtin_ctz(bits | 0x10000));
      bits &= bits - 1;
    }
    for (int k = 4; k < n; ++k) {
      at[k] = static_cast<uint32_t>(i) + static_cast<uint32_t>(__builtin_ctz(bits));
      bits &= bits - 1;
    }
    at += n;
  }
  if (_mm_movemask_epi8(quotes) != 0) return -1;
#endif
  for (; i < to; ++i) {
    const char c = text[i];
    if (c == '"') return -1;
    if (c == ',' || c == '[' || c == ']') *at++ = static_cast<uint32_t>(i);
  }
  return static_cast<int>(at - found);
}

bool OnlySpace(const char* p, const char* end) { return SkipSpace(p, end) == end; }

// A number where a value must be, between two separators: the short reader where it can, else
// the full one, with any space around it.
bool ReadElement(const char* gap, const char* gap_end, bool room, float* out) {
  const char* first = gap + (*gap == ' ' ? 1 : 0);  // ", " as Python's json writes it
  if (kLittleEndian && room && ReadShortNumber(first, gap_end, out)) return true;
  double value = 0;
  const char* stop = ReadNumber(SkipSpace(gap, gap_end), gap_end, &value);
  if (stop == nullptr || !OnlySpace(stop, gap_end)) return false;
  *out = static_cast<float>(value);
  return true;
}

// A byte: a plain integer from 0 to 255, with any space around it.
bool ReadElement(const char* gap, const char* gap_end, bool /*room*/, uint8_t* out) {
  const char* p = SkipSpace(gap, gap_end);
  const char* digits = p;
  unsigned value = 0;
  while (p < gap_end && IsDigit(*p) && p - digits < 4) value = value * 10 + (*p++ - '0');
  const auto n = p - digits;
  if (n == 0 || n > 3 || (n > 1 && *digits == '0') || value > 255 || !OnlySpace(p, gap_end)) {
    return false;
  }
  *out = static_cast<uint8_t>(value);
  return true;
}

// Reads the array from its separators, given one at a time in order: between two of them is a
// number where a value must be, else only space (after ']', before '[', in an empty array).
// A reader can also start at a ',' inside the array (`resume_at`), for the second half of a
// split array: depths are then counted from the depth there, which the first half tells.
template <class T>
class ArrayReader {
 public:
  ArrayReader(std::string_view text, int max_nesting, T* out, int64_t capacity,
              const char* resume_at = nullptr)
      : base_(text.data()),
        end_(text.data() + text.size()),
        max_nesting_(max_nesting),
        out_(out),
        capacity_(capacity),
        previous_(resume_at),
        floor_(resume_at == nullptr ? 0 : -max_nesting) {}

  bool Next(uint32_t at) {
    const char* separator = base_ + at;
    if (previous_ == nullptr) {  // the first: the outermost array opens
      previous_ = separator;
      return OnlySpace(base_, separator) && *separator == '[';
    }
    const char* gap = previous_ + 1;
    const char before = *previous_;
    const char after = *separator;
    previous_ = separator;
    if (before == '[' && ++depth_ > max_nesting_) return false;
    if (before == ']') {
      // At the floor, the outermost array has closed and something follows it (a resumed
      // reader's floor is as low as any array it could be inside reaches).
      if (--depth_ == floor_) return false;
      lowest_ = std::min(lowest_, depth_);
    }
    highest_ = std::max(highest_, depth_);
    const bool value_slot = before != ']' && after != '[';
    const bool empty_array = before == '[' && after == ']' && OnlySpace(gap, separator);
    if (!value_slot) return OnlySpace(gap, separator) && !(before == ']' && after == '[');
    if (empty_array) return true;
    // The short reader reads 16 bytes from the number's start and the 16 before its end.
    const bool room = end_ - gap >= 17 && separator - base_ >= 16;
    return count_ < capacity_ && ReadElement(gap, separator, room, &out_[count_++]);
  }

  // How many numbers the array held, or -1 if it did not close or text follows it.
  int64_t Finish() const { return Closed(depth_) ? count_ : -1; }

  // For a reader that stopped at a ',' (the first half of a split): how deep it is there. For
  // one that resumed there: whether the array it read on from `depth` stays within the nesting
  // limit, never closes early, and closes at the end; and how many numbers it read.
  int depth() const { return depth_; }
  bool FitsAfter(int depth) const {
    return depth + highest_ <= max_nesting_ && depth + lowest_ >= 1 && Closed(depth + depth_);
  }
  int64_t count() const { return count_; }

 private:
  bool Closed(int depth) const {
    return previous_ != nullptr && *previous_ == ']' && depth == 1 &&
           OnlySpace(previous_ + 1, end_);
  }

  const char* const base_;
  const char* const end_;
  const int max_nesting_;
  T* const out_;
  const int64_t capacity_;
  const char* previous_;
  const int floor_;
  int depth_ = 0, lowest_ = 0, highest_ = 0;
  int64_t count_ = 0;
};

// Hands text[from, to)'s separators to `reader`; false at the first it refuses (or a '"').
template <class T>
bool Feed(std::string_view text, size_t from, size_t to, ArrayReader<T>* reader) {
  uint32_t found[kBlock + 4];
  for (size_t at = from; at < to; at += kBlock) {
    const int n = FindSeparators(text, at, std::min(to, at + kBlock), found);
    if (n < 0) return false;
    for (int i = 0; i < n; ++i) {
      if (!reader->Next(found[i])) return false;
    }
  }
  return true;
}

template <class T>
int64_t ScanWhole(std::string_view text, int max_nesting, T* out, int64_t capacity) {
  ArrayReader<T> reader(text, max_nesting, out, capacity);
  return Feed(text, 0, text.size(), &reader) ? reader.Finish() : -1;
}

// ---- a large array read in two halves at once --------------------------------------------------

// Below this a request's array is read by one thread: the hand-over to a second costs about as
// much as reading 40,000 numbers takes it.
constexpr size_t kSplitBytes = 256 << 10;

// The second half's numbers, on the thread that reads them: kept between requests, so that a
// server's requests do not fault in a fresh buffer each (a page fault costs several
// microseconds on a VM), unless it grew past what a usual request needs.
template <class T>
T* Scratch(int64_t count) {
  constexpr int64_t kKept = (64 << 20) / sizeof(T);
  thread_local std::unique_ptr<T[]> buffer;
  thread_local int64_t size = 0;
  if (count > size || (size > kKept && count <= kKept)) {
    buffer.reset(new T[static_cast<size_t>(count)]);  // NOLINT: left unset, written before read
    size = count;
  }
  return buffer.get();
}

// The first half [0, split] on the calling thread into `out`, and the second, from the ',' at
// `split`, by `run_second` (which runs it elsewhere and returns a wait, or returns none if it
// cannot), into its thread's scratch: that thread moves its numbers into place once the first
// half has told how many it read. -1 as ScanWhole when either half refuses; no second thread:
// the whole array on this one.
template <class T, class RunSecond>
int64_t ScanSplit(std::string_view text, int max_nesting, T* out, int64_t capacity, size_t split,
                  const RunSecond& run_second) {
  std::promise<std::pair<int64_t, int>> first_promise;  // its count and depth, or -1 count
  std::shared_future<std::pair<int64_t, int>> first = first_promise.get_future().share();
  int64_t total = -1;
  auto second = [&text, max_nesting, out, capacity, split, first, &total] {
    T* scratch = Scratch<T>(capacity);
    ArrayReader<T> reader(text, max_nesting, scratch, capacity, text.data() + split);
    const bool read = Feed(text, split + 1, text.size(), &reader);
    const auto [count, depth] = first.get();
    if (!read || count < 0 || !reader.FitsAfter(depth) || reader.count() > capacity - count) {
      return;
    }
    std::memcpy(out + count, scratch, static_cast<size_t>(reader.count()) * sizeof(T));
    total = count + reader.count();
  };
  std::optional<std::future<void>> done = run_second(second);
  if (!done) return ScanWhole(text, max_nesting, out, capacity);
  ArrayReader<T> reader(text, max_nesting, out, capacity);
  const bool read = Feed(text, 0, split + 1, &reader);
  first_promise.set_value({read ? reader.count() : -1, reader.depth()});
  done->get();
  return total;
}

// For the tests of the split: the second half on a thread of its own.
std::optional<std::future<void>> RunOnNewThread(std::function<void()> fn) {
  return std::async(std::launch::async, std::move(fn));
}

template <class T>
int64_t SplitAtComma(std::string_view text, size_t split, int max_nesting, T* out,
                     int64_t capacity) {
  REEL_CHECK(split < text.size() && text[split] == ',');
  return ScanSplit(text, max_nesting, out, capacity, split, RunOnNewThread);
}

SpareThreads& ScanThreads() {
  // Never destroyed: handler threads may parse while statics are torn down at exit.
  static auto* threads = new SpareThreads(HardwareThreads() - 1);
  return *threads;
}

template <class T>
int64_t ScanArray(std::string_view text, int max_nesting, T* out, int64_t capacity) {
  if (text.size() >= (size_t{1} << 32)) return -1;
  const char* comma = text.size() < kSplitBytes
                          ? nullptr
                          : static_cast<const char*>(std::memchr(text.data() + text.size() / 2, ',',
                                                                 text.size() - text.size() / 2));
  if (comma == nullptr) return ScanWhole(text, max_nesting, out, capacity);
  return ScanSplit(text, max_nesting, out, capacity, static_cast<size_t>(comma - text.data()),
                   [](std::function<void()> fn) { return ScanThreads().Offer(std::move(fn)); });
}

}  // namespace

int64_t ScanNumberArray(std::string_view text, int max_nesting, float* out, int64_t capacity) {
  return ScanArray(text, max_nesting, out, capacity);
}

int64_t ScanNumberArray(std::string_view text, int max_nesting, uint8_t* out, int64_t capacity) {
  return ScanArray(text, max_nesting, out, capacity);
}

int64_t ScanNumberArraySplitAt(std::string_view text, size_t split, int max_nesting, float* out,
                               int64_t capacity) {
  return SplitAtComma(text, split, max_nesting, out, capacity);
}

int64_t ScanNumberArraySplitAt(std::string_view text, size_t split, int max_nesting, uint8_t* out,
                               int64_t capacity) {
  return SplitAtComma(text, split, max_nesting, out, capacity);
}

}  // namespace reel::serve::internal
