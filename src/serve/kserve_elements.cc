// The request parser's typed path: an input's JSON "data" into the tensor's bytes. simdjson's
// exceptions are off in this file's use of it: every call is the error-code form, so nothing
// escapes (the adapter rule holds without a try block).
#include <simdjson.h>

#include <cstring>
#include <limits>
#include <string>

#include "base/allocator.h"
#include "serve/kserve.h"
#include "serve/kserve_internal.h"

namespace reel::serve {
namespace {

namespace od = simdjson::ondemand;
using internal::Malformed;
using internal::PutLength;
using internal::Quoted;

constexpr int kMaxNesting = 8;

template <class T>
void Put(std::string* out, size_t index, T value) {
  std::memcpy(out->data() + index * sizeof(T), &value, sizeof(T));
}

// Appends one JSON scalar of the tensor's type to the tensor's bytes, counting elements; the
// caller has sized `data` for `expected` fixed-size elements.
class ElementWriter {
 public:
  ElementWriter(Tensor* tensor, int64_t expected) : tensor_(tensor), expected_(expected) {
    const size_t size = ElementSize(tensor->datatype);
    if (size > 0) tensor->data.resize(static_cast<size_t>(expected) * size);
  }

  int64_t count() const { return count_; }
  bool fp32() const { return tensor_->datatype == DataType::kFp32; }

  Status AppendFp32(float value) {
    if (count_ == expected_) return TooMany();
    Put(&tensor_->data, static_cast<size_t>(count_++), value);
    return Status::Ok();
  }

  Status Append(od::value& value) {
    if (count_ == expected_) return TooMany();
    const size_t i = static_cast<size_t>(count_++);
    std::string* out = &tensor_->data;
    switch (tensor_->datatype) {
      case DataType::kFp32: {
        double d = 0;
        if (auto e = value.get_double().get(d)) return Bad(e);
        Put(out, i, static_cast<float>(d));
        return Status::Ok();
      }
      case DataType::kFp64: {
        double d = 0;
        if (auto e = value.get_double().get(d)) return Bad(e);
        Put(out, i, d);
        return Status::Ok();
      }
      case DataType::kBool: {
        bool b = false;
        if (auto e = value.get_bool().get(b)) return Bad(e);
        Put(out, i, static_cast<uint8_t>(b ? 1 : 0));
        return Status::Ok();
      }
      case DataType::kBytes: {
        std::string_view s;
        if (auto e = value.get_string().get(s)) return Bad(e);
        if (s.size() > std::numeric_limits<uint32_t>::max()) return OutOfRange("a string");
        PutLength(out, static_cast<uint32_t>(s.size()));
        out->append(s);
        return Status::Ok();
      }
      case DataType::kFp16:
      case DataType::kBf16:
        return InvalidArgumentError("input " + Quoted(tensor_->name) + ": " +
                                    std::string(DataTypeName(tensor_->datatype)) +
                                    " has no JSON form; send it as binary data");
      default:
        return AppendInteger(value, i);
    }
  }

 private:
  Status AppendInteger(od::value& value, size_t i) {
    std::string* out = &tensor_->data;
    const DataType type = tensor_->datatype;
    const bool is_unsigned = type == DataType::kUint8 || type == DataType::kUint16 ||
                             type == DataType::kUint32 || type == DataType::kUint64;
    if (is_unsigned) {
      uint64_t u = 0;
      if (auto e = value.get_uint64().get(u)) return Bad(e);
      switch (type) {
        case DataType::kUint8:
          if (u > 0xff) return OutOfRange(std::to_string(u));
          Put(out, i, static_cast<uint8_t>(u));
          break;
        case DataType::kUint16:
          if (u > 0xffff) return OutOfRange(std::to_string(u));
          Put(out, i, static_cast<uint16_t>(u));
          break;
        case DataType::kUint32:
          if (u > 0xffffffffu) return OutOfRange(std::to_string(u));
          Put(out, i, static_cast<uint32_t>(u));
          break;
        default:
          Put(out, i, u);
      }
      return Status::Ok();
    }
    int64_t v = 0;
    if (auto e = value.get_int64().get(v)) return Bad(e);
    switch (type) {
      case DataType::kInt8:
        if (v < -128 || v > 127) return OutOfRange(std::to_string(v));
        Put(out, i, static_cast<int8_t>(v));
        break;
      case DataType::kInt16:
        if (v < -32768 || v > 32767) return OutOfRange(std::to_string(v));
        Put(out, i, static_cast<int16_t>(v));
        break;
      case DataType::kInt32:
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
          return OutOfRange(std::to_string(v));
        }
        Put(out, i, static_cast<int32_t>(v));
        break;
      default:
        Put(out, i, v);
    }
    return Status::Ok();
  }

