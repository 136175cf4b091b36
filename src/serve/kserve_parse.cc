// The server's side of the KServe v2 codec: ParseInferRequest, with the binary tensor extension,
// and the Inference-Header-Content-Length header. simdjson's exceptions are off in this file's use
// of it: every call is the error-code form, so nothing escapes (the adapter rule holds without a
// try block).
#include <simdjson.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "serve/kserve.h"
#include "serve/kserve_internal.h"

namespace reel::serve {
namespace internal {

ParserPool::Lease ParserPool::Take() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (idle_.empty()) return Lease(this, std::make_unique<simdjson::ondemand::parser>());
  std::unique_ptr<simdjson::ondemand::parser> parser = std::move(idle_.back());
  idle_.pop_back();
  return Lease(this, std::move(parser));
}

void ParserPool::GiveBack(std::unique_ptr<simdjson::ondemand::parser> parser) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (idle_.size() < HardwareThreads()) idle_.push_back(std::move(parser));
}

ParserPool& Parsers() {
  static auto* pool = new ParserPool();  // never destroyed: handlers may outlive statics
  return *pool;
}

Status Malformed(std::string_view where, simdjson::error_code error) {
  return InvalidArgumentError("malformed inference request (" + std::string(where) +
                              "): " + simdjson::error_message(error));
}

}  // namespace internal
namespace {

namespace od = simdjson::ondemand;
using internal::Malformed;
using internal::Quoted;

constexpr int64_t kMaxDim = int64_t{1} << 40;

// An input's fields as one pass over its object finds them. (find_field_unordered walks on from
// the last field it found, so every field looked up after a large "data" stepped over all of it
// again: a fifth of a 1.6 MB request's parse.) What is wrong is kept and worded once the input's
// name is known.
enum class ShapeRead { kMissing, kRead, kNotAList, kBadDims, kTooManyDims };

struct InputFields {
  std::optional<std::string_view> name, datatype, data;  // data: its JSON text
  ShapeRead shape_read = ShapeRead::kMissing;
  simdjson::error_code shape_error = simdjson::SUCCESS;  // why it is not a list
  std::vector<int64_t> shape;
  std::optional<int64_t> binary_size;
  bool bad_binary_size = false;
};

ShapeRead ReadShape(od::value value, InputFields* f) {
  od::array array;
  if ((f->shape_error = value.get_array().get(array))) return ShapeRead::kNotAList;
  for (auto element : array) {
    int64_t dim = 0;
    if (element.get_int64().get(dim) || dim < 0 || dim > kMaxDim) return ShapeRead::kBadDims;
    if (f->shape.size() == 16) return ShapeRead::kTooManyDims;
    f->shape.push_back(dim);
  }
  return ShapeRead::kRead;
}

void ReadInputParameters(od::value value, InputFields* f) {
  od::object parameters;
  if (value.get_object().get(parameters)) return;  // not an object: nothing Reel reads
  od::value size_value;
  auto error = parameters.find_field_unordered("binary_data_size").get(size_value);
  if (error == simdjson::NO_SUCH_FIELD) return;
  int64_t size = 0;
  if (error || size_value.get_int64().get(size) || size < 0) {
    f->bad_binary_size = true;
    return;
  }
  f->binary_size = size;
}

// The text of any JSON value, which the data readers parse once the type and shape are known.
simdjson::error_code ValueText(od::value value, std::string_view* text) {
  od::json_type type;
  if (auto e = value.type().get(type)) return e;
  if (type == od::json_type::array) {
    od::array array;
    if (auto e = value.get_array().get(array)) return e;
    return array.raw_json().get(*text);
  }
  if (type == od::json_type::object) {
    od::object object;
    if (auto e = value.get_object().get(object)) return e;
    return object.raw_json().get(*text);
  }
  *text = value.raw_json_token();
  return simdjson::SUCCESS;
}

Status ReadInputFields(od::object object, const internal::CutRequest& cut, InputFields* f) {
  for (auto field : object) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return Malformed("an input", e);
    od::value value;
    if (auto e = field.value().get(value)) return Malformed("an input", e);
    std::string_view text;
    if (key == "name" || key == "datatype") {
      if (!value.get_string().get(text)) (key == "name" ? f->name : f->datatype) = text;
    } else if (key == "shape") {
      f->shape_read = ReadShape(value, f);
    } else if (key == "parameters") {
      ReadInputParameters(value, f);
    } else if (key == "data") {
      if (auto e = ValueText(value, &text)) return Malformed("data", e);
      f->data = cut.Original(text);
    }
  }
  return Status::Ok();
}

