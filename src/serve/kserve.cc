// The KServe v2 codec: data types, tensors and the encoder (responses here; requests, with the
// response parser, in kserve_client.cc). The request parser is kserve_parse.cc and
// kserve_elements.cc; kserve_internal.h holds what the files share.
#include "serve/kserve.h"

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "base/strings.h"
#include "serve/kserve_internal.h"

namespace reel::serve {
namespace internal {

std::string Quoted(std::string_view name) { return "'" + PrintableForMessage(name, 100) + "'"; }

void PutLength(std::string* out, uint32_t length) {
  char bytes[4];
  std::memcpy(bytes, &length, 4);
  out->append(bytes, 4);
}

}  // namespace internal
namespace {

using Json = nlohmann::json;
using internal::PutLength;
using internal::Quoted;

constexpr std::array<std::pair<std::string_view, DataType>, 14> kTypes = {{
    {"BOOL", DataType::kBool},
    {"UINT8", DataType::kUint8},
    {"UINT16", DataType::kUint16},
    {"UINT32", DataType::kUint32},
    {"UINT64", DataType::kUint64},
    {"INT8", DataType::kInt8},
    {"INT16", DataType::kInt16},
    {"INT32", DataType::kInt32},
    {"INT64", DataType::kInt64},
    {"FP16", DataType::kFp16},
    {"BF16", DataType::kBf16},
    {"FP32", DataType::kFp32},
    {"FP64", DataType::kFp64},
    {"BYTES", DataType::kBytes},
}};

Json TensorHeader(const Tensor& t) {
  return Json{{"name", t.name}, {"datatype", DataTypeName(t.datatype)}, {"shape", t.shape}};
}

template <class T>
Json NumbersOf(const std::string& data) {
  std::vector<T> values(data.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), data.data(), values.size() * sizeof(T));
  return Json(values);
}

// The double whose shortest decimal form is the float's, so that JSON shows 0.1 and not
// 0.10000000149011612: bodies a third the size, and the same float when parsed back.
Json FloatsOf(const std::string& data) {
  Json list = Json::array();
  char text[32];
  for (size_t i = 0; i + sizeof(float) <= data.size(); i += sizeof(float)) {
    float f = 0;
    std::memcpy(&f, data.data() + i, sizeof(float));
    const auto end = std::to_chars(text, text + sizeof(text) - 1, f).ptr;
    *end = '\0';
    list.push_back(std::isfinite(f) ? std::strtod(text, nullptr) : static_cast<double>(f));
  }
  return list;
}

// A tensor's data as a JSON list (FP16/BF16 have no JSON form: the caller sends them binary).
Json JsonData(const Tensor& t) {
  switch (t.datatype) {
    case DataType::kBool: {
      Json list = Json::array();
      for (char c : t.data) list.push_back(c != 0);
      return list;
    }
    case DataType::kUint8:
      return NumbersOf<uint8_t>(t.data);
    case DataType::kUint16:
      return NumbersOf<uint16_t>(t.data);
    case DataType::kUint32:
      return NumbersOf<uint32_t>(t.data);
    case DataType::kUint64:
      return NumbersOf<uint64_t>(t.data);
    case DataType::kInt8:
      return NumbersOf<int8_t>(t.data);
    case DataType::kInt16:
      return NumbersOf<int16_t>(t.data);
    case DataType::kInt32:
      return NumbersOf<int32_t>(t.data);
    case DataType::kInt64:
      return NumbersOf<int64_t>(t.data);
    case DataType::kFp32:
      return FloatsOf(t.data);
    case DataType::kFp64:
      return NumbersOf<double>(t.data);
    case DataType::kBytes: {
      Json list = Json::array();
      auto strings = t.Strings();
      if (strings.ok()) {
        for (std::string_view s : *strings) list.push_back(std::string(s));
      }
      return list;
    }
    case DataType::kFp16:
    case DataType::kBf16:
      break;
  }
  return Json::array();
}

}  // namespace

