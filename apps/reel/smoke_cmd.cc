// reel smoke — the end-to-end check of a fresh installation on embedded defaults: writes a set
// of objects (small ones and one streamed multi-chunk object) to a store, lists them, reads
// them back through a read-through cache twice, verifies every byte, and cleans up.
// Later parts of the pipeline (ingest, train, serve) extend this run.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "apps/reel/commands.h"
#include "base/hash.h"
#include "base/logging.h"
#include "base/progress.h"
#include "storage/caching_store.h"
#include "storage/open.h"

namespace reel::cli {
namespace {

struct SmokeOptions {
  std::string store_uri = "./reel-data/smoke";
  std::string cache_dir = "./reel-data/cache";
  int objects = 64;
  int object_kib = 256;
  int large_mib = 64;
  bool keep = false;
};

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string out(n, '\0');
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  return out;
}

Status RunSmoke(const SmokeOptions& o) {
  auto log = Logger("smoke");
  REEL_ASSIGN_OR_RETURN(auto store, storage::OpenStore(o.store_uri));
  const std::string run = "smoke-" + std::to_string(::getpid()) + "/";
  std::mt19937_64 rng(20261129);

  // 1. Small objects.
  std::vector<std::string> checksums;
  auto start = std::chrono::steady_clock::now();
  uint64_t small_bytes = 0;
  for (int i = 0; i < o.objects; ++i) {
    std::string data = RandomBytes(rng, static_cast<size_t>(o.object_kib) << 10);
    checksums.push_back(Xxh3_128Hex(data));
    char key[64];
    std::snprintf(key, sizeof key, "objects/%05d.bin", i);
    REEL_RETURN_IF_ERROR(store->Put(run + key, data));
    small_bytes += data.size();
  }
  double small_put_s = Seconds(start);

  // 2. One large object streamed in 8 MiB writes, never held whole in memory.
  start = std::chrono::steady_clock::now();
  Hasher large_hash(Hasher::Kind::kXxh3_64);
  {
    REEL_ASSIGN_OR_RETURN(auto writer, store->OpenWriter(run + "large.bin"));
    Progress progress("write large.bin", static_cast<uint64_t>(o.large_mib) << 20);
    for (int i = 0; i < o.large_mib / 8; ++i) {
      std::string chunk = RandomBytes(rng, 8 << 20);
      large_hash.Update(chunk);
      REEL_RETURN_IF_ERROR(writer->Write(chunk));
      progress.Add(chunk.size());
    }
    REEL_RETURN_IF_ERROR(writer->Close());
  }
  std::string large_expected = large_hash.FinishHex();
  double large_put_s = Seconds(start);

  // 3. Listing sees exactly what was written.
  REEL_ASSIGN_OR_RETURN(auto listed, storage::ListAll(*store, run + "objects/"));
  if (listed.size() != static_cast<size_t>(o.objects)) {
    return DataLossError("listed " + std::to_string(listed.size()) + " objects, wrote " +
                         std::to_string(o.objects));
  }

  // 4. Read back twice through a cache: the second pass must not touch the store.
  storage::CacheOptions cache_options;
  cache_options.directory = o.cache_dir;
  cache_options.max_bytes = 1ull << 30;
  REEL_ASSIGN_OR_RETURN(auto base_again, storage::OpenStore(o.store_uri));
  REEL_ASSIGN_OR_RETURN(auto cached,
                        storage::CachingStore::Open(std::move(base_again), cache_options));
  double read_s[2] = {0, 0};
  for (int pass = 0; pass < 2; ++pass) {
    start = std::chrono::steady_clock::now();
    for (int i = 0; i < o.objects; ++i) {
      REEL_ASSIGN_OR_RETURN(std::string data, cached->Get(listed[i].key));
      if (Xxh3_128Hex(data) != checksums[i]) {
        return DataLossError("object " + listed[i].key + " read back different bytes");
      }
    }
    read_s[pass] = Seconds(start);
  }
  auto cache_stats = cached->stats();
  if (cache_stats.hits < static_cast<uint64_t>(o.objects)) {
    return InternalError("the second pass missed the cache");
  }

  start = std::chrono::steady_clock::now();
  {
    REEL_ASSIGN_OR_RETURN(auto reader, store->OpenReader(run + "large.bin"));
    Hasher check(Hasher::Kind::kXxh3_64);
    std::string buffer(8 << 20, '\0');
    while (true) {
      REEL_ASSIGN_OR_RETURN(size_t n, reader->Read(buffer.data(), buffer.size()));
      if (n == 0) break;
      check.Update(std::string_view(buffer.data(), n));
    }
    if (check.FinishHex() != large_expected)
      return DataLossError("large.bin read back differently");
  }
  double large_get_s = Seconds(start);

  auto mib_s = [](uint64_t bytes, double s) { return s > 0 ? bytes / s / (1 << 20) : 0.0; };
  uint64_t large_bytes = static_cast<uint64_t>(o.large_mib) << 20;
  std::printf("store      %s\n", store->uri().c_str());
  std::printf("put        %d x %d KiB   %8.1f MiB/s\n", o.objects, o.object_kib,
              mib_s(small_bytes, small_put_s));
  std::printf("get        cold          %8.1f MiB/s\n", mib_s(small_bytes, read_s[0]));
  std::printf("get        cached        %8.1f MiB/s   (%llu hits, %llu misses)\n",
              mib_s(small_bytes, read_s[1]), static_cast<unsigned long long>(cache_stats.hits),
              static_cast<unsigned long long>(cache_stats.misses));
  std::printf("stream put %d MiB        %8.1f MiB/s\n", o.large_mib,
              mib_s(large_bytes, large_put_s));
  std::printf("stream get %d MiB        %8.1f MiB/s\n", o.large_mib,
              mib_s(large_bytes, large_get_s));

  if (!o.keep) {
    REEL_ASSIGN_OR_RETURN(auto all, storage::ListAll(*store, run));
    for (const auto& object : all) {
      cached->Invalidate(object.key);
      REEL_RETURN_IF_ERROR(store->Delete(object.key));
    }
  }
  std::printf("smoke: OK (%zu objects verified)\n", listed.size() + 1);
  log->debug("smoke run {} finished", run);
  return Status::Ok();
}

}  // namespace

void RegisterSmoke(CLI::App& app, int* exit_code) {
  static SmokeOptions options;
  CLI::App* smoke =
      app.add_subcommand("smoke", "write, list, read back and verify objects on a store");
  smoke->add_option("--store", options.store_uri, "store URI (local path, file://, s3://, mem://)")
      ->capture_default_str();
  smoke->add_option("--cache-dir", options.cache_dir, "read-through cache directory")
      ->capture_default_str();
  smoke->add_option("--objects", options.objects, "number of small objects")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  smoke->add_option("--object-kib", options.object_kib, "size of each small object in KiB")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  smoke
      ->add_option("--large-mib", options.large_mib,
                   "size of the streamed object in MiB (multiple of 8)")
      ->check(CLI::Range(8, 1 << 16))
      ->capture_default_str();
  smoke->add_flag("--keep", options.keep, "keep the objects written");
  smoke->callback([exit_code] {
    Status status = RunSmoke(options);
    if (!status.ok()) {
      std::fprintf(stderr, "reel smoke: FAILED: %s\n", status.ToString().c_str());
      *exit_code = 1;
    }
  });
}

}  // namespace reel::cli