  Status Bad(simdjson::error_code error) const {
    return InvalidArgumentError("input " + Quoted(tensor_->name) + ": element " +
                                std::to_string(count_ - 1) + " is not a valid " +
                                std::string(DataTypeName(tensor_->datatype)) + " (" +
                                simdjson::error_message(error) + ")");
  }
  Status OutOfRange(const std::string& what) const {
    return InvalidArgumentError(
        "input " + Quoted(tensor_->name) + ": element " + std::to_string(count_ - 1) + " (" + what +
        ") is out of range for " + std::string(DataTypeName(tensor_->datatype)));
  }
  Status TooMany() const {
    return InvalidArgumentError("input " + Quoted(tensor_->name) + ": shape " +
                                ShapeText(tensor_->shape) + " has " + std::to_string(expected_) +
                                " elements but data has more");
  }

  Tensor* tensor_;
  int64_t expected_;
  int64_t count_ = 0;
};

// Flat or nested as the shape: nesting is not checked against the shape (Triton accepts both),
// only the element count is.
Status AppendValues(od::value value, ElementWriter* writer, int depth) {
  od::json_type type;
  if (auto e = value.type().get(type)) return Malformed("data", e);
  if (type != od::json_type::array) return writer->Append(value);
  if (depth == kMaxNesting) return InvalidArgumentError("tensor data nested deeper than 8 levels");
  od::array array;
  if (auto e = value.get_array().get(array)) return Malformed("data", e);
  for (auto element : array) {
    od::value v;
    if (auto e = element.get(v)) return Malformed("data", e);
    // The common case first: an FP32 number read straight into the buffer. A value of another
    // type is left unread by get_double (INCORRECT_TYPE) and takes the general path.
    double d = 0;
    if (writer->fp32() && !v.get_double().get(d)) {
      REEL_RETURN_IF_ERROR(writer->AppendFp32(static_cast<float>(d)));
      continue;
    }
    REEL_RETURN_IF_ERROR(AppendValues(v, writer, depth + 1));
  }
  return Status::Ok();
}

Status ReadGeneral(od::value data, int64_t expected, Tensor* tensor) {
  ElementWriter writer(tensor, expected);
  REEL_RETURN_IF_ERROR(AppendValues(data, &writer, 0));
  if (writer.count() != expected) {
    return InvalidArgumentError("input " + Quoted(tensor->name) + ": shape " +
                                ShapeText(tensor->shape) + " has " + std::to_string(expected) +
                                " elements but data has " + std::to_string(writer.count()));
  }
  return Status::Ok();
}

// The scanners take the common requests (FP32 or UINT8 arrays of plain numbers) in one pass;
// true if they did.
// The tensor's bytes are written in place, and not zeroed first where the library allows it
// (C++23's resize_and_overwrite; a C++17 build zeroes 1.2 MB a clip, see AppendInPlace); on a
// refusal they are left empty for the general path.
template <class T>
bool ScanInto(std::string_view text, int64_t expected, Tensor* tensor) {
  const size_t bytes = static_cast<size_t>(expected) * sizeof(T);
  bool scanned = false;
  AppendInPlace(&tensor->data, bytes, [&](char* dest, size_t) {
    scanned = internal::ScanNumberArray(text, kMaxNesting, reinterpret_cast<T*>(dest), expected) ==
              expected;
    return scanned ? bytes : 0;
  });
  return scanned;
}

bool ScanData(std::string_view text, int64_t expected, Tensor* tensor) {
  if (tensor->datatype == DataType::kFp32) return ScanInto<float>(text, expected, tensor);
  if (tensor->datatype == DataType::kUint8) return ScanInto<uint8_t>(text, expected, tensor);
  return false;
}

}  // namespace

namespace internal {

// Anything the scanners do not take (another type, another token, too many or too few numbers,
// a number beyond range) is parsed again from a copy of its text by the general path, which
// words the error as it always has. The copy is wrapped in [ ] because simdjson reads a scalar
// document only as that scalar, not as a value.
Status ReadJsonData(std::string_view text, int64_t expected, Tensor* tensor) {
  if (ScanData(text, expected, tensor)) return Status::Ok();
  simdjson::padded_string copy(text.size() + 2);
  copy.data()[0] = '[';
  std::memcpy(copy.data() + 1, text.data(), text.size());
  copy.data()[text.size() + 1] = ']';
  const internal::ParserPool::Lease parser = internal::Parsers().Take();
  od::document doc;
  od::array wrapper;
  od::value value;
  if (auto e = (*parser).iterate(copy).get(doc)) return Malformed("data", e);
  if (auto e = doc.get_array().get(wrapper)) return Malformed("data", e);
  if (auto e = wrapper.at(0).get(value)) return Malformed("data", e);
  return ReadGeneral(value, expected, tensor);
}

}  // namespace internal
}  // namespace reel::serve
