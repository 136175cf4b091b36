#include "dataset/shard_reader.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <utility>

#include "base/hash.h"

namespace reel::dataset {

using nlohmann::json;

ShardReader::ShardReader(storage::ObjectStore& store, std::string root, std::string split,
                         uint32_t number, ShardIndex index, uint64_t index_bytes)
    : store_(store),
      root_(std::move(root)),
      split_(std::move(split)),
      number_(number),
      tar_key_(ShardTarKey(root_, split_, number)),
      index_key_(ShardIndexKey(root_, split_, number)),
      index_(std::move(index)),
      index_bytes_(index_bytes) {
  positions_.reserve(index_.records.size());
  for (size_t i = 0; i < index_.records.size(); ++i) positions_.emplace(index_.records[i].key, i);
}

Result<std::unique_ptr<ShardReader>> ShardReader::Open(storage::ObjectStore& store,
                                                       std::string_view root,
                                                       std::string_view split, uint32_t number) {
  REEL_ASSIGN_OR_RETURN(std::string normalized, NormalizeRoot(root));
  REEL_RETURN_IF_ERROR(ValidateSplitName(split));
  const std::string index_key = ShardIndexKey(normalized, split, number);
  const std::string uri = ObjectUri(store, index_key);
  Result<std::string> text = store.Get(index_key);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return NotFoundError(uri + ": shard index missing (the shard is unfinished or absent): " +
                           text.status().message());
    }
    return text.status().WithContext(uri);
  }
  REEL_ASSIGN_OR_RETURN(ShardIndex index, ShardIndex::Parse(*text, uri));
  if (index.split != split || index.shard != number) {
    return DataLossError(uri + ": the index describes " + index.split + "/" +
                         ShardName(index.shard) + ", not " + std::string(split) + "/" +
                         ShardName(number));
  }
  return std::unique_ptr<ShardReader>(new ShardReader(
      store, std::move(normalized), std::string(split), number, std::move(index), text->size()));
}

std::optional<size_t> ShardReader::Find(std::string_view key) const {
  auto it = positions_.find(key);
  if (it == positions_.end()) return std::nullopt;
  return it->second;
}

std::string ShardReader::RecordContext(size_t i) const {
  return ObjectUri(store_, tar_key_) + ": record '" + index_.records[i].key + "' (#" +
         std::to_string(i) + ")";
}

ShardStats ShardReader::Stats() const {
  ShardStats stats;
  stats.split = split_;
  stats.number = number_;
  stats.name = ShardName(number_);
  stats.tar_key = tar_key_;
  stats.index_key = index_key_;
  stats.records = index_.records.size();
  stats.tar_bytes = index_.tar_bytes;
  stats.index_bytes = index_bytes_;
  stats.class_counts = index_.ClassCounts();
  return stats;
}

