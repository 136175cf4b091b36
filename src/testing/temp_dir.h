// Test support for every part's tests: a fresh directory under /tmp that is removed with
// everything in it, deterministic random bytes, small file helpers, and the source tree's
// files. Header-only; tests only.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/random.h"

namespace reel::testing {

// mkdtemp("/tmp/reel-test-XXXXXX"); the destructor removes the tree. A forked child must
// leave with _exit() so that it does not remove its parent's directory.
class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/reel-test-XXXXXX";
    if (::mkdtemp(name) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    path_ = name;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A file of the source tree (testdata/...), wherever the test runs: ctest sets REEL_SOURCE_DIR;
// run by hand from the checkout, it is found from there. Absolute either way (a LocalStore root
// must be).
inline std::string SourcePath(const std::string& relative) {
  const char* root = std::getenv("REEL_SOURCE_DIR");
  return std::filesystem::absolute(std::string(root != nullptr ? root : ".") + "/" + relative)
      .lexically_normal()
      .string();
}

// `n` bytes of any value (NUL included) from a fixed seed.
inline std::string RandomBytes(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>(rng.Next() & 0xff);
  return out;
}

// Paths relative to `dir` of every regular file below it (dot files included), sorted.
inline std::vector<std::string> FilesUnder(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file()) {
      out.push_back(std::filesystem::relative(it->path(), dir).string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

inline bool FileExists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

inline void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

}  // namespace reel::testing
