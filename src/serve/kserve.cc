// The KServe v2 codec. simdjson's exceptions are off in this file's use of it: every call is the
// error-code form, so nothing escapes (the adapter rule holds without a try block).
#include "serve/kserve.h"

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "base/strings.h"

namespace reel::serve {
namespace {

namespace od = simdjson::ondemand;
using Json = nlohmann::json;

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
constexpr int kMaxNesting = 8;
constexpr int64_t kMaxDim = int64_t{1} << 40;

Status Malformed(std::string_view where, simdjson::error_code error) {
  return InvalidArgumentError("malformed inference request (" + std::string(where) +
                              "): " + simdjson::error_message(error));
}

std::string Quoted(std::string_view name) { return "'" + PrintableForMessage(name, 100) + "'"; }

template <class T>
void Put(std::string* out, size_t index, T value) {
  std::memcpy(out->data() + index * sizeof(T), &value, sizeof(T));
}

void PutLength(std::string* out, uint32_t length) {
  char bytes[4];
  std::memcpy(bytes, &length, 4);
  out->append(bytes, 4);
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

Result<std::vector<int64_t>> ParseShape(od::value value, const std::string& name) {
  od::array array;
  if (auto e = value.get_array().get(array)) return Malformed("shape of " + Quoted(name), e);
  std::vector<int64_t> shape;
  for (auto element : array) {
    int64_t dim = 0;
    if (element.get_int64().get(dim) || dim < 0 || dim > kMaxDim) {
      return InvalidArgumentError("input " + Quoted(name) +
                                  ": shape must be a list of non-negative integers");
    }
    if (shape.size() == 16) return InvalidArgumentError("input " + Quoted(name) + ": over 16 dims");
    shape.push_back(dim);
  }
  return shape;
}

// Elements the shape holds, or InvalidArgument past `limit` (no overflow: each dim ≤ 2^40).
Result<int64_t> CountElements(const Tensor& tensor, int64_t limit) {
  int64_t n = 1;
  for (int64_t d : tensor.shape) {
    if (d != 0 && n > limit / d) {
      return InvalidArgumentError("input " + Quoted(tensor.name) + ": shape " +
                                  ShapeText(tensor.shape) + " is over the limit of " +
                                  std::to_string(limit) + " elements");
    }
    n *= d;
  }
  return n;
}

struct PendingInput {
  Tensor tensor;
  std::optional<int64_t> binary_size;
  bool has_data = false;
};

Result<std::optional<int64_t>> BinaryDataSize(od::object parameters, const std::string& name) {
  od::value value;
  auto error = parameters.find_field_unordered("binary_data_size").get(value);
  if (error == simdjson::NO_SUCH_FIELD) return std::optional<int64_t>();
  int64_t size = 0;
  if (error || value.get_int64().get(size) || size < 0) {
    return InvalidArgumentError("input " + Quoted(name) +
                                ": binary_data_size must be a non-negative integer");
  }
  return std::optional<int64_t>(size);
}

Result<PendingInput> ParseInput(od::value value, const ParseLimits& limits, size_t json_bytes) {
  od::object object;
  if (auto e = value.get_object().get(object)) return Malformed("an input", e);
  PendingInput input;
  Tensor& t = input.tensor;
  std::string_view text;
  if (object.find_field_unordered("name").get_string().get(text)) {
    return InvalidArgumentError("every input needs a \"name\" string");
  }
  t.name = std::string(text);
  if (object.find_field_unordered("datatype").get_string().get(text)) {
    return InvalidArgumentError("input " + Quoted(t.name) + ": needs a \"datatype\" string");
  }
  std::optional<DataType> type = DataTypeFromName(text);
  if (!type) {
    return InvalidArgumentError("input " + Quoted(t.name) + ": unknown datatype " + Quoted(text));
  }
  t.datatype = *type;
  od::value shape;
  if (object.find_field_unordered("shape").get(shape)) {
    return InvalidArgumentError("input " + Quoted(t.name) + ": needs a \"shape\"");
  }
  REEL_ASSIGN_OR_RETURN(t.shape, ParseShape(shape, t.name));
  REEL_ASSIGN_OR_RETURN(const int64_t expected, CountElements(t, limits.max_elements));
  od::object parameters;
  if (!object.find_field_unordered("parameters").get_object().get(parameters)) {
    REEL_ASSIGN_OR_RETURN(input.binary_size, BinaryDataSize(parameters, t.name));
  }
  od::value data;
  const auto data_error = object.find_field_unordered("data").get(data);
  input.has_data = !data_error;
  if (input.has_data && input.binary_size) {
    return InvalidArgumentError("input " + Quoted(t.name) + ": has both data and binary_data_size");
  }
  if (!input.has_data && !input.binary_size) {
    return InvalidArgumentError("input " + Quoted(t.name) + ": needs \"data\" or binary_data_size");
  }
  if (!input.has_data) return input;
  // Each JSON element takes two bytes at least: more elements than that cannot be there, so the
  // shape must not size the buffer.
  if (static_cast<uint64_t>(expected) > json_bytes / 2 + 1) {
    return InvalidArgumentError("input " + Quoted(t.name) + ": shape " + ShapeText(t.shape) +
                                " has " + std::to_string(expected) +
                                " elements, more than the request's JSON can hold");
  }
  ElementWriter writer(&t, expected);
  REEL_RETURN_IF_ERROR(AppendValues(data, &writer, 0));
  if (writer.count() != expected) {
    return InvalidArgumentError("input " + Quoted(t.name) + ": shape " + ShapeText(t.shape) +
                                " has " + std::to_string(expected) + " elements but data has " +
                                std::to_string(writer.count()));
  }
  return input;
}

// Checks a binary tensor's bytes against its shape and type.
Status CheckBinary(const Tensor& t, int64_t expected) {
  const size_t size = ElementSize(t.datatype);
  if (size > 0) {
    if (t.data.size() != static_cast<size_t>(expected) * size) {
      return InvalidArgumentError("input " + Quoted(t.name) + ": shape " + ShapeText(t.shape) +
                                  " of " + std::string(DataTypeName(t.datatype)) + " needs " +
                                  std::to_string(static_cast<size_t>(expected) * size) +
                                  " bytes but binary_data_size is " +
                                  std::to_string(t.data.size()));
    }
    return Status::Ok();
  }
  REEL_ASSIGN_OR_RETURN(auto strings, t.Strings());
  if (static_cast<int64_t>(strings.size()) != expected) {
    return InvalidArgumentError("input " + Quoted(t.name) + ": shape " + ShapeText(t.shape) +
                                " has " + std::to_string(expected) +
                                " elements but its binary data holds " +
                                std::to_string(strings.size()));
  }
  return Status::Ok();
}

Result<RequestedOutput> ParseRequestedOutput(od::value value) {
  od::object object;
  if (auto e = value.get_object().get(object)) return Malformed("an output", e);
  RequestedOutput out;
  std::string_view name;
  if (object.find_field_unordered("name").get_string().get(name)) {
    return InvalidArgumentError("every requested output needs a \"name\" string");
  }
  out.name = std::string(name);
  od::object parameters;
  if (object.find_field_unordered("parameters").get_object().get(parameters)) return out;
  for (auto field : parameters) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return InvalidArgumentError("malformed output parameters");
    if (key == "binary_data") {
      if (field.value().get_bool().get(out.binary)) {
        return InvalidArgumentError("output " + Quoted(out.name) + ": binary_data must be a bool");
      }
    } else if (key == "classification") {
      int64_t k = 0;
      if (field.value().get_int64().get(k) || k < 1 || k > 1'000'000) {
        return InvalidArgumentError("output " + Quoted(out.name) +
                                    ": classification must be a positive integer");
      }
      out.classification = static_cast<int>(k);
    }
  }
  return out;
}

Status ParseRequestParameters(od::value value, InferRequest* request) {
  od::object object;
  if (auto e = value.get_object().get(object)) return Malformed("parameters", e);
  for (auto field : object) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return InvalidArgumentError("malformed parameters");
    if (key == "binary_data_output") {
      if (field.value().get_bool().get(request->binary_output)) {
        return InvalidArgumentError("binary_data_output must be a bool");
      }
    } else if (key == "timeout") {
      int64_t us = 0;
      if (field.value().get_int64().get(us) || us < 0) {
        return InvalidArgumentError("timeout must be a non-negative integer (microseconds)");
      }
      request->timeout_us = us;
    }
  }
  return Status::Ok();
}

// The top level: inputs parsed, binary parts still to attach.
Result<std::vector<PendingInput>> ParseTopLevel(od::document& doc, const ParseLimits& limits,
                                                size_t json_bytes, InferRequest* request) {
  od::object object;
  if (auto e = doc.get_object().get(object)) return Malformed("not a JSON object", e);
  std::vector<PendingInput> inputs;
  bool saw_inputs = false;
  for (auto field : object) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return Malformed("a key", e);
    od::value value;
    if (auto e = field.value().get(value)) return Malformed(key, e);
    if (key == "id") {
      std::string_view id;
      if (value.get_string().get(id)) return InvalidArgumentError("\"id\" must be a string");
      request->id = std::string(id);
    } else if (key == "parameters") {
      REEL_RETURN_IF_ERROR(ParseRequestParameters(value, request));
    } else if (key == "inputs" || key == "outputs") {
      od::array array;
      if (value.get_array().get(array))
        return InvalidArgumentError('"' + std::string(key) + "\" must be a list");
      for (auto element : array) {
        od::value item;
        if (auto e = element.get(item)) return Malformed(key, e);
        if (inputs.size() + request->outputs.size() == 2 * limits.max_tensors) {
          return InvalidArgumentError("over " + std::to_string(limits.max_tensors) + " tensors");
        }
        if (key == "inputs") {
          REEL_ASSIGN_OR_RETURN(PendingInput input, ParseInput(item, limits, json_bytes));
          inputs.push_back(std::move(input));
        } else {
          REEL_ASSIGN_OR_RETURN(RequestedOutput out, ParseRequestedOutput(item));
          request->outputs.push_back(std::move(out));
        }
      }
      saw_inputs = saw_inputs || key == "inputs";
    }
  }
  if (!saw_inputs || inputs.empty()) return InvalidArgumentError("the request has no inputs");
  if (inputs.size() > limits.max_tensors) {
    return InvalidArgumentError("over " + std::to_string(limits.max_tensors) + " inputs");
  }
  // Past the object, the document must be over (current_location says OUT_OF_BOUNDS).
  const char* rest = nullptr;
  if (doc.current_location().get(rest) != simdjson::OUT_OF_BOUNDS) {
    return Malformed("after the object", simdjson::TRAILING_CONTENT);
  }
  return inputs;
}

