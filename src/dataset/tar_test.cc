// TarWriter / TarReader: round trips in memory and through stores, names at the ustar limits,
// corrupt and truncated archives, and interoperability with GNU tar and Python's tarfile.
#include "dataset/tar.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include "base/hash.h"
#include "dataset/testing/shell.h"
#include "storage/local_store.h"
#include "storage/memory_store.h"
#include "storage/testing/temp_dir.h"
#include "testing/status_matchers.h"

namespace reel::dataset {
namespace {

using storage::testing::RandomBytes;
using storage::testing::ReadFile;
using storage::testing::TempDir;
using storage::testing::WriteFile;
using testing::CommandResult;
using testing::RunCommand;
using testing::ShellQuote;

struct Member {
  std::string name;
  std::string data;
};

std::string Build(const std::vector<Member>& members, TarWriterOptions options = {}) {
  std::string out;
  TarWriter writer(&out, options);
  for (const Member& m : members) {
    Result<TarEntry> e = writer.AddFile(m.name, m.data);
    EXPECT_OK(e);
  }
  EXPECT_OK(writer.Finish());
  return out;
}

std::vector<Member> ReadAll(std::string_view archive) {
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

std::vector<Member> SampleMembers() {
  return {{"empty.txt", ""},
          {"one.bin", "x"},
          {"a/b/511.bin", RandomBytes(511, 1)},
          {"a/b/512.bin", RandomBytes(512, 2)},
          {"513.bin", RandomBytes(513, 3)},
          {"big.bin", RandomBytes(300000, 4)},
          {"nul-bytes", std::string(1000, '\0')}};
}

void ExpectSameMembers(const std::vector<Member>& got, const std::vector<Member>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_TRUE(got[i].data == want[i].data) << want[i].name;
  }
}

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

TEST(TarTest, RoundTripInMemory) {
  std::vector<Member> members = SampleMembers();
  std::string archive = Build(members);
  EXPECT_EQ(archive.size() % 512, 0u);
  ExpectSameMembers(ReadAll(archive), members);
}

TEST(TarTest, OffsetsLocateTheDataAndMemberBytesPredictsGrowth) {
  std::vector<Member> members = SampleMembers();
  members.push_back({std::string(150, 'p'), "needs pax"});
  std::string archive;
  TarWriter writer(&archive);
  std::vector<TarEntry> written;
  for (const Member& m : members) {
    uint64_t before = writer.offset();
    Result<TarEntry> e = writer.AddFile(m.name, m.data);
    ASSERT_OK(e);
    EXPECT_EQ(writer.offset() - before, TarWriter::MemberBytes(m.name, m.data.size())) << m.name;
    EXPECT_EQ(e->header_offset, before);
    EXPECT_EQ(e->data_offset % 512, 0u);
    written.push_back(*e);
  }
  ASSERT_OK(writer.Finish());
  EXPECT_EQ(writer.offset(), archive.size());
  auto listed = ListTar(archive);
  ASSERT_OK(listed);
  ASSERT_EQ(listed->size(), members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    const TarEntry& e = (*listed)[i];
    EXPECT_EQ(e.name, members[i].name);
    EXPECT_EQ(e.data_offset, written[i].data_offset);
    EXPECT_EQ(e.header_offset, written[i].header_offset);
    EXPECT_EQ(e.size, members[i].data.size());
    EXPECT_EQ(archive.substr(e.data_offset, e.size), members[i].data);
    EXPECT_EQ(e.mode, 0644u);
    EXPECT_EQ(e.mtime, 0);
    EXPECT_TRUE(e.is_regular());
  }
}

TEST(TarTest, OptionsSetModeAndMtime) {
  TarWriterOptions options;
  options.mtime = 1700000000;
  options.mode = 0600;
  auto listed = ListTar(Build({{"f", "data"}}, options));
  ASSERT_OK(listed);
  EXPECT_EQ((*listed)[0].mtime, 1700000000);
  EXPECT_EQ((*listed)[0].mode, 0600u);
}

TEST(TarTest, DeterministicOutput) { EXPECT_EQ(Build(SampleMembers()), Build(SampleMembers())); }

TEST(TarTest, WriterRefusesBadNamesAndUseAfterFinish) {
  std::string out;
  TarWriter writer(&out);
  EXPECT_STATUS(writer.AddFile("", "x"), StatusCode::kInvalidArgument);
  EXPECT_STATUS(writer.AddFile(std::string("a\0b", 3), "x"), StatusCode::kInvalidArgument);
  EXPECT_STATUS(writer.AddFile("dir/", "x"), StatusCode::kInvalidArgument);
  // Refused names do not break the writer.
  ASSERT_OK(writer.AddFile("ok", "x"));
  ASSERT_OK(writer.Finish());
  EXPECT_STATUS(writer.AddFile("late", "x"), StatusCode::kFailedPrecondition);
  EXPECT_STATUS(writer.Finish(), StatusCode::kFailedPrecondition);
  ExpectSameMembers(ReadAll(out), {{"ok", "x"}});
}

// Names at and around the ustar limits: 100-byte name field, 155-byte prefix field.
std::vector<std::string> LimitNames() {
  return {
      std::string(99, 'a'),
      std::string(100, 'b'),                                        // fills the name field
      std::string(50, 'c') + "/" + std::string(50, 'd'),            // 101: prefix + name
      std::string(155, 'e') + "/" + std::string(100, 'f'),          // 256: both fields full
      std::string(156, 'g') + "/" + std::string(10, 'h'),           // prefix too long: pax
      std::string(20, 'i') + "/" + std::string(101, 'j'),           // base too long: pax
      std::string(101, 'k'),                                        // no slash: pax
      "deep/" + std::string(200, 'l') + "/file.mp4",                // 214, prefix too long: pax
      "utf8/\xc3\xa9t\xc3\xa9-" + std::string(120, 'm') + ".json",  // non-ASCII, pax
  };
}

TEST(TarTest, NamesAtUstarLimitsRoundTrip) {
  std::vector<Member> members;
  for (const std::string& name : LimitNames()) members.push_back({name, "data of " + name});
  std::string archive = Build(members);
  ExpectSameMembers(ReadAll(archive), members);
  // Names that fit ustar need no pax header: one header block per member.
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(TarWriter::MemberBytes(members[i].name, 1), 1024u) << members[i].name;
  }
  for (size_t i = 4; i < members.size(); ++i) {
    EXPECT_GT(TarWriter::MemberBytes(members[i].name, 1), 1024u) << members[i].name;
  }
}

TEST(TarTest, StreamsThroughObjectStores) {
  TempDir dir;
  auto local = storage::LocalStore::Open(dir.Join("store"));
  ASSERT_OK(local);
  storage::MemoryStore memory;
  std::vector<Member> members = SampleMembers();
  const std::string expected = Build(members);
  for (storage::ObjectStore* store : {static_cast<storage::ObjectStore*>(local->get()),
                                      static_cast<storage::ObjectStore*>(&memory)}) {
    for (size_t buffer : {size_t{1}, size_t{4096}, size_t{1} << 20}) {
      auto out = store->OpenWriter("t.tar");
      ASSERT_OK(out);
      TarWriterOptions options;
      options.buffer_bytes = buffer;
      TarWriter writer(out->get(), options);
      for (const Member& m : members) ASSERT_OK(writer.AddFile(m.name, m.data));
      ASSERT_OK(writer.Finish());
      ASSERT_OK((*out)->Close());
      auto stored = store->Get("t.tar");
      ASSERT_OK(stored);
      EXPECT_TRUE(*stored == expected) << store->uri() << " buffer " << buffer;

      // Read back streaming, with buffers smaller than, equal to and larger than a block.
      for (size_t read_buffer : {size_t{100}, size_t{512}, size_t{70000}}) {
        auto in = store->OpenReader("t.tar");
        ASSERT_OK(in);
        TarReader reader(in->get(), "t.tar", read_buffer);
        std::vector<Member> got;
        TarEntry e;
        std::string data;
        while (true) {
          Result<bool> more = reader.Next(&e, &data);
          ASSERT_OK(more);
          if (!*more) break;
          got.push_back({e.name, data});
        }
        ExpectSameMembers(got, members);
        EXPECT_EQ(reader.offset(), expected.size() - 512);  // stops after the first zero block
      }
    }
  }
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

TEST(TarInteropTest, GnuTarListsAndExtractsOurArchives) {
  TempDir dir;
  std::vector<Member> members = SampleMembers();
  for (const std::string& name : LimitNames()) members.push_back({name, "limit " + name});
  TarWriterOptions options;
  options.mtime = 1600000000;
  const std::string archive = Build(members, options);
  WriteFile(dir.Join("ours.tar"), archive);

  // `tar -tf` lists exactly our names, in order.
  CommandResult listing = RunCommand("tar -tf " + ShellQuote(dir.Join("ours.tar")) + " 2>&1");
  ASSERT_EQ(listing.exit_code, 0) << listing.output;
  std::string expected_listing;
  for (const Member& m : members) expected_listing += m.name + "\n";
  EXPECT_EQ(listing.output, expected_listing);

  // `tar -tvf` shows sizes, modes and the mtime.
  CommandResult verbose =
      RunCommand("TZ=UTC tar -tvf " + ShellQuote(dir.Join("ours.tar")) + " 2>&1");
  ASSERT_EQ(verbose.exit_code, 0) << verbose.output;
  EXPECT_NE(verbose.output.find("-rw-r--r-- 0/0          300000 2020-09-13 12:26 big.bin"),
            std::string::npos)
      << verbose.output;

  // `tar -xf` recreates every file byte for byte.
  std::filesystem::create_directories(dir.Join("x"));
  CommandResult extract = RunCommand("tar -xf " + ShellQuote(dir.Join("ours.tar")) + " -C " +
                                     ShellQuote(dir.Join("x")) + " 2>&1");
  ASSERT_EQ(extract.exit_code, 0) << extract.output;
  for (const Member& m : members) {
    EXPECT_TRUE(ReadFile(dir.Join("x/" + m.name)) == m.data) << m.name;
  }
}

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

TEST(TarInteropTest, PythonTarfileReadsOurArchives) {
  TempDir dir;
  std::vector<Member> members = SampleMembers();
  for (const std::string& name : LimitNames()) members.push_back({name, "limit " + name});
  WriteFile(dir.Join("ours.tar"), Build(members));
  // Python prints "name<TAB>size<TAB>sha256 of the data" per member.
  const char* script = R"PY(
import hashlib, sys, tarfile
with tarfile.open(sys.argv[1]) as tar:
    for m in tar:
        data = tar.extractfile(m).read()
        sys.stdout.buffer.write(m.name.encode("utf-8", "surrogateescape") + b"\t" +
                                str(m.size).encode() + b"\t" +
                                hashlib.sha256(data).hexdigest().encode() + b"\n")
)PY";
  CommandResult listed = RunCommand("/usr/bin/python3 -c " + ShellQuote(script) + " " +
                                    ShellQuote(dir.Join("ours.tar")) + " 2>&1");
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  std::istringstream lines(listed.output);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line)) {
    ASSERT_LT(i, members.size());
    size_t t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
    EXPECT_EQ(line.substr(0, t1), members[i].name);
    EXPECT_EQ(line.substr(t1 + 1, t2 - t1 - 1), std::to_string(members[i].data.size()));
    EXPECT_EQ(line.substr(t2 + 1), Sha256Hex(members[i].data)) << members[i].name;
    ++i;
  }
  EXPECT_EQ(i, members.size());
}

}  // namespace
}  // namespace reel::dataset