Result<Record> ShardReader::BuildRecord(size_t i, const std::vector<std::string_view>& data) const {
  const IndexRecord& entry = index_.records[i];
  auto corrupt = [&](const std::string& message) {
    return DataLossError(RecordContext(i) + ": " + message);
  };
  for (size_t j = 0; j < entry.members.size(); ++j) {
    const IndexMember& m = entry.members[j];
    const uint64_t actual = Xxh3_64(data[j]);
    if (actual != m.xxh3) {
      return corrupt("member '" + m.name + "' fails its checksum (index xxh3 " + Xxh3Hex(m.xxh3) +
                     ", data xxh3 " + Xxh3Hex(actual) + ")");
    }
  }
  auto data_of = [&](const IndexMember* m) { return data[m - entry.members.data()]; };
  Record record;
  record.key = entry.key;
  record.label = entry.label;
  const IndexMember* payload = nullptr;
  for (DatasetMode mode : {DatasetMode::kVideo, DatasetMode::kFrames, DatasetMode::kFeatures}) {
    if ((payload = entry.Find(PayloadExtension(mode))) != nullptr) {
      record.payload_ext = std::string(PayloadExtension(mode));
      break;
    }
  }
  if (payload == nullptr) return corrupt("no .mp4, .frames.zst or .f32 payload member");
  const IndexMember* cls = entry.Find("cls");
  if (cls == nullptr) return corrupt("no .cls member");
  const IndexMember* meta = entry.Find("json");
  if (meta == nullptr) return corrupt("no .json member");

  std::string_view cls_text = data_of(cls);
  while (!cls_text.empty() &&
         (cls_text.back() == '\n' || cls_text.back() == ' ' || cls_text.back() == '\r')) {
    cls_text.remove_suffix(1);
  }
  if (cls_text != std::to_string(entry.label)) {
    return corrupt(".cls holds '" + std::string(cls_text.substr(0, 40)) +
                   "' but the index says label " + std::to_string(entry.label));
  }
  try {
    record.metadata = json::parse(data_of(meta));
  } catch (const json::exception& e) {
    return corrupt(std::string(".json is malformed: ") + e.what());
  }
  if (!record.metadata.is_object()) return corrupt(".json is not a JSON object");
  auto label = record.metadata.find(kMetaLabel);
  if (label == record.metadata.end() || !label->is_string()) {
    return corrupt(".json has no string \"label\"");
  }
  record.label_name = label->get<std::string>();
  record.payload = std::string(data_of(payload));
  return record;
}

Result<Record> ShardReader::ReadRecord(size_t i) const {
  if (i >= index_.records.size()) {
    return OutOfRangeError(ObjectUri(store_, tar_key_) + ": record #" + std::to_string(i) +
                           " requested, the shard has " + std::to_string(index_.records.size()));
  }
  const IndexRecord& entry = index_.records[i];
  const uint64_t begin = entry.begin(), length = entry.end() - entry.begin();
  Result<std::string> bytes = store_.GetRange(tar_key_, begin, length);
  if (!bytes.ok()) {
    if (bytes.status().code() == StatusCode::kOutOfRange) {
      return DataLossError(RecordContext(i) + ": the shard is shorter than its index says (" +
                           bytes.status().message() + ")");
    }
    return bytes.status().WithContext(RecordContext(i));
  }
  if (bytes->size() != length) {
    return DataLossError(RecordContext(i) + ": the shard is truncated: bytes [" +
                         std::to_string(begin) + ", " + std::to_string(begin + length) +
                         ") requested, " + std::to_string(bytes->size()) + " returned");
  }
  std::vector<std::string_view> data;
  data.reserve(entry.members.size());
  for (const IndexMember& m : entry.members) {
    data.push_back(std::string_view(*bytes).substr(m.offset - begin, m.size));
  }
  return BuildRecord(i, data);
}

// --- Iterator ------------------------------------------------------------------------------------

ShardReader::Iterator::Iterator(const ShardReader* shard,
                                std::unique_ptr<storage::ObjectReader> object)
    : shard_(shard), object_(std::move(object)) {
  tar_ = std::make_unique<TarReader>(object_.get(), ObjectUri(shard_->store_, shard_->tar_key_));
}

ShardReader::Iterator::~Iterator() = default;

Result<std::unique_ptr<ShardReader::Iterator>> ShardReader::Iterate() const {
  const std::string uri = ObjectUri(store_, tar_key_);
  Result<std::unique_ptr<storage::ObjectReader>> object = store_.OpenReader(tar_key_);
  if (!object.ok()) return object.status().WithContext(uri);
  if ((*object)->size() != index_.tar_bytes) {
    return DataLossError(uri + ": the shard holds " + std::to_string((*object)->size()) +
                         " bytes, its index says " + std::to_string(index_.tar_bytes));
  }
  return std::unique_ptr<Iterator>(new Iterator(this, std::move(object).value()));
}

