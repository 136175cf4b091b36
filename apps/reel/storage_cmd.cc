// reel storage ls|cp|cat|rm|stat|mb — inspect and move objects on any store, like `aws s3`.
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <iostream>
#include <string>
#include <vector>

#include "apps/reel/commands.h"
#include "base/progress.h"
#include "storage/object_store.h"
#include "storage/open.h"

namespace reel::cli {
namespace {

using storage::ObjectLocation;
using storage::OpenObjectUri;

constexpr std::string_view kStorage = "reel storage";  // the prefix of its error lines

std::string FormatTime(int64_t ms) {
  if (ms <= 0) return "-                  ";
  std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm;
  gmtime_r(&seconds, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M:%S", &tm);
  return buffer;
}

// The store-relative prefix to list: a key names a "directory" when it is not an object.
int List(const std::string& uri, bool recursive) {
  auto location = OpenObjectUri(uri);
  if (!location.ok()) return Fail(kStorage, location.status());
  storage::ListOptions options;
  options.prefix = location->key;
  if (!options.prefix.empty() && uri.back() == '/') options.prefix += '/';
  if (!options.prefix.empty() && options.prefix.back() != '/') {
    // `ls s3://b/dir` means the directory unless dir is itself an object.
    auto head = location->store->Head(options.prefix);
    if (!head.ok()) options.prefix += '/';
  }
  if (!recursive) options.delimiter = "/";
  uint64_t objects = 0, bytes = 0;
  do {
    auto page = location->store->List(options);
    if (!page.ok()) return Fail(kStorage, page.status());
    // Names are shown relative to the listed prefix, as `aws s3 ls` does.
    for (const auto& prefix : page->common_prefixes) {
      std::printf("%19s %12s  %s\n", "", "PRE", prefix.substr(options.prefix.size()).c_str());
    }
    for (const auto& object : page->objects) {
      std::printf("%s %12llu  %s\n", FormatTime(object.mtime_ms).c_str(),
                  static_cast<unsigned long long>(object.size),
                  object.key.substr(options.prefix.size()).c_str());
      ++objects;
      bytes += object.size;
    }
    options.page_token = page->next_page_token;
  } while (!options.page_token.empty());
  if (recursive) {
    std::fprintf(stderr, "%llu objects, %s\n", static_cast<unsigned long long>(objects),
                 Progress::FormatBytes(static_cast<double>(bytes)).c_str());
  }
  return 0;
}

int CopyOne(storage::ObjectStore& src, const std::string& src_key, storage::ObjectStore& dst,
            const std::string& dst_key, bool quiet) {
  auto head = src.Head(src_key);
  if (!head.ok()) return Fail(kStorage, head.status());
  Progress progress(dst_key, head->size, Progress::Unit::kBytes, !quiet);
  Status status = storage::CopyObject(src, src_key, dst, dst_key, 8 << 20,
                                      [&](uint64_t n) { progress.Add(n); });
  progress.Finish();
  if (!status.ok()) return Fail(kStorage, status);
  if (!quiet) {
    std::printf("copied %s -> %s\n", storage::ObjectUri(src, src_key).c_str(),
                storage::ObjectUri(dst, dst_key).c_str());
  }
  return 0;
}

int Copy(const std::string& from, const std::string& to, bool recursive, bool quiet) {
  auto src = OpenObjectUri(from);
  if (!src.ok()) return Fail(kStorage, src.status());
  auto dst = OpenObjectUri(to);
  if (!dst.ok()) return Fail(kStorage, dst.status());
  if (!recursive) {
    std::string dst_key = dst->key;
    // Copying into a "directory" (trailing '/' or empty key) keeps the source's file name.
    if (to.back() == '/' || dst_key.empty()) {
      std::string name = src->key.substr(src->key.rfind('/') + 1);
      dst_key = dst_key.empty() ? name : dst_key + "/" + name;
    }
    return CopyOne(*src->store, src->key, *dst->store, dst_key, quiet);
  }
  std::string prefix = src->key.empty() ? "" : src->key + "/";
  auto objects = storage::ListAll(*src->store, prefix);
  if (!objects.ok()) return Fail(kStorage, objects.status());
  if (objects->empty()) {
    return Fail(kStorage, NotFoundError("nothing under '" + from + "' to copy"));
  }
  for (const auto& object : *objects) {
    std::string relative = object.key.substr(prefix.size());
    std::string dst_key = dst->key.empty() ? relative : dst->key + "/" + relative;
    if (int code = CopyOne(*src->store, object.key, *dst->store, dst_key, quiet)) return code;
  }
  return 0;
}

int Cat(const std::string& uri) {
  auto location = OpenObjectUri(uri);
  if (!location.ok()) return Fail(kStorage, location.status());
  auto reader = location->store->OpenReader(location->key);
  if (!reader.ok()) return Fail(kStorage, reader.status());
  std::vector<char> buffer(1 << 20);
  while (true) {
    auto n = (*reader)->Read(buffer.data(), buffer.size());
    if (!n.ok()) return Fail(kStorage, n.status());
    if (*n == 0) break;
    if (std::fwrite(buffer.data(), 1, *n, stdout) != *n) {
      return Fail(kStorage, UnavailableError("write to standard output failed"));
    }
  }
  return 0;
}

int Remove(const std::vector<std::string>& uris, bool recursive) {
  for (const auto& uri : uris) {
    auto location = OpenObjectUri(uri);
    if (!location.ok()) return Fail(kStorage, location.status());
    if (recursive) {
      std::string prefix = location->key.empty() ? "" : location->key + "/";
      auto objects = storage::ListAll(*location->store, prefix);
      if (!objects.ok()) return Fail(kStorage, objects.status());
      for (const auto& object : *objects) {
        Status status = location->store->Delete(object.key);
        if (!status.ok()) return Fail(kStorage, status);
        std::printf("deleted %s\n", storage::ObjectUri(*location->store, object.key).c_str());
      }
      continue;
    }
    // Deleting is idempotent in the stores; a person still wants to hear about a typo.
    auto head = location->store->Head(location->key);
    if (!head.ok()) return Fail(kStorage, head.status());
    Status status = location->store->Delete(location->key);
    if (!status.ok()) return Fail(kStorage, status);
    std::printf("deleted %s\n", uri.c_str());
  }
  return 0;
}

int Stat(const std::string& uri) {
  auto location = OpenObjectUri(uri);
  if (!location.ok()) return Fail(kStorage, location.status());
  auto info = location->store->Head(location->key);
  if (!info.ok()) return Fail(kStorage, info.status());
  std::printf("key:      %s\nsize:     %llu (%s)\netag:     %s\nmodified: %s UTC\n",
              info->key.c_str(), static_cast<unsigned long long>(info->size),
              Progress::FormatBytes(static_cast<double>(info->size)).c_str(), info->etag.c_str(),
              FormatTime(info->mtime_ms).c_str());
  return 0;
}

int MakeBucket(const std::string& uri) {
  auto location = OpenObjectUri(uri);
  if (!location.ok()) return Fail(kStorage, location.status());
  if (!location->key.empty()) {
    return Fail(kStorage, InvalidArgumentError("mb takes an s3://bucket URI, got '" + uri + "'"));
  }
  Status status = location->store->CreateBucket();
  if (status.code() == StatusCode::kUnimplemented) {
    return Fail(kStorage, InvalidArgumentError("mb takes an s3://bucket URI, got '" + uri + "'"));
  }
  if (!status.ok()) return Fail(kStorage, status);
  std::printf("created %s\n", uri.c_str());
  return 0;
}

}  // namespace

void RegisterStorage(CLI::App& app, int* exit_code) {
  CLI::App* storage =
      app.add_subcommand("storage", "list, copy, print, remove objects on any store");
  storage->require_subcommand(1);

  auto* ls = storage->add_subcommand("ls", "list objects and prefixes under a URI");
  static std::string ls_uri;
  static bool ls_recursive = false;
  ls->add_option("uri", ls_uri, "s3://bucket/prefix, /path or file:///path")->required();
  ls->add_flag("-r,--recursive", ls_recursive, "list every object below, not just one level");
  ls->callback([exit_code] { *exit_code = List(ls_uri, ls_recursive); });

  auto* cp = storage->add_subcommand("cp", "copy an object (or a tree with -r) between stores");
  static std::string cp_from, cp_to;
  static bool cp_recursive = false, cp_quiet = false;
  cp->add_option("source", cp_from)->required();
  cp->add_option("destination", cp_to)->required();
  cp->add_flag("-r,--recursive", cp_recursive, "copy every object under the source prefix");
  cp->add_flag("-q,--quiet", cp_quiet, "no progress bar or summary");
  cp->callback([exit_code] { *exit_code = Copy(cp_from, cp_to, cp_recursive, cp_quiet); });

  auto* cat = storage->add_subcommand("cat", "write an object to standard output");
  static std::string cat_uri;
  cat->add_option("uri", cat_uri)->required();
  cat->callback([exit_code] { *exit_code = Cat(cat_uri); });

  auto* rm = storage->add_subcommand("rm", "delete objects");
  static std::vector<std::string> rm_uris;
  static bool rm_recursive = false;
  rm->add_option("uri", rm_uris)->required();
  rm->add_flag("-r,--recursive", rm_recursive, "delete every object under the prefix");
  rm->callback([exit_code] { *exit_code = Remove(rm_uris, rm_recursive); });

  auto* stat = storage->add_subcommand("stat", "size, ETag and modification time of an object");
  static std::string stat_uri;
  stat->add_option("uri", stat_uri)->required();
  stat->callback([exit_code] { *exit_code = Stat(stat_uri); });

  auto* mb = storage->add_subcommand("mb", "create an S3 bucket");
  static std::string mb_uri;
  mb->add_option("uri", mb_uri)->required();
  mb->callback([exit_code] { *exit_code = MakeBucket(mb_uri); });
}

}  // namespace reel::cli