// Hands each binary input its bytes, in order, from what follows the JSON.
Status AttachBinary(std::string_view binary, std::vector<PendingInput>* pending,
                    const ParseLimits& limits, InferRequest* request) {
  size_t offset = 0;
  for (PendingInput& input : *pending) {
    if (input.binary_size) {
      const uint64_t size = static_cast<uint64_t>(*input.binary_size);
      if (size > binary.size() - offset) {
        return InvalidArgumentError("input " + Quoted(input.tensor.name) + ": binary_data_size " +
                                    std::to_string(size) + " runs past the end of the body (" +
                                    std::to_string(binary.size() - offset) + " bytes left)");
      }
      input.tensor.data.assign(binary.data() + offset, size);
      offset += size;
      REEL_ASSIGN_OR_RETURN(const int64_t expected,
                            CountElements(input.tensor, limits.max_elements));
      REEL_RETURN_IF_ERROR(CheckBinary(input.tensor, expected));
    }
    request->inputs.push_back(std::move(input.tensor));
  }
  if (offset != binary.size()) {
    return InvalidArgumentError(std::to_string(binary.size() - offset) +
                                " bytes after the binary inputs belong to no input");
  }
  return Status::Ok();
}

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

Result<Tensor> TensorFromJson(const Json& item, std::string_view tail, size_t* offset) {
  Tensor t;
  if (!item.is_object() || !item.contains("name") || !item.contains("datatype") ||
      !item.contains("shape")) {
    return InvalidArgumentError("a response output lacks name, datatype or shape");
  }
  t.name = item["name"].get<std::string>();
  auto type = DataTypeFromName(item["datatype"].get<std::string>());
  if (!type) return InvalidArgumentError("output " + Quoted(t.name) + ": unknown datatype");
  t.datatype = *type;
  t.shape = item["shape"].get<std::vector<int64_t>>();
  const auto params = item.find("parameters");
  if (params != item.end() && params->contains("binary_data_size")) {
    const uint64_t size = (*params)["binary_data_size"].get<uint64_t>();
    if (size > tail.size() - *offset) return InvalidArgumentError("binary output past the body");
    t.data.assign(tail.data() + *offset, size);
    *offset += size;
    return t;
  }
  // JSON data: reuse the request parser's typed path through a one-input request.
  Json request{{"inputs", Json::array({Json{{"name", t.name},
                                            {"datatype", DataTypeName(t.datatype)},
                                            {"shape", t.shape},
                                            {"data", item.value("data", Json::array())}}})}};
  REEL_ASSIGN_OR_RETURN(InferRequest parsed, ParseInferRequest(request.dump(), std::nullopt));
  return std::move(parsed.inputs[0]);
}

}  // namespace

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