Result<bool> ShardReader::Iterator::Next(Record* record) {
  if (!broken_.ok()) return broken_;
  const ShardIndex& index = shard_->index_;
  const std::string uri = ObjectUri(shard_->store_, shard_->tar_key_);
  if (next_ >= index.records.size()) {
    if (ended_) return false;
    TarEntry extra;
    Result<bool> more = tar_->Next(&extra, nullptr);
    if (!more.ok()) return broken_ = more.status();
    if (*more) {
      return broken_ = DataLossError(uri + ": member '" + extra.name + "' at offset " +
                                     std::to_string(extra.header_offset) + " is not in the index");
    }
    ended_ = true;
    return false;
  }
  const size_t i = next_;
  const IndexRecord& entry = index.records[i];
  std::vector<std::string> buffers(entry.members.size());
  for (size_t j = 0; j < entry.members.size(); ++j) {
    const IndexMember& m = entry.members[j];
    TarEntry e;
    Result<bool> more = tar_->Next(&e, &buffers[j]);
    if (!more.ok()) return broken_ = more.status();
    if (!*more) {
      return broken_ = DataLossError(shard_->RecordContext(i) + ": the tar ends before member '" +
                                     m.name + "'");
    }
    if (e.name != m.name || !e.is_regular() || e.data_offset != m.offset || e.size != m.size) {
      return broken_ = DataLossError(shard_->RecordContext(i) + ": the tar holds '" + e.name +
                                     "' (" + std::to_string(e.size) + " bytes at offset " +
                                     std::to_string(e.data_offset) + ") where the index has '" +
                                     m.name + "' (" + std::to_string(m.size) + " bytes at offset " +
                                     std::to_string(m.offset) + ")");
    }
  }
  ++next_;
  std::vector<std::string_view> data(buffers.begin(), buffers.end());
  REEL_ASSIGN_OR_RETURN(*record, shard_->BuildRecord(i, data));
  return true;
}

// --- Listing -------------------------------------------------------------------------------------

Result<std::vector<uint32_t>> ListShards(storage::ObjectStore& store, std::string_view root,
                                         std::string_view split) {
  REEL_ASSIGN_OR_RETURN(std::string normalized, NormalizeRoot(root));
  REEL_RETURN_IF_ERROR(ValidateSplitName(split));
  const std::string prefix = SplitPrefix(normalized, split);
  Result<std::vector<storage::ObjectInfo>> objects = storage::ListAll(store, prefix);
  if (!objects.ok()) return objects.status().WithContext(ObjectUri(store, prefix));
  std::set<uint32_t> tars, indexes;
  for (const storage::ObjectInfo& object : *objects) {
    std::string_view name = std::string_view(object.key).substr(prefix.size());
    if (name.find('/') != std::string_view::npos) continue;
    std::optional<uint32_t> number = ParseShardName(name);
    if (!number) continue;
    if (name.size() > 4 && name.substr(name.size() - 4) == ".tar") tars.insert(*number);
    if (name.size() > 4 && name.substr(name.size() - 4) == ".idx") indexes.insert(*number);
  }
  std::vector<uint32_t> complete;
  std::set_intersection(tars.begin(), tars.end(), indexes.begin(), indexes.end(),
                        std::back_inserter(complete));
  return complete;
}

Result<std::vector<ShardStats>> LoadShardStats(storage::ObjectStore& store, std::string_view root,
                                               std::string_view split, KeyRegistry* keys) {
  REEL_ASSIGN_OR_RETURN(std::vector<uint32_t> numbers, ListShards(store, root, split));
  std::vector<ShardStats> stats;
  stats.reserve(numbers.size());
  for (uint32_t number : numbers) {
    REEL_ASSIGN_OR_RETURN(std::unique_ptr<ShardReader> shard,
                          ShardReader::Open(store, root, split, number));
    if (keys != nullptr) {
      for (const IndexRecord& record : shard->index().records) {
        REEL_RETURN_IF_ERROR(
            keys->Claim(record.key).WithContext(ObjectUri(store, shard->index_key())));
      }
    }
    stats.push_back(shard->Stats());
  }
  return stats;
}

}  // namespace reel::dataset
