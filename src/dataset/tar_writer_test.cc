// TarWriter: round trips in memory and through object stores, offsets and MemberBytes, options,
// names at the ustar limits, and GNU tar and Python's tarfile reading what it writes.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "base/hash.h"
#include "dataset/tar.h"
#include "dataset/tar_test_util.h"
#include "dataset/testing/shell.h"
#include "storage/local_store.h"
#include "storage/memory_store.h"
#include "storage/testing/temp_dir.h"
#include "testing/status_matchers.h"

namespace reel::dataset {
namespace {

using storage::testing::ReadFile;
using storage::testing::TempDir;
using storage::testing::WriteFile;
using testing::Build;
using testing::CommandResult;
using testing::ExpectSameMembers;
using testing::Member;
using testing::ReadAll;
using testing::RunCommand;
using testing::SampleMembers;
using testing::ShellQuote;

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

// --- Python tarfile ------------------------------------------------------------------------------

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
