// The KServe v2 inference protocol's REST messages (the Open Inference Protocol, as KServe and
// Triton speak it): inference requests and responses as JSON, with the binary tensor data
// extension. Pure functions over bytes: no model, no HTTP, no LibTorch.
//
// A request body is JSON, or, with the binary extension, JSON followed by the raw bytes of the
// inputs whose parameters carry "binary_data_size"; the HTTP header
// Inference-Header-Content-Length gives the JSON part's length. Tensor bytes are little-endian,
// row major, without padding; a BYTES element is a 4-byte little-endian length and its bytes.
// JSON "data" may be flat or nested as the shape; its element count must equal the shape's.
//
// Requests are parsed with simdjson, FP32 and UINT8 arrays of plain numbers by a scanner of
// Reel's own (a 1.6 MB FP32 request in about 4.5 ms of a core on the development VM);
// responses, which are small (scores), with nlohmann.
//
// Errors: InvalidArgument naming the problem and the tensor ("input 'clip': shape [1,3,8,112,112]
// has 301056 elements but data has 301055"). Never crashes on any input (fuzzed in the tests).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace reel::serve {

enum class DataType {
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kBf16,
  kFp32,
  kFp64,
  kBytes,
};

// "FP32" <-> kFp32, as the protocol spells them.
std::optional<DataType> DataTypeFromName(std::string_view name);
std::string_view DataTypeName(DataType type);
// Bytes per element; 0 for BYTES (variable length).
size_t ElementSize(DataType type);
// A shape as messages show it: "[1,3,8,112,112]".
std::string ShapeText(const std::vector<int64_t>& shape);

struct Tensor {
  std::string name;
  DataType datatype = DataType::kFp32;
  std::vector<int64_t> shape;
  // Little-endian, row major. BYTES: each element as a 4-byte length and its bytes.
  std::string data;

  int64_t elements() const;  // the product of shape (1 for a scalar)
  // The elements of a BYTES tensor. InvalidArgument when `data` is not well formed.
  Result<std::vector<std::string_view>> Strings() const;
};

// A tensor of `type` holding `values` (as many as the shape says), little-endian.
template <class T>
Tensor MakeTensor(std::string name, DataType type, std::vector<int64_t> shape,
                  const std::vector<T>& values);
Tensor MakeBytesTensor(std::string name, const std::vector<std::string>& values);

struct RequestedOutput {
  std::string name;
  bool binary = false;                // parameters.binary_data
  std::optional<int> classification;  // parameters.classification: the top k as "score:index:label"
};

inline constexpr int kMaxClipsPerVideo = 256;

struct InferRequest {
  std::string id;
  std::vector<Tensor> inputs;
  std::vector<RequestedOutput> outputs;  // empty: every output, as JSON unless binary_output
  bool binary_output = false;            // parameters.binary_data_output
  // Optional request parameters Reel reads.
  std::optional<int64_t> timeout_us;  // parameters.timeout (microseconds)
  std::optional<int> clips;           // parameters.clips: clips a video is scored by (1..256)
  bool timeline = false;              // parameters.timeline: each video's scores per clip too
};

struct InferResponse {
  std::string model_name;
  std::string model_version;
  std::string id;
  std::vector<Tensor> outputs;
};

// A body and, with the binary extension, the length of its JSON part (the value of
// Inference-Header-Content-Length).
struct Body {
  std::string bytes;
  std::optional<size_t> json_length;
};

struct ParseLimits {
  int64_t max_elements = int64_t{1} << 31;  // per tensor
  size_t max_tensors = 64;
  // "data" arrays of numbers at least this long are cut out of the text simdjson indexes and
  // read by the number scanner alone (the same values and the same refusals; 0: never).
  size_t cut_data_bytes = 64 * 1024;
};

// `json_length`: Inference-Header-Content-Length, absent when the whole body is JSON.
// `readable`: how many bytes from body.data() may be read, where the caller has more than
// body.size() (a string's capacity: the HTTP server gives bodies http::kBodyReadAhead more).
// With 64 past the JSON (simdjson's padding) the JSON is parsed where it lies, not copied first.
Result<InferRequest> ParseInferRequest(std::string_view body, std::optional<size_t> json_length,
                                       const ParseLimits& limits = {}, size_t readable = 0);
// Tensors whose RequestedOutput says binary (or all, with `all_binary`) travel after the JSON.
Body EncodeInferResponse(const InferResponse& response, const std::vector<RequestedOutput>& outputs,
                         bool all_binary);

// The client's side, for Reel's own clients, tests and benchmarks: a request with every input as
// JSON data, or (`binary`) as binary data.
Body EncodeInferRequest(const InferRequest& request, bool binary);
Result<InferResponse> ParseInferResponse(std::string_view body, std::optional<size_t> json_length);

// The value of an Inference-Header-Content-Length header: absent when `header` is empty,
// InvalidArgument when it is not a length within `body_size`.
Result<std::optional<size_t>> JsonLengthHeader(std::string_view header, size_t body_size);

}  // namespace reel::serve
