// Helpers shared by tar_writer_test.cc and tar_reader_test.cc: building an archive from
// members and reading one back. Tests only.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "dataset/tar.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::dataset::testing {

// One archive member: its name and data.
struct Member {
  std::string name;
  std::string data;
};

// An in-memory archive of `members`, in order; a failed call fails the calling test.
inline std::string Build(const std::vector<Member>& members, TarWriterOptions options = {}) {
  std::string out;
  TarWriter writer(&out, options);
  for (const Member& m : members) {
    Result<TarEntry> e = writer.AddFile(m.name, m.data);
    EXPECT_OK(e);
  }
  EXPECT_OK(writer.Finish());
  return out;
}

// Every member of `archive`, in order, until the end or the first error (a test failure).
inline std::vector<Member> ReadAll(std::string_view archive) {
  std::vector<Member> out;
  TarReader reader(archive);
  while (true) {
    TarEntry e;
    std::string data;
    Result<bool> more = reader.Next(&e, &data);
    EXPECT_OK(more);
    if (!more.ok() || !*more) break;
    out.push_back({e.name, data});
  }
  return out;
}

// Sizes around the 512-byte block, a large member and NUL data.
inline std::vector<Member> SampleMembers() {
  return {{"empty.txt", ""},
          {"one.bin", "x"},
          {"a/b/511.bin", reel::testing::RandomBytes(511, 1)},
          {"a/b/512.bin", reel::testing::RandomBytes(512, 2)},
          {"513.bin", reel::testing::RandomBytes(513, 3)},
          {"big.bin", reel::testing::RandomBytes(300000, 4)},
          {"nul-bytes", std::string(1000, '\0')}};
}

inline void ExpectSameMembers(const std::vector<Member>& got, const std::vector<Member>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_TRUE(got[i].data == want[i].data) << want[i].name;
  }
}

}  // namespace reel::dataset::testing
