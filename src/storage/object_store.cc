#include "storage/object_store.h"

namespace reel::storage {
namespace {

// Each Put at once: what a store whose Puts cost no more alone than together gives.
class ImmediateBatch : public PutBatch {
 public:
  explicit ImmediateBatch(ObjectStore& store) : store_(store) {}
  Status Put(std::string_view key, std::string_view data) override { return store_.Put(key, data); }
  Status Commit() override { return Status::Ok(); }

 private:
  ObjectStore& store_;
};

}  // namespace

Status PutBatch::PutJoined(std::string_view key, const std::vector<std::string_view>& pieces) {
  std::string joined;
  for (std::string_view piece : pieces) joined += piece;
  return Put(key, joined);
}

std::unique_ptr<PutBatch> ObjectStore::NewBatch() {
  return std::make_unique<ImmediateBatch>(*this);
}

std::string ObjectUri(const ObjectStore& store, std::string_view key) {
  std::string uri = store.uri();
  if (uri.empty() || uri.back() != '/') uri += '/';
  uri += key;
  return uri;
}

Status ValidateKey(std::string_view key) {
  auto refuse = [&](std::string_view why) {
    return InvalidArgumentError("invalid key '" + std::string(key) + "': " + std::string(why));
  };
  if (key.empty()) return InvalidArgumentError("invalid key: the key is empty");
  if (key.size() > 1024) return refuse("longer than 1024 bytes");
  if (key.front() == '/') return refuse("keys are relative and must not start with '/'");
  if (key.find('\0') != std::string_view::npos) return refuse("contains a NUL byte");
  if (key.find('\\') != std::string_view::npos) return refuse("contains a backslash");
  size_t start = 0;
  while (start <= key.size()) {
    size_t end = key.find('/', start);
    if (end == std::string_view::npos) end = key.size();
    std::string_view segment = key.substr(start, end - start);
    if (segment.empty()) return refuse("contains an empty path segment");
    if (segment == "." || segment == "..") return refuse("contains a '.' or '..' segment");
    start = end + 1;
  }
  return Status::Ok();
}

Result<std::vector<ObjectInfo>> ListAll(ObjectStore& store, std::string_view prefix) {
  std::vector<ObjectInfo> all;
  ListOptions options;
  options.prefix = std::string(prefix);
  do {
    REEL_ASSIGN_OR_RETURN(ListPage page, store.List(options));
    for (auto& object : page.objects) all.push_back(std::move(object));
    options.page_token = page.next_page_token;
  } while (!options.page_token.empty());
  return all;
}

Status CopyObject(ObjectStore& src, std::string_view src_key, ObjectStore& dst,
                  std::string_view dst_key, size_t chunk_bytes,
                  const std::function<void(uint64_t)>& on_bytes) {
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<ObjectReader> reader, src.OpenReader(src_key));
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<ObjectWriter> writer, dst.OpenWriter(dst_key));
  std::string buffer(chunk_bytes, '\0');
  uint64_t copied = 0;
  while (true) {
    REEL_ASSIGN_OR_RETURN(size_t n, reader->Read(buffer.data(), buffer.size()));
    if (n == 0) break;
    REEL_RETURN_IF_ERROR(writer->Write(std::string_view(buffer.data(), n)));
    copied += n;
    if (on_bytes) on_bytes(n);
  }
  if (copied != reader->size()) {
    return DataLossError("copy of '" + std::string(src_key) + "' read " + std::to_string(copied) +
                         " bytes but the object has " + std::to_string(reader->size()));
  }
  return writer->Close();
}

}  // namespace reel::storage
