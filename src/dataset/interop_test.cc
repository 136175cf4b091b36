// A dataset written by Reel, read by other tools: Python's tarfile and json modules following
// WebDataset's grouping rules, and GNU tar.
#include <gtest/gtest.h>

#include <sstream>

#include "base/hash.h"
#include "dataset/manifest.h"
#include "dataset/shard_reader.h"
#include "dataset/testing/records.h"
#include "dataset/testing/shell.h"
#include "testing/status_matchers.h"

namespace reel::dataset {
namespace {

using testing::CommandResult;
using testing::MakeRecord;
using testing::RunCommand;
using testing::ShellQuote;
using testing::StoreKind;
using testing::TestStore;

// Reads a shard with tarfile, groups members into samples the way webdataset does (key = the
// name up to the first '.' of its base name), and checks each sample against the .idx: member
// data at the index's offsets, xxh3-free checks (sha256 printed for C++ to compare), .cls and
// .json contents. Prints one line per sample: key, label, payload extension, payload sha256.
constexpr const char* kReadShard = R"PY(
import hashlib, json, re, sys, tarfile
tar_path, idx_path = sys.argv[1], sys.argv[2]
raw = open(tar_path, "rb").read()
index = json.load(open(idx_path))
assert index["format"] == "reel-shard-index" and index["version"] == 1, index
assert index["tar_bytes"] == len(raw), (index["tar_bytes"], len(raw))
samples, order = {}, []
with tarfile.open(tar_path) as tar:
    for m in tar:
        assert m.isfile(), m.name
        key, ext = re.match(r"^((?:.*/|)[^.]+)[.]([^/]*)$", m.name).groups()
        if key not in samples:
            samples[key] = {}
            order.append(key)
        data = tar.extractfile(m).read()
        # The index's offset and size locate exactly these bytes.
        samples[key][ext] = (data, m.offset_data, m.size)
assert order == [r["key"] for r in index["records"]], (order, index["records"])
for rec in index["records"]:
    s = samples[rec["key"]]
    assert len(rec["members"]) == len(s) == 3, rec
    for name, offset, size, xxh in rec["members"]:
        ext = name[len(rec["key"]) + 1:]
        data, tar_offset, tar_size = s[ext]
        assert (offset, size) == (tar_offset, tar_size), (name, offset, size, tar_offset)
        assert raw[offset:offset + size] == data, name
        assert re.fullmatch(r"[0-9a-f]{16}", xxh), xxh
    label = int(s["cls"][0].decode("ascii"))
    assert label == rec["label"], (label, rec)
    meta = json.loads(s["json"][0])
    assert meta["key"] == rec["key"] and meta["label_index"] == label, meta
    assert meta["checksum"].startswith("xxh3:"), meta
    payload_ext = [e for e in s if e not in ("cls", "json")][0]
    print(rec["key"], label, meta["label"], payload_ext,
          hashlib.sha256(s[payload_ext][0]).hexdigest())
)PY";

TEST(InteropTest, PythonReadsOurShardsAsWebDataset) {
  TestStore store(StoreKind::kLocal);
  std::vector<Record> records;
  for (int i = 0; i < 10; ++i) records.push_back(MakeRecord(i, 700 + 997 * i));
  ShardWriterOptions options;
  options.target_bytes = 24 * 1024;
  auto writer = ShardWriter::Create(*store, "ds", "train", options);
  ASSERT_OK(writer);
  for (const Record& r : records) ASSERT_OK((*writer)->AddRecord(r));
  ASSERT_OK((*writer)->Finish());
  ASSERT_GE((*writer)->shards().size(), 2u);

  size_t next = 0;
  for (const ShardStats& shard : (*writer)->shards()) {
    const std::string tar_path = store.directory() + "/" + shard.tar_key;
    const std::string idx_path = store.directory() + "/" + shard.index_key;
    CommandResult result = RunCommand("/usr/bin/python3 -c " + ShellQuote(kReadShard) + " " +
                                      ShellQuote(tar_path) + " " + ShellQuote(idx_path) + " 2>&1");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    std::istringstream lines(result.output);
    std::string key, label_name, ext, sha;
    int label;
    size_t n = 0;
    while (lines >> key >> label >> label_name >> ext >> sha) {
      ASSERT_LT(next, records.size());
      const Record& want = records[next++];
      EXPECT_EQ(key, want.key);
      EXPECT_EQ(label, want.label);
      EXPECT_EQ(label_name, want.label_name);
      EXPECT_EQ(ext, "mp4");
      EXPECT_EQ(sha, Sha256Hex(want.payload));
      ++n;
    }
    EXPECT_EQ(n, shard.records) << result.output;

    // GNU tar lists the members in WebDataset order and verifies the archive.
    CommandResult listing = RunCommand("tar -tf " + ShellQuote(tar_path) + " 2>&1");
    ASSERT_EQ(listing.exit_code, 0) << listing.output;
    std::istringstream names(listing.output);
    std::string name;
    size_t members = 0;
    while (std::getline(names, name)) {
      static const char* kExts[] = {".mp4", ".cls", ".json"};
      EXPECT_EQ(name.substr(name.find('.')), kExts[members % 3]) << name;
      ++members;
    }
    EXPECT_EQ(members, 3 * shard.records);
  }
  EXPECT_EQ(next, records.size());
}

TEST(InteropTest, PythonReadsTheManifest) {
  TestStore store(StoreKind::kLocal);
  Manifest m;
  m.name = "interop";
  m.mode = DatasetMode::kVideo;
  m.classes = {"class0", "class1", "class2"};
  m.clip_settings = {{"clip_frames", 16}};
  m.source_hash = "xxh3:0123456789abcdef";
  auto writer = ShardWriter::Create(*store, "ds", "train");
  ASSERT_OK(writer);
  for (int i = 0; i < 5; ++i) ASSERT_OK((*writer)->AddRecord(MakeRecord(i, 100)));
  ASSERT_OK((*writer)->Finish());
  ASSERT_OK(m.AddSplit("train", (*writer)->shards()));
  ASSERT_OK(m.Write(*store, "ds"));
  const char* script = R"PY(
import json, os, sys, tarfile
root = sys.argv[1]
m = json.load(open(os.path.join(root, "manifest.json")))
total = 0
for split, info in m["splits"].items():
    for shard in info["shards"]:
        path = os.path.join(root, split, shard["name"] + ".tar")
        assert os.path.getsize(path) == shard["tar_bytes"]
        with tarfile.open(path) as tar:
            total += sum(1 for t in tar if t.name.endswith(".cls"))
print(m["format"], m["format_version"], m["mode"], len(m["classes"]), total,
      sum(m["splits"]["train"]["class_counts"]))
)PY";
  CommandResult result = RunCommand("/usr/bin/python3 -c " + ShellQuote(script) + " " +
                                    ShellQuote(store.directory() + "/ds") + " 2>&1");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, "reel-dataset 1 video 3 5 5\n");
}

}  // namespace
}  // namespace reel::dataset
