// safetensors: the weight file format Reel reads and writes (no pickle on any load path).
// Layout: 8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value", ...}}
// then the data buffer; offsets are relative to the buffer's start.
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace reel::models {

struct TensorBytes {
  std::string dtype;  // "F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL"
  std::vector<int64_t> shape;  // [] for a scalar
  std::string data;            // little-endian, row-major; size = elements * dtype size
};

struct SafetensorsFile {
  std::map<std::string, TensorBytes> tensors;   // by name
  std::map<std::string, std::string> metadata;  // "__metadata__" (string values only)
};

// Bytes per element of a dtype name; 0 for an unknown one.
size_t DtypeSize(std::string_view dtype);

// The file's bytes. Tensors are laid out in name order, each aligned to 8 bytes, and the header
// is padded with spaces to a multiple of 8 (as the reference implementation does).
// Errors: InvalidArgument for an unknown dtype, a negative dimension or a size mismatch.
Result<std::string> WriteSafetensors(const SafetensorsFile& file);

// Where WriteSafetensors puts each tensor, for a writer that fills the file piece by piece
// without the tensors in memory first (a registry pull). The bytes between `head` and the first
// tensor, and between tensors, are zeros.
struct TensorSpec {
  std::string dtype;
  std::vector<int64_t> shape;
};
struct SafetensorsLayout {
  std::string head;                         // the 8-byte length and the padded JSON header
  std::map<std::string, uint64_t> offsets;  // each tensor's first byte in the file
  uint64_t file_size = 0;
};
// Errors: as WriteSafetensors, but for the specs alone.
Result<SafetensorsLayout> LayOutSafetensors(const std::map<std::string, TensorSpec>& tensors,
                                            const std::map<std::string, std::string>& metadata);

// Errors: DataLoss for anything malformed: a header length past the end, bad JSON, unknown
// dtypes, offsets outside the buffer, overlapping or out-of-order tensors, sizes that do not
// match shape x dtype, or bytes left over. `what` names the source in messages.
Result<SafetensorsFile> ReadSafetensors(std::string_view bytes,
                                        std::string_view what = "safetensors");

}  // namespace reel::models
