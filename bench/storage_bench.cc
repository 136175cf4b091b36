// storage_bench: MB/s of put and get of one large object through Reel's stores, each beside the
// same transfer done by the standard tools (cp for the local store, curl for S3), as ratios.
//
//   storage_bench [--size-mib N] [--repeat N] [--dir DIR] [--no-s3]
// S3 figures need the AWS_* variables of a running endpoint (bench/run_storage_bench.sh starts a
// Ceph cluster and sets them). Each figure is the median of --repeat runs.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/hash.h"
#include "bench/report.h"
#include "storage/local_store.h"
#include "storage/s3_store.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  uint64_t size_mib = 256;
  int repeat = 3;
  std::string dir = "/tmp";
  bool s3 = true;
};

double MedianSeconds(int repeat, const std::function<bool()>& run) {
  std::vector<double> times;
  for (int i = 0; i < repeat; ++i) {
    auto start = Clock::now();
    if (!run()) {
      std::fprintf(stderr, "storage_bench: a run failed\n");
      std::exit(1);
    }
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Medians of two transfers run alternately, so both see the same state of the page cache and
// the disk's write-back (on a virtual disk that state swings results by 3x).
std::pair<double, double> MedianSecondsAlternating(int repeat, const std::function<bool()>& a,
                                                   const std::function<bool()>& b) {
  std::vector<double> times_a, times_b;
  for (int i = 0; i < repeat; ++i) {
    times_a.push_back(MedianSeconds(1, a));
    times_b.push_back(MedianSeconds(1, b));
  }
  std::sort(times_a.begin(), times_a.end());
  std::sort(times_b.begin(), times_b.end());
  return {times_a[times_a.size() / 2], times_b[times_b.size() / 2]};
}

// A run that reads `key` whole from `store` and checks its size.
std::function<bool()> GetsWhole(reel::storage::ObjectStore& store, std::string key,
                                uint64_t bytes) {
  return [&store, key = std::move(key), bytes] {
    auto got = store.Get(key);
    return got.ok() && got->size() == bytes;
  };
}

bool Shell(const std::string& command) { return std::system(command.c_str()) == 0; }

// A Reel transfer against the standard tool: for the local store the tool (cp, dd) is the
// limit, what the machine's file system gives one process; for S3, curl is the peer.
void LocalRow(reel::bench::Report& report, const std::string& what, double reel_mbs,
              const std::string& tool, double tool_mbs) {
  report.Add({"local " + what, reel_mbs, "MB/s", reel::bench::Reference{tool_mbs, tool}, {}});
}

void S3Row(reel::bench::Report& report, const std::string& what, double reel_mbs,
           const std::string& tool, double tool_mbs) {
  report.Add({"S3 " + what, reel_mbs, "MB/s", {}, reel::bench::Reference{tool_mbs, tool}});
}

}  // namespace

int main(int argc, char** argv) {
  const std::string json = reel::bench::TakeJsonFlag(&argc, argv);
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "storage_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--size-mib")
      args.size_mib = std::stoull(next());
    else if (a == "--repeat")
      args.repeat = std::stoi(next());
    else if (a == "--dir")
      args.dir = next();
    else if (a == "--no-s3")
      args.s3 = false;
    else {
      std::fprintf(stderr,
                   "usage: storage_bench [--size-mib N] [--repeat N] [--dir DIR] [--no-s3] "
                   "[--json FILE]\n");
      return 2;
    }
  }
  const uint64_t bytes = args.size_mib << 20;
  const double mb = bytes / 1e6;
  std::string work = args.dir + "/reel-storage-bench-" + std::to_string(::getpid());
  ::mkdir(work.c_str(), 0755);

  std::printf("object: %llu MiB, median of %d runs, %s\n",
              static_cast<unsigned long long>(args.size_mib), args.repeat, work.c_str());
  std::string data(bytes, '\0');
  std::mt19937_64 rng(42);
  for (uint64_t i = 0; i + 8 <= bytes; i += 8) {
    uint64_t v = rng();
    std::memcpy(data.data() + i, &v, 8);
  }
  const std::string source = work + "/source.bin";
  {
    std::ofstream out(source, std::ios::binary);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
  }
  const std::string expected = reel::Xxh3_128Hex(data);

  // ---- Local file system: LocalStore (temp file, fsync, rename) against cp (+ sync). ----
  auto local = reel::storage::LocalStore::Open(work + "/store");
  if (!local.ok()) {
    std::fprintf(stderr, "storage_bench: %s\n", local.status().ToString().c_str());
    return 1;
  }
  auto reel_put = [&] { return (*local)->Put("obj.bin", data).ok(); };
  auto [put_s, cp_sync_s] = MedianSecondsAlternating(args.repeat, reel_put, [&] {
    return Shell("cp '" + source + "' '" + work + "/cp.bin' && sync '" + work + "/cp.bin'");
  });
  auto [put2_s, dd_fsync_s] = MedianSecondsAlternating(args.repeat, reel_put, [&] {
    return Shell("dd if='" + source + "' of='" + work + "/dd.bin' bs=8M conv=fsync status=none");
  });
  reel::storage::LocalStoreOptions scratch;
  scratch.fsync = false;
  auto local_scratch = reel::storage::LocalStore::Open(work + "/scratch", scratch);
  auto [put_nosync_s, cp_s] = MedianSecondsAlternating(
      args.repeat, [&] { return (*local_scratch)->Put("obj.bin", data).ok(); },
      [&] { return Shell("cp '" + source + "' '" + work + "/cp.bin'"); });
  auto cp_read = [&] { return Shell("cp '" + work + "/store/obj.bin' /dev/null"); };
  auto [get_s, cp_read_s] =
      MedianSecondsAlternating(args.repeat, GetsWhole(**local, "obj.bin", bytes), cp_read);
  std::string buffer(8 << 20, '\0');
  auto [stream_s, cp_read2_s] = MedianSecondsAlternating(
      args.repeat,
      [&] {
        auto reader = (*local)->OpenReader("obj.bin");
        if (!reader.ok()) return false;
        uint64_t total = 0;
        while (true) {
          auto n = (*reader)->Read(buffer.data(), buffer.size());
          if (!n.ok()) return false;
          if (*n == 0) break;
          total += *n;
        }
        return total == bytes;
      },
      cp_read);
  // Page cache warm; Reel fsyncs every put unless told not to.
  reel::bench::Report report("storage_bench (" + std::to_string(args.size_mib) + " MiB object)", 1);
  LocalRow(report, "put (fsync + rename)", mb / put_s, "cp + sync FILE", mb / cp_sync_s);
  LocalRow(report, "put (fsync + rename)", mb / put2_s, "dd bs=8M conv=fsync", mb / dd_fsync_s);
  LocalRow(report, "put, fsync off (temp + rename)", mb / put_nosync_s, "cp", mb / cp_s);
  LocalRow(report, "get (into a new string)", mb / get_s, "cp to /dev/null", mb / cp_read_s);
  LocalRow(report, "stream read (8 MiB buffer)", mb / stream_s, "cp to /dev/null", mb / cp_read2_s);

  if (args.s3) {
    auto options = reel::storage::S3Options::FromEnvironment();
    if (!options.ok() || options->endpoint.empty()) {
      std::fprintf(stderr, "storage_bench: no S3 endpoint (set AWS_ENDPOINT_URL or use --no-s3)\n");
      return 1;
    }
    std::string bucket = "reel-bench-" + std::to_string(::getpid());
    auto parallel = reel::storage::S3Store::Open(bucket, "", *options);
    reel::storage::S3Options single_options = *options;
    single_options.parallelism = 1;
    single_options.multipart_threshold = 5ull << 30;  // one PUT
    single_options.part_size = bytes;                 // one GET
    auto single = reel::storage::S3Store::Open(bucket, "", single_options);
    if (!parallel.ok() || !single.ok() || !(*parallel)->CreateBucket().ok()) {
      std::fprintf(stderr, "storage_bench: cannot create bucket %s\n", bucket.c_str());
      return 1;
    }
    std::string curl = "curl -sf --aws-sigv4 'aws:amz:" + options->region + ":s3' --user '" +
                       options->access_key_id + ":" + options->secret_access_key +
                       "' -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' ";
    std::string url = options->endpoint + "/" + bucket + "/curl.bin";

    auto put_ok = [](const reel::Status& status) {
      if (!status.ok()) std::fprintf(stderr, "storage_bench: %s\n", status.ToString().c_str());
      return status.ok();
    };
    reel::storage::S3Options no_md5_options = *options;
    no_md5_options.content_md5 = false;
    auto no_md5 = reel::storage::S3Store::Open(bucket, "", no_md5_options);
    reel::storage::S3Options single_no_md5_options = single_options;
    single_no_md5_options.content_md5 = false;
    auto single_no_md5 = reel::storage::S3Store::Open(bucket, "", single_no_md5_options);
    if (!no_md5.ok() || !single_no_md5.ok()) return 1;

    // Each Reel transfer alternates with its curl run, so both see the same state of the
    // gateway, which shares this machine's cores.
    auto curl_put = [&] { return Shell(curl + "-T '" + source + "' '" + url + "' -o /dev/null"); };
    auto curl_get = [&] { return Shell(curl + "'" + url + "' -o /dev/null"); };
    // What the gateway gives `parallelism` curl processes reading disjoint ranges at once: no
    // client reads faster than the server sends.
    const int ways = options->parallelism;
    auto curl_get_ranges = [&] {
      std::string command = "(";
      const uint64_t piece = (bytes + ways - 1) / ways;
      for (int i = 0; i < ways; ++i) {
        const uint64_t first = i * piece, last = std::min(bytes, first + piece) - 1;
        command += curl + "-H 'Range: bytes=" + std::to_string(first) + "-" + std::to_string(last) +
                   "' '" + url + "' -o /dev/null & ";
      }
      return Shell(command + "wait)");
    };
    auto [s3_put_single, curl_put_1] = MedianSecondsAlternating(
        args.repeat, [&] { return put_ok((*single)->Put("one.bin", data)); }, curl_put);
    auto [s3_put_single_no_md5, curl_put_2] = MedianSecondsAlternating(
        args.repeat, [&] { return put_ok((*single_no_md5)->Put("one.bin", data)); }, curl_put);
    auto [s3_put_parallel, curl_put_3] = MedianSecondsAlternating(
        args.repeat, [&] { return put_ok((*parallel)->Put("par.bin", data)); }, curl_put);
    auto [s3_put_no_md5, curl_put_4] = MedianSecondsAlternating(
        args.repeat, [&] { return put_ok((*no_md5)->Put("par.bin", data)); }, curl_put);
    auto [s3_get_single, curl_get_1] =
        MedianSecondsAlternating(args.repeat, GetsWhole(**single, "par.bin", bytes), curl_get);
    auto [s3_get_parallel, curl_get_2] = MedianSecondsAlternating(
        args.repeat,
        [&] {
          auto got = (*parallel)->Get("par.bin");
          return got.ok() && reel::Xxh3_128Hex(*got) == expected;
        },
        curl_get);
    auto [s3_get_parallel_2, curl_ranges] = MedianSecondsAlternating(
        args.repeat, GetsWhole(**parallel, "par.bin", bytes), curl_get_ranges);

    std::printf("S3: %s, %d-way parallel, %llu MiB parts\n", options->endpoint.c_str(),
                options->parallelism, static_cast<unsigned long long>(options->part_size >> 20));
    S3Row(report, "put, one stream, Content-MD5", mb / s3_put_single, "curl -T", mb / curl_put_1);
    S3Row(report, "put, one stream, no MD5", mb / s3_put_single_no_md5, "curl -T", mb / curl_put_2);
    S3Row(report, "put, parallel multipart, Content-MD5", mb / s3_put_parallel, "curl -T",
          mb / curl_put_3);
    S3Row(report, "put, parallel multipart, no MD5", mb / s3_put_no_md5, "curl -T",
          mb / curl_put_4);
    S3Row(report, "get, one stream", mb / s3_get_single, "curl -o /dev/null", mb / curl_get_1);
    S3Row(report, "get, parallel ranges", mb / s3_get_parallel, "curl -o /dev/null",
          mb / curl_get_2);
    report.Add(
        {"S3 get, parallel ranges",
         mb / s3_get_parallel_2,
         "MB/s",
         reel::bench::Reference{mb / curl_ranges, std::to_string(ways) + " curl ranges at once"},
         {}});
    for (const char* key : {"one.bin", "par.bin", "curl.bin"}) (void)(*parallel)->Delete(key);
    (void)(*parallel)->DeleteBucket();
  }
  Shell("rm -rf '" + work + "'");
  return report.Finish(json);
}
