// TarReader: skipping data, corrupt, malformed and truncated archives, base-256 numbers, and
// archives written by GNU tar and Python's tarfile.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "dataset/tar.h"
#include "dataset/tar_test_util.h"
#include "dataset/testing/shell.h"
#include "storage/memory_store.h"
#include "storage/testing/temp_dir.h"
#include "testing/status_matchers.h"

namespace reel::dataset {
namespace {

using storage::testing::RandomBytes;
using storage::testing::ReadFile;
using storage::testing::TempDir;
using storage::testing::WriteFile;
using testing::Build;
using testing::CommandResult;
using testing::Member;
using testing::ReadAll;
using testing::RunCommand;
using testing::SampleMembers;
using testing::ShellQuote;

// Rewrites the checksum of the header block at `offset` after a test edited it.
void FixChecksum(std::string* archive, size_t offset) {
  char* h = archive->data() + offset;
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (size_t i = 0; i < 512; ++i) sum += static_cast<unsigned char>(h[i]);
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%06o", sum);
  std::memcpy(h + 148, buf, 6);
  h[154] = '\0';
}

TEST(TarTest, SkippingDataWithNullBuffer) {
  std::string archive = Build(SampleMembers());
  TarReader reader(archive);
  TarEntry e;
  size_t n = 0;
  while (true) {
    Result<bool> more = reader.Next(&e, nullptr);
    ASSERT_OK(more);
    if (!*more) break;
    ++n;
  }
  EXPECT_EQ(n, SampleMembers().size());
  // After the end, Next keeps answering false.
  Result<bool> again = reader.Next(&e, nullptr);
  ASSERT_OK(again);
  EXPECT_FALSE(*again);
}

TEST(TarTest, CorruptHeaderIsDataLoss) {
  std::string archive = Build({{"first", "1"}, {"second", "22"}, {"third", "333"}});
  // Flip one byte in the second member's header (its name): checksum mismatch.
  const size_t second_header = 1024;
  for (size_t pos : {second_header + 0, second_header + 124, second_header + 150,
                     second_header + 300, second_header + 511}) {
    std::string bad = archive;
    bad[pos] ^= 0x20;
    TarReader reader(bad, "mem://test/x.tar");
    TarEntry e;
    std::string data;
    Result<bool> first = reader.Next(&e, &data);
    ASSERT_OK(first);
    EXPECT_EQ(e.name, "first");
    Result<bool> second = reader.Next(&e, &data);
    ASSERT_FALSE(second.ok()) << "flip at " << pos;
    EXPECT_STATUS(second, StatusCode::kDataLoss);
    EXPECT_NE(second.status().message().find("mem://test/x.tar"), std::string::npos);
    EXPECT_NE(second.status().message().find("offset 1024"), std::string::npos)
        << second.status().message();
    // The error sticks.
    EXPECT_EQ(reader.Next(&e, &data).status(), second.status());
  }
}

TEST(TarTest, MalformedNumbersAndPaxRecordsAreDataLoss) {
  std::string archive = Build({{"f", "data"}});
  {
    std::string bad = archive;
    std::memcpy(bad.data() + 124, "0000000009x", 11);  // size: not octal
    FixChecksum(&bad, 0);
    auto listed = ListTar(bad);
    EXPECT_STATUS(listed, StatusCode::kDataLoss);
    EXPECT_NE(listed.status().message().find("size"), std::string::npos);
  }
  {
    std::string bad = archive;
    std::memcpy(bad.data() + 124, "77777777777", 11);  // size far past the end
    FixChecksum(&bad, 0);
    auto listed = ListTar(bad);
    EXPECT_STATUS(listed, StatusCode::kDataLoss);
    EXPECT_NE(listed.status().message().find("truncated"), std::string::npos);
  }
  {
    std::string pax = Build({{std::string(120, 'p'), "x"}});
    // The pax record "NN path=ppp...\n" starts at offset 512; break its length.
    ASSERT_EQ(pax.substr(512, 4), "130 ");
    pax[512] = '9';
    auto listed = ListTar(pax);
    EXPECT_STATUS(listed, StatusCode::kDataLoss);
    EXPECT_NE(listed.status().message().find("pax"), std::string::npos);
  }
}

TEST(TarTest, Base256NumbersParse) {
  std::string archive = Build({{"f", "data"}});
  // GNU base-256: 0x80 then big-endian bytes. size = 4, mtime = -1 (0xff...).
  std::string bad = archive;
  std::memset(bad.data() + 124, 0, 12);
  bad[124] = static_cast<char>(0x80);
  bad[135] = 4;
  std::memset(bad.data() + 136, 0xff, 12);
  FixChecksum(&bad, 0);
  auto listed = ListTar(bad);
  ASSERT_OK(listed);
  EXPECT_EQ((*listed)[0].size, 4u);
  EXPECT_EQ((*listed)[0].mtime, -1);
}

TEST(TarTest, TruncatedArchivesAreDataLoss) {
  std::string archive = Build({{"a", RandomBytes(700, 5)}, {std::string(130, 'n'), "x"}});
  // Every cut point before the end-of-archive marker loses data.
  for (size_t cut = 0; cut < archive.size() - 1024; cut += 97) {
    std::string truncated = archive.substr(0, cut);
    auto listed = ListTar(truncated, "cut");
    ASSERT_FALSE(listed.ok()) << "cut at " << cut;
    EXPECT_STATUS(listed, StatusCode::kDataLoss) << listed.status().ToString();
    EXPECT_NE(listed.status().message().find("truncated"), std::string::npos)
        << listed.status().message();
  }
  // Cut exactly after the last member: no end-of-archive marker.
  auto no_marker = ListTar(archive.substr(0, archive.size() - 1024));
  EXPECT_STATUS(no_marker, StatusCode::kDataLoss);
  EXPECT_NE(no_marker.status().message().find("end-of-archive"), std::string::npos);
  // One zero block is enough (GNU tar accepts it too).
  EXPECT_OK(ListTar(archive.substr(0, archive.size() - 512)));
  // Garbage is refused.
  EXPECT_STATUS(ListTar(RandomBytes(4096, 6)), StatusCode::kDataLoss);
}

TEST(TarTest, TruncatedObjectStreamIsDataLoss) {
  storage::MemoryStore store;
  std::string archive = Build({{"a", RandomBytes(5000, 7)}});
  ASSERT_OK(store.Put("t.tar", archive.substr(0, 3000)));
  auto in = store.OpenReader("t.tar");
  ASSERT_OK(in);
  TarReader reader(in->get(), "mem://test/t.tar");
  TarEntry e;
  std::string data;
  Result<bool> more = reader.Next(&e, &data);
  EXPECT_STATUS(more, StatusCode::kDataLoss);
}

// --- GNU tar -------------------------------------------------------------------------------------

TEST(TarInteropTest, ArchivesFromGnuTarParse) {
  TempDir dir;
  const std::string src = dir.Join("src");
  std::filesystem::create_directories(src + "/sub/" + std::string(120, 'd'));
  std::map<std::string, std::string> files = {
      {"empty", ""},
      {"small.txt", "hello\n"},
      {"sub/random.bin", RandomBytes(1 << 20, 8)},
      {"sub/" + std::string(120, 'd') + "/" + std::string(110, 'f'), "deep"},
      {"sub/" + std::string(120, 'd') + "/short.txt", "split into prefix and name"},
      {std::string(150, 'L'), "long name without slash"},
  };
  for (const auto& [name, data] : files) WriteFile(src + "/" + name, data);
  std::filesystem::create_symlink("small.txt", src + "/link");

  for (std::string format : {"gnu", "posix", "ustar", "oldgnu"}) {
    const std::string tar_path = dir.Join(format + ".tar");
    // ustar cannot hold names whose last part exceeds 100 bytes; leave those out there.
    std::string names = ". ";
    if (format == "ustar") {
      names = "empty small.txt sub/random.bin link sub/" + std::string(120, 'd') + "/short.txt";
    }
    CommandResult created = RunCommand("cd " + ShellQuote(src) + " && tar --format=" + format +
                                       " -cf " + ShellQuote(tar_path) + " " + names + " 2>&1");
    ASSERT_EQ(created.exit_code, 0) << format << ": " << created.output;
    const std::string archive = ReadFile(tar_path);
    TarReader reader(archive, format);
    std::map<std::string, std::string> regular;
    std::map<std::string, std::string> links;
    while (true) {
      TarEntry e;
      std::string data;
      Result<bool> more = reader.Next(&e, &data);
      ASSERT_OK(more) << format << ": " << more.status().ToString();
      if (!*more) break;
      std::string name = e.name.substr(0, 2) == "./" ? e.name.substr(2) : e.name;
      if (e.is_regular()) {
        EXPECT_EQ(archive.substr(e.data_offset, e.size), data);
        regular[name] = data;
      } else if (e.type == kTarSymlink) {
        links[name] = e.linkname;
      } else {
        EXPECT_EQ(e.type, kTarDirectory) << name;
      }
    }
    for (const auto& [name, data] : files) {
      if (format == "ustar" &&
          (name[0] == 'L' || name.find(std::string(110, 'f')) != std::string::npos)) {
        continue;
      }
      ASSERT_TRUE(regular.count(name)) << format << " lacks " << name;
      EXPECT_TRUE(regular[name] == data) << format << ": " << name;
    }
    EXPECT_EQ(links["link"], "small.txt") << format;
  }
}

// --- Python tarfile ------------------------------------------------------------------------------

TEST(TarInteropTest, ArchivesFromPythonTarfileParse) {
  TempDir dir;
  const char* script = R"PY(
import io, sys, tarfile
out = sys.argv[1]
for fmt_name, fmt in (("pax", tarfile.PAX_FORMAT), ("gnu", tarfile.GNU_FORMAT),
                      ("ustar", tarfile.USTAR_FORMAT)):
    with tarfile.open(out + "/" + fmt_name + ".tar", "w", format=fmt) as tar:
        names = ["a.txt", "dir/" + "n" * 99, "x" * 60 + "/" + "y" * 90]
        if fmt != tarfile.USTAR_FORMAT:
            names += ["z" * 200, "u/" + "\u00e9" * 70]
        for i, name in enumerate(names):
            data = (name + "!").encode() * (i * 100 + 1)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1234567890
            tar.addfile(info, io.BytesIO(data))
)PY";
  CommandResult made = RunCommand("/usr/bin/python3 -c " + ShellQuote(script) + " " +
                                  ShellQuote(dir.path()) + " 2>&1");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  for (std::string fmt : {"pax", "gnu", "ustar"}) {
    std::vector<std::string> names = {"a.txt", "dir/" + std::string(99, 'n'),
                                      std::string(60, 'x') + "/" + std::string(90, 'y')};
    if (fmt != "ustar") {
      names.push_back(std::string(200, 'z'));
      std::string e_acute;
      for (int i = 0; i < 70; ++i) e_acute += "\xc3\xa9";
      names.push_back("u/" + e_acute);
    }
    std::vector<Member> got = ReadAll(ReadFile(dir.Join(fmt + ".tar")));
    ASSERT_EQ(got.size(), names.size()) << fmt;
    for (size_t i = 0; i < names.size(); ++i) {
      EXPECT_EQ(got[i].name, names[i]) << fmt;
      std::string unit = names[i] + "!", expected;
      for (size_t k = 0; k < i * 100 + 1; ++k) expected += unit;
      EXPECT_TRUE(got[i].data == expected) << fmt << " " << names[i];
    }
  }
}

}  // namespace
}  // namespace reel::dataset