namespace internal {

// FP16 and BF16 have no JSON form, nor has a BYTES element that is not UTF-8 (JSON strings are).
bool NeedsBinary(const Tensor& t) {
  if (t.datatype == DataType::kFp16 || t.datatype == DataType::kBf16) return true;
  if (t.datatype != DataType::kBytes) return false;
  auto strings = t.Strings();
  if (!strings.ok()) return true;
  for (std::string_view s : *strings) {
    if (!simdjson::validate_utf8(s.data(), s.size())) return true;
  }
  return false;
}

// JSON with some tensors' data inline and the rest appended as binary.
Body EncodeTensors(Json message, const char* key, const std::vector<Tensor>& tensors,
                   const std::vector<bool>& binary) {
  Json list = Json::array();
  std::string tail;
  for (size_t i = 0; i < tensors.size(); ++i) {
    Json item = TensorHeader(tensors[i]);
    if (binary[i]) {
      item["parameters"] = {{"binary_data_size", tensors[i].data.size()}};
      tail += tensors[i].data;
    } else {
      item["data"] = JsonData(tensors[i]);
    }
    list.push_back(std::move(item));
  }
  message[key] = std::move(list);
  Body body{message.dump(), std::nullopt};
  if (!tail.empty() || std::find(binary.begin(), binary.end(), true) != binary.end()) {
    body.json_length = body.bytes.size();
    body.bytes += tail;
  }
  return body;
}

}  // namespace internal

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

std::optional<DataType> DataTypeFromName(std::string_view name) {
  for (const auto& [text, type] : kTypes) {
    if (text == name) return type;
  }
  return std::nullopt;
}

std::string_view DataTypeName(DataType type) {
  for (const auto& [text, t] : kTypes) {
    if (t == type) return text;
  }
  return "?";
}

size_t ElementSize(DataType type) {
  switch (type) {
    case DataType::kBool:
    case DataType::kUint8:
    case DataType::kInt8:
      return 1;
    case DataType::kUint16:
    case DataType::kInt16:
    case DataType::kFp16:
    case DataType::kBf16:
      return 2;
    case DataType::kUint32:
    case DataType::kInt32:
    case DataType::kFp32:
      return 4;
    case DataType::kUint64:
    case DataType::kInt64:
    case DataType::kFp64:
      return 8;
    case DataType::kBytes:
      return 0;
  }
  return 0;
}

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<std::vector<std::string_view>> Tensor::Strings() const {
  std::vector<std::string_view> out;
  size_t offset = 0;
  while (offset < data.size()) {
    uint32_t length = 0;
    if (data.size() - offset < 4) {
      return InvalidArgumentError("tensor " + Quoted(name) + ": BYTES data ends inside a length");
    }
    std::memcpy(&length, data.data() + offset, 4);
    offset += 4;
    if (length > data.size() - offset) {
      return InvalidArgumentError("tensor " + Quoted(name) +
                                  ": a BYTES element runs past the data");
    }
    out.emplace_back(data.data() + offset, length);
    offset += length;
  }
  return out;
}

template <class T>
Tensor MakeTensor(std::string name, DataType type, std::vector<int64_t> shape,
                  const std::vector<T>& values) {
  Tensor t{std::move(name), type, std::move(shape), std::string(values.size() * sizeof(T), '\0')};
  if (!values.empty()) std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}
template Tensor MakeTensor(std::string, DataType, std::vector<int64_t>, const std::vector<float>&);
template Tensor MakeTensor(std::string, DataType, std::vector<int64_t>,
                           const std::vector<uint8_t>&);
template Tensor MakeTensor(std::string, DataType, std::vector<int64_t>,
                           const std::vector<int64_t>&);
template Tensor MakeTensor(std::string, DataType, std::vector<int64_t>,
                           const std::vector<int32_t>&);
template Tensor MakeTensor(std::string, DataType, std::vector<int64_t>, const std::vector<double>&);

Tensor MakeBytesTensor(std::string name, const std::vector<std::string>& values) {
  Tensor t{std::move(name), DataType::kBytes, {static_cast<int64_t>(values.size())}, ""};
  for (const std::string& v : values) {
    PutLength(&t.data, static_cast<uint32_t>(v.size()));
    t.data += v;
  }
  return t;
}

Body EncodeInferResponse(const InferResponse& response, const std::vector<RequestedOutput>& outputs,
                         bool all_binary) {
  Json message{{"model_name", response.model_name}, {"model_version", response.model_version}};
  if (!response.id.empty()) message["id"] = response.id;
  std::vector<bool> binary;
  for (const Tensor& t : response.outputs) {
    bool b = all_binary || internal::NeedsBinary(t);
    for (const RequestedOutput& o : outputs) b = b || (o.name == t.name && o.binary);
    binary.push_back(b);
  }
  return internal::EncodeTensors(std::move(message), "outputs", response.outputs, binary);
}

}  // namespace reel::serve