Result<InferRequest> ParseInferRequest(std::string_view body, std::optional<size_t> json_length,
                                       const ParseLimits& limits) {
  const size_t length = json_length.value_or(body.size());
  if (length > body.size()) {
    return InvalidArgumentError("Inference-Header-Content-Length " + std::to_string(length) +
                                " is past the body's " + std::to_string(body.size()) + " bytes");
  }
  // One parser per thread: it keeps its buffers between requests.
  thread_local od::parser parser;
  const simdjson::padded_string json(body.data(), length);
  od::document doc;
  if (auto e = parser.iterate(json).get(doc)) return Malformed("JSON", e);
  InferRequest request;
  REEL_ASSIGN_OR_RETURN(std::vector<PendingInput> pending,
                        ParseTopLevel(doc, limits, length, &request));
  REEL_RETURN_IF_ERROR(AttachBinary(body.substr(length), &pending, limits, &request));
  return request;
}

Body EncodeInferResponse(const InferResponse& response, const std::vector<RequestedOutput>& outputs,
                         bool all_binary) {
  Json message{{"model_name", response.model_name}, {"model_version", response.model_version}};
  if (!response.id.empty()) message["id"] = response.id;
  std::vector<bool> binary;
  for (const Tensor& t : response.outputs) {
    bool b = all_binary || NeedsBinary(t);
    for (const RequestedOutput& o : outputs) b = b || (o.name == t.name && o.binary);
    binary.push_back(b);
  }
  return EncodeTensors(std::move(message), "outputs", response.outputs, binary);
}

