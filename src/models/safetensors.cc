#include "models/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>

namespace reel::models {
namespace {

using nlohmann::json;

Result<uint64_t> Elements(const std::vector<int64_t>& shape, const std::string& name) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgumentError("tensor '" + name + "' has a negative dimension");
    if (d != 0 && n > UINT64_MAX / static_cast<uint64_t>(d)) {
      return InvalidArgumentError("tensor '" + name + "' is too large");
    }
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

}  // namespace

size_t DtypeSize(std::string_view dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2")
    return 1;
  return 0;
}

Result<SafetensorsLayout> LayOutSafetensors(const std::map<std::string, TensorSpec>& tensors,
                                            const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::map<std::string, uint64_t> offsets;  // from the data buffer's start, until the end
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const size_t width = DtypeSize(t.dtype);
    if (width == 0) {
      return InvalidArgumentError("tensor '" + name + "': unknown dtype '" + t.dtype + "'");
    }
    REEL_ASSIGN_OR_RETURN(uint64_t n, Elements(t.shape, name));
    offset = (offset + 7) / 8 * 8;
    header[name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + n * width}}};
    offsets[name] = offset;
    offset += n * width;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  SafetensorsLayout layout;
  layout.head.assign(8, '\0');
  const uint64_t length = text.size();
  for (size_t i = 0; i < 8; ++i) layout.head[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  layout.head += text;
  for (auto& [name, at] : offsets) at += layout.head.size();
  layout.offsets = std::move(offsets);
  layout.file_size = layout.head.size() + offset;
  return layout;
}

Result<std::string> WriteSafetensors(const SafetensorsFile& file) {
  std::map<std::string, TensorSpec> specs;
  for (const auto& [name, t] : file.tensors) {
    const size_t width = DtypeSize(t.dtype);
    REEL_ASSIGN_OR_RETURN(uint64_t n, Elements(t.shape, name));
    if (width != 0 && n * width != t.data.size()) {
      return InvalidArgumentError("tensor '" + name + "': " + std::to_string(t.data.size()) +
                                  " bytes for " + std::to_string(n) + " elements of " + t.dtype);
    }
    specs[name] = {t.dtype, t.shape};
  }
  REEL_ASSIGN_OR_RETURN(SafetensorsLayout layout, LayOutSafetensors(specs, file.metadata));
  std::string out = std::move(layout.head);
  out.resize(layout.file_size, '\0');
  for (const auto& [name, t] : file.tensors) {
    if (!t.data.empty())
      std::memcpy(out.data() + layout.offsets[name], t.data.data(), t.data.size());
  }
  return out;
}

Result<SafetensorsFile> ReadSafetensors(std::string_view bytes, std::string_view what) {
  auto bad = [&](const std::string& why) { return DataLossError(std::string(what) + ": " + why); };
  if (bytes.size() < 8) return bad("shorter than the 8-byte header length");
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length = (length << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  if (length > bytes.size() - 8)
    return bad("header length " + std::to_string(length) + " runs past the file");
  json header = json::parse(bytes.substr(8, length), nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) return bad("the header is not a JSON object");
  const std::string_view buffer = bytes.substr(8 + length);
  SafetensorsFile file;
  struct Span {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Span> spans;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return bad("__metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) return bad("__metadata__." + key + " is not a string");
        file.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() ||
        !entry.contains("shape") || !entry["shape"].is_array() || !entry.contains("data_offsets") ||
        !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2) {
      return bad("tensor '" + name + "' lacks dtype, shape or data_offsets");
    }
    TensorBytes t;
    t.dtype = entry["dtype"].get<std::string>();
    size_t width = DtypeSize(t.dtype);
    if (width == 0) return bad("tensor '" + name + "' has unknown dtype '" + t.dtype + "'");
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_unsigned()) return bad("tensor '" + name + "' has a bad shape");
      t.shape.push_back(d.get<int64_t>());
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
      return bad("tensor '" + name + "' has bad data_offsets");
    }
    uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end || end > buffer.size())
      return bad("tensor '" + name + "' lies outside the data");
    auto n = Elements(t.shape, name);
    if (!n.ok() || *n * width != end - begin) {
      return bad("tensor '" + name + "': " + std::to_string(end - begin) +
                 " bytes do not hold its shape of " + t.dtype);
    }
    t.data = std::string(buffer.substr(begin, end - begin));
    spans.push_back({begin, end, name});
    file.tensors.emplace(name, std::move(t));
  }
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].begin < spans[i - 1].end) {
      return bad("tensors '" + spans[i - 1].name + "' and '" + spans[i].name + "' overlap");
    }
  }
  return file;
}

}  // namespace reel::models
