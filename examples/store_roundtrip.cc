// Example: write, list and read objects on any store Reel supports, chosen by URI.
//   store_roundtrip /tmp/demo            (local file system)
//   store_roundtrip s3://bucket/demo     (S3; set AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...)
//   REEL_CACHE_DIR=/tmp/cache store_roundtrip s3://bucket/demo   (with a read-through cache)
#include <cstdio>

#include "storage/open.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s STORE_URI\n", argv[0]);
    return 2;
  }
  auto store = reel::storage::OpenStore(argv[1]);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  reel::Status status = (*store)->Put("hello/world.txt", "hello from reel\n");
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  auto objects = reel::storage::ListAll(**store, "hello/");
  if (!objects.ok()) {
    std::fprintf(stderr, "%s\n", objects.status().ToString().c_str());
    return 1;
  }
  for (const auto& object : *objects) {
    auto data = (*store)->Get(object.key);
    if (!data.ok()) {
      std::fprintf(stderr, "%s\n", data.status().ToString().c_str());
      return 1;
    }
    std::printf("%s/%s (%llu bytes, etag %s): %s", (*store)->uri().c_str(), object.key.c_str(),
                static_cast<unsigned long long>(object.size), object.etag.c_str(), data->c_str());
  }
  return 0;
}
