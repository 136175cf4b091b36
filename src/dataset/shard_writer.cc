#include "dataset/shard_writer.h"

#include <limits>
#include <utility>

#include "base/hash.h"

namespace reel::dataset {

using nlohmann::json;

// --- KeyRegistry ---------------------------------------------------------------------------------

Status KeyRegistry::Claim(std::string_view key) {
  std::lock_guard lock(mu_);
  if (!keys_.emplace(key).second) {
    return AlreadyExistsError("sample key '" + std::string(key) +
                              "' is already used in this dataset");
  }
  return Status::Ok();
}

bool KeyRegistry::Contains(std::string_view key) const {
  std::lock_guard lock(mu_);
  return keys_.count(std::string(key)) != 0;
}

size_t KeyRegistry::size() const {
  std::lock_guard lock(mu_);
  return keys_.size();
}

// --- ShardWriter ---------------------------------------------------------------------------------

struct ShardWriter::OpenShard {
  uint32_t number = 0;
  std::unique_ptr<storage::ObjectWriter> out;
  std::unique_ptr<TarWriter> tar;
  ShardIndex index;
};

Result<std::unique_ptr<ShardWriter>> ShardWriter::Create(storage::ObjectStore& store,
                                                         std::string_view root,
                                                         std::string_view split,
                                                         ShardWriterOptions options) {
  REEL_ASSIGN_OR_RETURN(std::string normalized, NormalizeRoot(root));
  REEL_RETURN_IF_ERROR(ValidateSplitName(split));
  if (options.target_bytes < 4096) {
    return InvalidArgumentError("shard target size " + std::to_string(options.target_bytes) +
                                " bytes is below the minimum of 4096");
  }
  if (!options.keys) options.keys = std::make_shared<KeyRegistry>();
  return std::unique_ptr<ShardWriter>(
      new ShardWriter(store, std::move(normalized), std::string(split), std::move(options)));
}

ShardWriter::ShardWriter(storage::ObjectStore& store, std::string root, std::string split,
                         ShardWriterOptions options)
    : store_(store),
      root_(std::move(root)),
      split_(std::move(split)),
      options_(std::move(options)),
      next_number_(options_.first_shard) {}

ShardWriter::~ShardWriter() = default;

Status ShardWriter::Broken(Status status) {
  broken_ = status;
  open_.reset();  // discards the unfinished .tar
  return status;
}

Status ShardWriter::StartShard() {
  const uint32_t number = next_number_;
  const std::string index_key = ShardIndexKey(root_, split_, number);
  const std::string tar_key = ShardTarKey(root_, split_, number);
  // A stale index from an earlier run must never describe the tar written now.
  REEL_RETURN_IF_ERROR(store_.Delete(index_key));
  auto shard = std::make_unique<OpenShard>();
  shard->number = number;
  REEL_ASSIGN_OR_RETURN(shard->out, store_.OpenWriter(tar_key));
  TarWriterOptions tar_options;
  tar_options.mtime = options_.mtime;
  shard->tar = std::make_unique<TarWriter>(shard->out.get(), tar_options);
  shard->index.split = split_;
  shard->index.shard = number;
  open_ = std::move(shard);
  return Status::Ok();
}

Status ShardWriter::PublishShard() {
  OpenShard& shard = *open_;
  const std::string tar_key = ShardTarKey(root_, split_, shard.number);
  const std::string index_key = ShardIndexKey(root_, split_, shard.number);
  REEL_RETURN_IF_ERROR(shard.tar->Finish().WithContext(ObjectUri(store_, tar_key)));
  REEL_RETURN_IF_ERROR(shard.out->Close().WithContext(ObjectUri(store_, tar_key)));
  shard.index.tar_bytes = shard.tar->offset();
  REEL_ASSIGN_OR_RETURN(std::string index_text, shard.index.Serialize());
  REEL_RETURN_IF_ERROR(store_.Put(index_key, index_text).WithContext(ObjectUri(store_, index_key)));

  ShardStats stats;
  stats.split = split_;
  stats.number = shard.number;
  stats.name = ShardName(shard.number);
  stats.tar_key = tar_key;
  stats.index_key = index_key;
  stats.records = shard.index.records.size();
  stats.tar_bytes = shard.index.tar_bytes;
  stats.index_bytes = index_text.size();
  stats.class_counts = shard.index.ClassCounts();
  published_.push_back(stats);
  open_.reset();
  if (next_number_ == std::numeric_limits<uint32_t>::max()) {
    return FailedPreconditionError("split '" + split_ + "' ran out of shard numbers");
  }
  ++next_number_;
  if (options_.on_shard_published) options_.on_shard_published(published_.back());
  return Status::Ok();
}

Status ShardWriter::AddRecord(const Record& record) {
  if (!broken_.ok()) return broken_;
  if (finished_) return FailedPreconditionError("ShardWriter::AddRecord after Finish");

  // Validate everything before touching the store.
  REEL_RETURN_IF_ERROR(ValidateSampleKey(record.key));
  const std::string context = "record '" + record.key + "'";
  if (record.label < 0) {
    return InvalidArgumentError(context + ": label " + std::to_string(record.label) +
                                " is not a class index");
  }
  if (record.label_name.empty()) return InvalidArgumentError(context + ": empty label name");
  const std::string_view ext = PayloadExtension(options_.mode);
  if (record.payload_ext != ext) {
    return InvalidArgumentError(
        context + ": payload extension '" + record.payload_ext + "' does not match the " +
        std::string(DatasetModeName(options_.mode)) + " mode ('" + std::string(ext) + "')");
  }
  if (!record.metadata.is_object() && !record.metadata.is_null()) {
    return InvalidArgumentError(context + ": metadata must be a JSON object, not " +
                                record.metadata.type_name());
  }
  json metadata = record.metadata.is_null() ? json::object() : record.metadata;
  const uint64_t payload_xxh3 = Xxh3_64(record.payload);
  const std::string checksum = "xxh3:" + Xxh3Hex(payload_xxh3);
  const std::pair<const char*, json> owned[] = {
      {kMetaKey, record.key},
      {kMetaLabel, record.label_name},
      {kMetaLabelIndex, record.label},
      {kMetaChecksum, checksum},
  };
  for (const auto& [field, value] : owned) {
    auto it = metadata.find(field);
    if (it != metadata.end() && *it != value) {
      return InvalidArgumentError(context + ": metadata field \"" + field + "\" is " +
                                  it->dump(-1, ' ', false, json::error_handler_t::replace) +
                                  " but the writer sets it to " +
                                  value.dump(-1, ' ', false, json::error_handler_t::replace));
    }
    metadata[field] = value;
  }
  std::string metadata_text;
  try {
    metadata_text = metadata.dump();
  } catch (const json::exception& e) {
    return InvalidArgumentError(context + ": metadata cannot be encoded: " + e.what());
  }
  const std::string cls_text = std::to_string(record.label);
  const std::string payload_name = record.key + "." + std::string(ext);
  const std::string cls_name = record.key + ".cls";
  const std::string json_name = record.key + ".json";
  const uint64_t record_bytes = TarWriter::MemberBytes(payload_name, record.payload.size()) +
                                TarWriter::MemberBytes(cls_name, cls_text.size()) +
                                TarWriter::MemberBytes(json_name, metadata_text.size());

  REEL_RETURN_IF_ERROR(options_.keys->Claim(record.key));

  if (open_ && !open_->index.records.empty() &&
      open_->tar->offset() + record_bytes + kTarEndBytes > options_.target_bytes) {
    Status published = PublishShard();
    if (!published.ok()) return Broken(published);
  }
  if (!open_) {
    Status started = StartShard();
    if (!started.ok()) return Broken(started);
  }

  IndexRecord entry;
  entry.key = record.key;
  entry.label = record.label;
  struct Member {
    const std::string* name;
    std::string_view data;
    uint64_t xxh3;
  };
  const Member members[] = {{&payload_name, record.payload, payload_xxh3},
                            {&cls_name, cls_text, Xxh3_64(cls_text)},
                            {&json_name, metadata_text, Xxh3_64(metadata_text)}};
  for (const auto& [name, data, xxh3] : members) {
    Result<TarEntry> added = open_->tar->AddFile(*name, data);
    if (!added.ok()) {
      return Broken(
          added.status().WithContext(ObjectUri(store_, ShardTarKey(root_, split_, open_->number))));
    }
    entry.members.push_back(IndexMember{*name, added->data_offset, data.size(), xxh3});
  }
  open_->index.records.push_back(std::move(entry));
  ++records_;
  return Status::Ok();
}

Status ShardWriter::Finish() {
  if (!broken_.ok()) return broken_;
  if (finished_) return FailedPreconditionError("ShardWriter::Finish called twice");
  finished_ = true;
  if (open_) {
    Status published = PublishShard();
    if (!published.ok()) return Broken(published);
  }
  return Status::Ok();
}

}  // namespace reel::dataset
