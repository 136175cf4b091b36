#include "dataset/layout.h"

#include <cinttypes>
#include <cstdio>

#include "base/check.h"
#include "base/hash.h"
#include "base/strings.h"

namespace reel::dataset {
namespace {

bool IsKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '+' || c == '=' || c == '@' || c == ',';
}

bool IsSplitChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

// Every mode with its name and its payload member's extension: the one table the four
// functions below read.
struct ModeNames {
  DatasetMode mode;
  std::string_view name, extension;
};
constexpr ModeNames kModes[] = {{DatasetMode::kVideo, "video", "mp4"},
                                {DatasetMode::kFrames, "frames", "frames.zst"},
                                {DatasetMode::kFeatures, "features", "f32"}};

const ModeNames& NamesOf(DatasetMode mode) {
  for (const ModeNames& m : kModes) {
    if (m.mode == mode) return m;
  }
  REEL_CHECK(false) << "dataset mode " << static_cast<int>(mode) << " is not in kModes";
  return kModes[0];
}

}  // namespace

std::string_view DatasetModeName(DatasetMode mode) { return NamesOf(mode).name; }

Result<DatasetMode> ParseDatasetMode(std::string_view name) {
  for (const ModeNames& m : kModes) {
    if (m.name == name) return m.mode;
  }
  return InvalidArgumentError("unknown dataset mode '" + PrintableForMessage(name) +
                              "' (expected \"video\", \"frames\" or \"features\")");
}

std::string_view PayloadExtension(DatasetMode mode) { return NamesOf(mode).extension; }

Result<DatasetMode> ModeOfExtension(std::string_view ext) {
  for (const ModeNames& m : kModes) {
    if (m.extension == ext) return m.mode;
  }
  return InvalidArgumentError("unknown payload extension '" + PrintableForMessage(ext) +
                              "' (expected \"mp4\", \"frames.zst\" or \"f32\")");
}

Status ValidateSampleKey(std::string_view key) {
  if (key.empty()) return InvalidArgumentError("empty sample key");
  if (key.size() > kMaxSampleKeyBytes) {
    return InvalidArgumentError("sample key '" + PrintableForMessage(key) + "' is " +
                                std::to_string(key.size()) + " bytes; at most " +
                                std::to_string(kMaxSampleKeyBytes) + " are allowed");
  }
  for (char c : key) {
    if (!IsKeyChar(c)) {
      return InvalidArgumentError("sample key '" + PrintableForMessage(key) + "' contains '" +
                                  PrintableForMessage(std::string_view(&c, 1)) +
                                  "'; keys are made of [A-Za-z0-9_+=@,-]");
    }
  }
  return Status::Ok();
}

std::string SanitizeSampleKey(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (char c : raw) out += IsKeyChar(c) ? c : '_';
  if (out.empty()) out = "_";
  if (out.size() > kMaxSampleKeyBytes) {
    char suffix[18];
    std::snprintf(suffix, sizeof(suffix), "-%016" PRIx64, Xxh3_64(raw));
    out.resize(kMaxSampleKeyBytes - 17);
    out += suffix;
  }
  return out;
}

Status ValidateSplitName(std::string_view split) {
  if (split.empty() || split.size() > 64) {
    return InvalidArgumentError("split name '" + PrintableForMessage(split) +
                                "' must be 1..64 bytes");
  }
  for (char c : split) {
    if (!IsSplitChar(c)) {
      return InvalidArgumentError("split name '" + PrintableForMessage(split) +
                                  "' may contain only [A-Za-z0-9_-]");
    }
  }
  return Status::Ok();
}

Result<std::string> NormalizeRoot(std::string_view root) {
  while (!root.empty() && root.back() == '/') root.remove_suffix(1);
  if (root.empty()) return std::string();
  Status valid = storage::ValidateKey(root);
  if (!valid.ok()) {
    return InvalidArgumentError("bad dataset root '" + PrintableForMessage(root) +
                                "': " + valid.message());
  }
  return std::string(root);
}

std::string DatasetKey(std::string_view root, std::string_view relative) {
  if (root.empty()) return std::string(relative);
  std::string key(root);
  key += '/';
  key += relative;
  return key;
}

std::string ManifestKey(std::string_view root) { return DatasetKey(root, kManifestFileName); }

std::string SplitPrefix(std::string_view root, std::string_view split) {
  return DatasetKey(root, std::string(split) + "/");
}

std::string ShardName(uint32_t number) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "shard-%06" PRIu32, number);
  return buf;
}

std::string ShardTarKey(std::string_view root, std::string_view split, uint32_t number) {
  return SplitPrefix(root, split) + ShardName(number) + ".tar";
}

std::string ShardIndexKey(std::string_view root, std::string_view split, uint32_t number) {
  return SplitPrefix(root, split) + ShardName(number) + ".idx";
}

std::optional<uint32_t> ParseShardName(std::string_view name) {
  for (std::string_view ext : {".tar", ".idx"}) {
    if (name.size() > ext.size() && name.substr(name.size() - ext.size()) == ext) {
      name.remove_suffix(ext.size());
      break;
    }
  }
  constexpr std::string_view kPrefix = "shard-";
  if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  std::string_view digits = name.substr(kPrefix.size());
  if (digits.size() < 6 || digits.size() > 10) return std::nullopt;
  uint64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  if (value > UINT32_MAX) return std::nullopt;
  auto number = static_cast<uint32_t>(value);
  if (ShardName(number) != name) return std::nullopt;  // only the canonical spelling
  return number;
}

}  // namespace reel::dataset
