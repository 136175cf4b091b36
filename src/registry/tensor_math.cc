#include "registry/tensor_math.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "base/check.h"

namespace reel::registry {
namespace {

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);  // subnormal or zero
  } else if (exp == 31) {
    v = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  if (std::isnan(f)) return sign | 0x7e00;
  const float a = std::fabs(f);
  if (a >= 65520.0f) return sign | 0x7c00;  // rounds to infinity
  if (a < std::ldexp(1.0f, -14)) {          // subnormal: a multiple of 2^-24, rounded to even
    return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));
  }
  int e;
  const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  uint32_t mant = static_cast<uint32_t>(std::nearbyint(std::ldexp(m, 11)));  // 11 bits incl. lead
  if (mant == 2048) mant = 1024, ++e;
  return sign | static_cast<uint16_t>(((e + 14) << 10) | (mant & 0x3ff));
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t FloatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);  // round half to even
  return static_cast<uint16_t>(x >> 16);
}

template <typename T>
void Read(const std::string& data, std::vector<double>* out) {
  const size_t n = data.size() / sizeof(T);
  out->resize(n);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, data.data() + i * sizeof(T), sizeof(T));
    (*out)[i] = static_cast<double>(v);
  }
}

template <typename T>
void Write(const std::vector<double>& values, std::string* data) {
  data->resize(values.size() * sizeof(T));
  for (size_t i = 0; i < values.size(); ++i) {
    T v;
    if constexpr (std::is_floating_point_v<T>) {
      v = static_cast<T>(values[i]);
    } else {
      const double r = std::nearbyint(values[i]);
      const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
      const double hi = static_cast<double>(std::numeric_limits<T>::max());
      v = std::isnan(r) ? T{0} : static_cast<T>(r < lo ? lo : (r > hi ? hi : r));
    }
    std::memcpy(data->data() + i * sizeof(T), &v, sizeof(T));
  }
}

}  // namespace

bool IsFloatDtype(const std::string& dtype) {
  return dtype == "F32" || dtype == "F64" || dtype == "F16" || dtype == "BF16";
}

Result<std::vector<double>> ToDoubles(const models::TensorBytes& t) {
  const size_t width = models::DtypeSize(t.dtype);
  if (width == 0) return InvalidArgumentError("unknown dtype '" + t.dtype + "'");
  if (t.data.size() % width != 0) {
    return InvalidArgumentError("a " + t.dtype + " tensor of " + std::to_string(t.data.size()) +
                                " bytes");
  }
  std::vector<double> out;
  const std::string& d = t.dtype;
  if (d == "F32") Read<float>(t.data, &out);
  if (d == "F64") Read<double>(t.data, &out);
  if (d == "I64") Read<int64_t>(t.data, &out);
  if (d == "I32") Read<int32_t>(t.data, &out);
  if (d == "I16") Read<int16_t>(t.data, &out);
  if (d == "I8") Read<int8_t>(t.data, &out);
  if (d == "U8" || d == "BOOL") Read<uint8_t>(t.data, &out);
  if (d == "F16" || d == "BF16") {
    std::vector<double> raw;
    Read<uint16_t>(t.data, &raw);
    out.resize(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      const auto bits = static_cast<uint16_t>(raw[i]);
      out[i] = d == "F16" ? HalfToFloat(bits) : Bf16ToFloat(bits);
    }
  }
  REEL_CHECK(out.size() == t.data.size() / width) << "dtype " << d << " not converted";
  return out;
}

Result<models::TensorBytes> FromDoubles(const std::vector<double>& values, const std::string& dtype,
                                        const std::vector<int64_t>& shape) {
  models::TensorBytes t{dtype, shape, ""};
  if (dtype == "F32")
    Write<float>(values, &t.data);
  else if (dtype == "F64")
    Write<double>(values, &t.data);
  else if (dtype == "I64")
    Write<int64_t>(values, &t.data);
  else if (dtype == "I32")
    Write<int32_t>(values, &t.data);
  else if (dtype == "I16")
    Write<int16_t>(values, &t.data);
  else if (dtype == "I8")
    Write<int8_t>(values, &t.data);
  else if (dtype == "U8")
    Write<uint8_t>(values, &t.data);
  else if (dtype == "BOOL") {
    std::vector<double> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) bits[i] = values[i] != 0 ? 1 : 0;
    Write<uint8_t>(bits, &t.data);
  } else if (dtype == "F16" || dtype == "BF16") {
    std::vector<double> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      const float f = static_cast<float>(values[i]);
      bits[i] = dtype == "F16" ? FloatToHalf(f) : FloatToBf16(f);
    }
    Write<uint16_t>(bits, &t.data);
  } else {
    return InvalidArgumentError("unknown dtype '" + dtype + "'");
  }
  return t;
}

double RelativeL2(const std::vector<double>& a, const std::vector<double>& b) {
  REEL_CHECK(a.size() == b.size()) << "RelativeL2 of " << a.size() << " and " << b.size();
  double diff = 0, base = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (b[i] - a[i]) * (b[i] - a[i]);
    base += a[i] * a[i];
  }
  return base > 0 ? std::sqrt(diff / base) : std::sqrt(diff);
}

}  // namespace reel::registry