Body EncodeInferRequest(const InferRequest& request, bool binary) {
  Json message = Json::object();
  if (!request.id.empty()) message["id"] = request.id;
  Json parameters = Json::object();
  if (request.binary_output) parameters["binary_data_output"] = true;
  if (request.timeout_us) parameters["timeout"] = *request.timeout_us;
  if (!parameters.empty()) message["parameters"] = parameters;
  if (!request.outputs.empty()) {
    Json outs = Json::array();
    for (const RequestedOutput& o : request.outputs) {
      Json p = Json::object();
      if (o.binary) p["binary_data"] = true;
      if (o.classification) p["classification"] = *o.classification;
      Json item{{"name", o.name}};
      if (!p.empty()) item["parameters"] = p;
      outs.push_back(std::move(item));
    }
    message["outputs"] = std::move(outs);
  }
  std::vector<bool> as_binary;
  for (const Tensor& t : request.inputs) as_binary.push_back(binary || NeedsBinary(t));
  return EncodeTensors(std::move(message), "inputs", request.inputs, as_binary);
}

Result<InferResponse> ParseInferResponse(std::string_view body, std::optional<size_t> json_length) {
  const size_t length = json_length.value_or(body.size());
  if (length > body.size()) return InvalidArgumentError("JSON length past the body");
  Json message = Json::parse(body.substr(0, length), nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded() || !message.is_object()) {
    return InvalidArgumentError("the inference response is not a JSON object: " +
                                PrintableForMessage(body.substr(0, length), 200));
  }
  InferResponse response;
  response.model_name = message.value("model_name", "");
  response.model_version = message.value("model_version", "");
  response.id = message.value("id", "");
  const std::string_view tail = body.substr(length);
  size_t offset = 0;
  try {
    for (const Json& item : message.value("outputs", Json::array())) {
      REEL_ASSIGN_OR_RETURN(Tensor t, TensorFromJson(item, tail, &offset));
      response.outputs.push_back(std::move(t));
    }
  } catch (const Json::exception& e) {  // a field of the wrong type
    return InvalidArgumentError(std::string("malformed inference response: ") + e.what());
  }
  return response;
}

Result<std::optional<size_t>> JsonLengthHeader(std::string_view header, size_t body_size) {
  if (header.empty()) return std::optional<size_t>();
  uint64_t value = 0;
  for (char c : header) {
    if (c < '0' || c > '9' || value > body_size) {
      return InvalidArgumentError("Inference-Header-Content-Length must be a byte count, not " +
                                  Quoted(header));
    }
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  if (value > body_size) {
    return InvalidArgumentError("Inference-Header-Content-Length " + std::to_string(value) +
                                " is past the body's " + std::to_string(body_size) + " bytes");
  }
  return std::optional<size_t>(static_cast<size_t>(value));
}

}  // namespace reel::serve
