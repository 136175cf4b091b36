#include "dataset/shard_index.h"

#include <nlohmann/json.hpp>

#include <cinttypes>
#include <cstdio>
#include <unordered_set>

#include "base/json.h"
#include "dataset/layout.h"
#include "dataset/tar.h"

namespace reel::dataset {
namespace {

using nlohmann::json;

bool ParseHex64(std::string_view s, uint64_t* out) {
  if (s.size() != 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return false;
    }
    v = (v << 4) | static_cast<uint64_t>(digit);
  }
  *out = v;
  return true;
}

}  // namespace

std::string Xxh3Hex(uint64_t value) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, value);
  return buf;
}

const IndexMember* IndexRecord::Find(std::string_view ext) const {
  for (const IndexMember& m : members) {
    if (m.name.size() == key.size() + 1 + ext.size() && m.name.compare(0, key.size(), key) == 0 &&
        m.name[key.size()] == '.' && std::string_view(m.name).substr(key.size() + 1) == ext) {
      return &m;
    }
  }
  return nullptr;
}

std::vector<uint64_t> ShardIndex::ClassCounts() const {
  std::vector<uint64_t> counts;
  for (const IndexRecord& r : records) {
    if (r.label < 0) continue;
    if (counts.size() <= static_cast<size_t>(r.label)) counts.resize(r.label + 1, 0);
    ++counts[r.label];
  }
  return counts;
}

Result<std::string> ShardIndex::Serialize() const {
  try {
    json records_json = json::array();
    for (const IndexRecord& r : records) {
      json members = json::array();
      for (const IndexMember& m : r.members) {
        members.push_back(json::array({m.name, m.offset, m.size, Xxh3Hex(m.xxh3)}));
      }
      records_json.push_back({{"key", r.key}, {"label", r.label}, {"members", std::move(members)}});
    }
    json doc = {{"format", kShardIndexFormat},
                {"version", version},
                {"split", split},
                {"shard", ShardName(shard)},
                {"tar_bytes", tar_bytes},
                {"records", std::move(records_json)}};
    return doc.dump();
  } catch (const json::exception& e) {
    return InvalidArgumentError(std::string("cannot encode shard index: ") + e.what());
  }
}

Result<ShardIndex> ShardIndex::Parse(std::string_view text, std::string_view what) {
  const std::string where(what);
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    return DataLossError(where + ": malformed shard index: " + e.what());
  }
  auto corrupt = [&](const std::string& message) {
    return DataLossError(where + ": corrupt shard index: " + message);
  };
  JsonFields top(doc, "");
  const std::string format = top.String("format");
  if (top.ok() && format != kShardIndexFormat) {
    return corrupt("format is '" + format + "', not '" + std::string(kShardIndexFormat) + "'");
  }
  const int64_t version = top.Int("version");
  if (!top.ok()) return corrupt(top.error());
  if (version > kShardIndexVersion) {
    return FailedPreconditionError(where + ": shard index version " + std::to_string(version) +
                                   " is newer than this build reads (" +
                                   std::to_string(kShardIndexVersion) + ")");
  }
  if (version < 1) return corrupt("version " + std::to_string(version));

  ShardIndex index;
  index.version = static_cast<int>(version);
  index.split = top.String("split");
  const std::string shard_name = top.String("shard");
  index.tar_bytes = top.Uint("tar_bytes");
  const json& records = top.Array("records");
  if (!top.ok()) return corrupt(top.error());
  if (!ValidateSplitName(index.split).ok()) return corrupt("bad split name '" + index.split + "'");
  std::optional<uint32_t> number = ParseShardName(shard_name);
  if (!number) return corrupt("bad shard name '" + shard_name + "'");
  index.shard = *number;

  std::unordered_set<std::string> keys;
  uint64_t previous_end = 0;
  index.records.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string path = "records[" + std::to_string(i) + "]";
    JsonFields fields(records[i], path);
    IndexRecord record;
    record.key = fields.String("key");
    const int64_t label = fields.Int("label");
    const json& members = fields.Array("members");
    if (!fields.ok()) return corrupt(fields.error());
    Status key_ok = ValidateSampleKey(record.key);
    if (!key_ok.ok()) return corrupt(path + ": " + key_ok.message());
    if (!keys.insert(record.key).second) return corrupt("key '" + record.key + "' appears twice");
    if (label < 0 || label > INT32_MAX) {
      return corrupt(path + ".label: " + std::to_string(label) + " is not a class index");
    }
    record.label = static_cast<int>(label);
    if (members.empty()) return corrupt(path + ".members: empty");
    for (size_t j = 0; j < members.size(); ++j) {
      const std::string mpath = path + ".members[" + std::to_string(j) + "]";
      const json& m = members[j];
      if (!m.is_array() || m.size() != 4 || !m[0].is_string() || !m[1].is_number_unsigned() ||
          !m[2].is_number_unsigned() || !m[3].is_string()) {
        return corrupt(mpath + ": expected [name, offset, size, xxh3], got " +
                       m.dump(-1, ' ', false, json::error_handler_t::replace).substr(0, 200));
      }
      IndexMember member;
      member.name = m[0].get<std::string>();
      member.offset = m[1].get<uint64_t>();
      member.size = m[2].get<uint64_t>();
      if (!ParseHex64(m[3].get_ref<const std::string&>(), &member.xxh3)) {
        return corrupt(mpath + ": xxh3 '" + m[3].get<std::string>() +
                       "' is not 16 lower-case hex digits");
      }
      if (member.name.size() <= record.key.size() + 1 ||
          member.name.compare(0, record.key.size(), record.key) != 0 ||
          member.name[record.key.size()] != '.') {
        return corrupt(mpath + ": member '" + member.name + "' does not belong to key '" +
                       record.key + "'");
      }
      if (member.offset % kTarBlockSize != 0) {
        return corrupt(mpath + ": offset " + std::to_string(member.offset) +
                       " is not a multiple of 512");
      }
      if (member.offset < previous_end || member.size > index.tar_bytes ||
          member.offset > index.tar_bytes - member.size) {
        return corrupt(mpath + ": data [" + std::to_string(member.offset) + ", +" +
                       std::to_string(member.size) +
                       ") overlaps the previous member or passes "
                       "the end of the " +
                       std::to_string(index.tar_bytes) + "-byte tar");
      }
      previous_end = member.offset + member.size;
      record.members.push_back(std::move(member));
    }
    index.records.push_back(std::move(record));
  }
  return index;
}

}  // namespace reel::dataset