Status ShapeProblem(const InputFields& f, const std::string& name) {
  switch (f.shape_read) {
    case ShapeRead::kRead:
      return Status::Ok();
    case ShapeRead::kMissing:
      return InvalidArgumentError("input " + Quoted(name) + ": needs a \"shape\"");
    case ShapeRead::kNotAList:
      return Malformed("shape of " + Quoted(name), f.shape_error);
    case ShapeRead::kBadDims:
      return InvalidArgumentError("input " + Quoted(name) +
                                  ": shape must be a list of non-negative integers");
    case ShapeRead::kTooManyDims:
      return InvalidArgumentError("input " + Quoted(name) + ": over 16 dims");
  }
  return Status::Ok();
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

Result<PendingInput> ParseInput(od::value value, const ParseLimits& limits, size_t json_bytes,
                                const internal::CutRequest& cut) {
  od::object object;
  if (auto e = value.get_object().get(object)) return Malformed("an input", e);
  InputFields f;
  REEL_RETURN_IF_ERROR(ReadInputFields(object, cut, &f));
  PendingInput input;
  Tensor& t = input.tensor;
  if (!f.name) return InvalidArgumentError("every input needs a \"name\" string");
  t.name = std::string(*f.name);
  if (!f.datatype) {
    return InvalidArgumentError("input " + Quoted(t.name) + ": needs a \"datatype\" string");
  }
  std::optional<DataType> type = DataTypeFromName(*f.datatype);
  if (!type) {
    return InvalidArgumentError("input " + Quoted(t.name) + ": unknown datatype " +
                                Quoted(*f.datatype));
  }
  t.datatype = *type;
  REEL_RETURN_IF_ERROR(ShapeProblem(f, t.name));
  t.shape = std::move(f.shape);
  REEL_ASSIGN_OR_RETURN(const int64_t expected, CountElements(t, limits.max_elements));
  if (f.bad_binary_size) {
    return InvalidArgumentError("input " + Quoted(t.name) +
                                ": binary_data_size must be a non-negative integer");
  }
  input.binary_size = f.binary_size;
  input.has_data = f.data.has_value();
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
  REEL_RETURN_IF_ERROR(internal::ReadJsonData(*f.data, expected, &t));
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
    } else if (key == "clips") {
      int64_t clips = 0;
      if (field.value().get_int64().get(clips) || clips < 1 || clips > kMaxClipsPerVideo) {
        return InvalidArgumentError("clips must be an integer from 1 to " +
                                    std::to_string(kMaxClipsPerVideo));
      }
      request->clips = static_cast<int>(clips);
    } else if (key == "timeline") {
      if (field.value().get_bool().get(request->timeline)) {
        return InvalidArgumentError("timeline must be a bool");
      }
    }
  }
  return Status::Ok();
}

// The top level: inputs parsed, binary parts still to attach.
Result<std::vector<PendingInput>> ParseTopLevel(od::document& doc, const ParseLimits& limits,
                                                size_t json_bytes, const internal::CutRequest& cut,
                                                InferRequest* request) {
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
          REEL_ASSIGN_OR_RETURN(PendingInput input, ParseInput(item, limits, json_bytes, cut));
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

}  // namespace

Result<InferRequest> ParseInferRequest(std::string_view body, std::optional<size_t> json_length,
                                       const ParseLimits& limits, size_t readable) {
  const size_t length = json_length.value_or(body.size());
  if (length > body.size()) {
    return InvalidArgumentError("Inference-Header-Content-Length " + std::to_string(length) +
                                " is past the body's " + std::to_string(body.size()) + " bytes");
  }
  const internal::ParserPool::Lease parser = internal::Parsers().Take();
  // simdjson reads the request without its large data arrays, or, with none, where it lies (a
  // copy of a 1.6 MB request cost a fifth of its parse, with the page faults of new memory).
  internal::CutRequest cut;
  std::optional<simdjson::padded_string> copy;
  simdjson::padded_string_view json;
  const size_t room = std::max(readable, body.size());
  if (limits.cut_data_bytes > 0 &&
      internal::CutDataArrays(body.substr(0, length), limits.cut_data_bytes, &cut)) {
    json = simdjson::padded_string_view(cut.compact.data(), cut.compact.size(),
                                        cut.compact.capacity());
  } else if (room >= length + simdjson::SIMDJSON_PADDING) {
    json = simdjson::padded_string_view(body.data(), length, room);
  } else {
    json = copy.emplace(body.data(), length);
  }
  od::document doc;
  if (auto e = (*parser).iterate(json).get(doc)) return Malformed("JSON", e);
  InferRequest request;
  REEL_ASSIGN_OR_RETURN(std::vector<PendingInput> pending,
                        ParseTopLevel(doc, limits, length, cut, &request));
  REEL_RETURN_IF_ERROR(AttachBinary(body.substr(length), &pending, limits, &request));
  return request;
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
