// The client's side of the KServe v2 codec, for Reel's own clients, tests and benchmarks:
// EncodeInferRequest and ParseInferResponse (nlohmann; responses are small).
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "base/strings.h"
#include "serve/kserve.h"
#include "serve/kserve_internal.h"

namespace reel::serve {
namespace {

using Json = nlohmann::json;
using internal::Quoted;

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

Body EncodeInferRequest(const InferRequest& request, bool binary) {
  Json message = Json::object();
  if (!request.id.empty()) message["id"] = request.id;
  Json parameters = Json::object();
  if (request.binary_output) parameters["binary_data_output"] = true;
  if (request.timeout_us) parameters["timeout"] = *request.timeout_us;
  if (request.clips) parameters["clips"] = *request.clips;
  if (request.timeline) parameters["timeline"] = true;
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
  for (const Tensor& t : request.inputs) as_binary.push_back(binary || internal::NeedsBinary(t));
  return internal::EncodeTensors(std::move(message), "inputs", request.inputs, as_binary);
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

}  // namespace reel::serve
