#include "models/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "testing/shell.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::models {
namespace {

TensorBytes Floats(std::vector<int64_t> shape, std::vector<float> values) {
  TensorBytes t;
  t.dtype = "F32";
  t.shape = std::move(shape);
  t.data.resize(values.size() * 4);
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

TEST(SafetensorsTest, RoundTripKeepsTensorsAndMetadata) {
  SafetensorsFile file;
  file.tensors["fc.weight"] = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  file.tensors["fc.bias"] = Floats({2}, {-1, 0.5});
  TensorBytes steps;
  steps.dtype = "I64";
  steps.shape = {};
  steps.data.assign(8, '\0');
  steps.data[0] = 7;
  file.tensors["bn.num_batches_tracked"] = steps;
  file.metadata["format"] = "pt";
  auto bytes = WriteSafetensors(file);
  ASSERT_OK(bytes);
  uint64_t header = 0;
  std::memcpy(&header, bytes->data(), 8);
  EXPECT_EQ(header % 8, 0u);
  auto back = ReadSafetensors(*bytes);
  ASSERT_OK(back);
  ASSERT_EQ(back->tensors.size(), 3u);
  EXPECT_EQ(back->tensors["fc.weight"].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(back->tensors["fc.weight"].data, file.tensors["fc.weight"].data);
  EXPECT_EQ(back->tensors["bn.num_batches_tracked"].data[0], 7);
  EXPECT_EQ(back->metadata["format"], "pt");
}

TEST(SafetensorsTest, ReadsWhatPythonWritesAndPythonReadsWhatWeWrite) {
  reel::testing::TempDir dir_owner;
  const std::string dir = dir_owner.path();
  const std::string from_python = std::string(dir) + "/py.safetensors";
  // The format written by hand in Python, as the reference library lays it out.
  const std::string script =
      "import json, struct, sys\n"
      "import numpy as np\n"
      "w = np.arange(6, dtype=np.float32).reshape(2, 3) / 4\n"
      "b = np.array([7, -8], dtype=np.int64)\n"
      "header = {'w': {'dtype': 'F32', 'shape': [2, 3], 'data_offsets': [0, 24]},\n"
      "          'b': {'dtype': 'I64', 'shape': [2], 'data_offsets': [24, 40]},\n"
      "          '__metadata__': {'format': 'pt'}}\n"
      "h = json.dumps(header).encode()\n"
      "h += b' ' * ((8 - len(h) % 8) % 8)\n"
      "open(sys.argv[1], 'wb').write(struct.pack('<Q', len(h)) + h + w.tobytes() + b.tobytes())\n";
  std::ofstream(std::string(dir) + "/write.py") << script;
  auto run =
      testing::RunCommand("/usr/bin/python3 " + std::string(dir) + "/write.py " + from_python);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::ifstream in(from_python, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  auto file = ReadSafetensors(bytes, from_python);
  ASSERT_OK(file);
  float w[6];
  std::memcpy(w, file->tensors["w"].data.data(), 24);
  EXPECT_FLOAT_EQ(w[5], 1.25f);
  int64_t b[2];
  std::memcpy(b, file->tensors["b"].data.data(), 16);
  EXPECT_EQ(b[1], -8);

  const std::string from_us = std::string(dir) + "/ours.safetensors";
  auto ours = WriteSafetensors(*file);
  ASSERT_OK(ours);
  std::ofstream(from_us, std::ios::binary) << *ours;
  const std::string check =
      "import json, struct, sys\n"
      "import numpy as np\n"
      "d = open(sys.argv[1], 'rb').read()\n"
      "n = struct.unpack('<Q', d[:8])[0]\n"
      "h = json.loads(d[8:8 + n])\n"
      "s, e = h['w']['data_offsets']\n"
      "w = np.frombuffer(d[8 + n + s:8 + n + e], dtype=np.float32).reshape(h['w']['shape'])\n"
      "print(w[1, 2], h['__metadata__']['format'])\n";
  std::ofstream(std::string(dir) + "/read.py") << check;
  run = testing::RunCommand("/usr/bin/python3 " + std::string(dir) + "/read.py " + from_us);
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.output, "1.25 pt\n");
  testing::RunCommand("rm -rf " + std::string(dir));
}

TEST(SafetensorsTest, MalformedFilesAreDataLoss) {
  SafetensorsFile file;
  file.tensors["a"] = Floats({2}, {1, 2});
  file.tensors["b"] = Floats({1}, {3});
  std::string good = WriteSafetensors(file).value();
  EXPECT_STATUS(ReadSafetensors(good.substr(0, 5)), StatusCode::kDataLoss);
  EXPECT_STATUS(ReadSafetensors(good.substr(0, good.size() - 1)), StatusCode::kDataLoss);
  std::string huge = good;
  huge[7] = 0x7f;  // header length far past the end
  EXPECT_STATUS(ReadSafetensors(huge), StatusCode::kDataLoss);
  auto with_header = [](const std::string& json, size_t data_bytes) {
    std::string out(8, '\0');
    uint64_t n = json.size();
    std::memcpy(out.data(), &n, 8);
    return out + json + std::string(data_bytes, '\0');
  };
  auto overlap = ReadSafetensors(with_header(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      12));
  EXPECT_STATUS(overlap, StatusCode::kDataLoss);
  EXPECT_NE(overlap.status().message().find("overlap"), std::string::npos);
  auto wrong_size =
      ReadSafetensors(with_header(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8));
  EXPECT_STATUS(wrong_size, StatusCode::kDataLoss);
  auto dtype =
      ReadSafetensors(with_header(R"({"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}})", 1));
  EXPECT_NE(dtype.status().message().find("unknown dtype 'Q7'"), std::string::npos);
  SafetensorsFile bad;
  bad.tensors["x"] = Floats({3}, {1, 2});  // 8 bytes for 3 floats
  EXPECT_STATUS(WriteSafetensors(bad), StatusCode::kInvalidArgument);
}

TEST(SafetensorsTest, TheLayoutIsWhereWriteSafetensorsPutsEachTensor) {
  SafetensorsFile file;
  file.tensors["a.odd"] = TensorBytes{"U8", {3}, "xyz"};  // the next tensor starts 5 bytes on
  file.tensors["b.weight"] = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  file.tensors["c.empty"] = TensorBytes{"F16", {0, 4}, ""};
  file.tensors["d.half"] = TensorBytes{"F16", {1}, "hh"};
  file.metadata["format"] = "pt";
  std::map<std::string, TensorSpec> specs;
  for (const auto& [name, t] : file.tensors) specs[name] = {t.dtype, t.shape};
  ASSERT_OK_AND_ASSIGN(SafetensorsLayout layout, LayOutSafetensors(specs, file.metadata));
  ASSERT_OK_AND_ASSIGN(std::string bytes, WriteSafetensors(file));
  ASSERT_EQ(layout.file_size, bytes.size());
  EXPECT_EQ(bytes.substr(0, layout.head.size()), layout.head);
  for (const auto& [name, t] : file.tensors) {
    EXPECT_EQ(bytes.substr(layout.offsets.at(name), t.data.size()), t.data) << name;
  }
  EXPECT_EQ(layout.offsets.at("b.weight") - layout.offsets.at("a.odd"), 8u);
  EXPECT_EQ(bytes.substr(layout.offsets.at("a.odd") + 3, 5), std::string(5, '\0'));
  specs["e"] = {"Q7", {1}};
  EXPECT_STATUS(LayOutSafetensors(specs, {}), StatusCode::kInvalidArgument);
  specs["e"] = {"F32", {-1}};
  EXPECT_STATUS(LayOutSafetensors(specs, {}), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace reel::models
