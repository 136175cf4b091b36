// OpenStore / OpenObjectUri: which store a URI names. No server is contacted: S3 stores are only
// constructed, against an endpoint where nothing listens.
#include "storage/open.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <string>

#include "storage/caching_store.h"
#include "storage/local_store.h"
#include "storage/s3_store.h"
#include "storage/testing/temp_dir.h"
#include "testing/status_matchers.h"

namespace reel::storage {
namespace {

using testing::FileExists;
using testing::ReadFile;
using testing::TempDir;

// Sets the variables OpenStore reads for the length of a test, and puts the old ones back.
class OpenStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name :
         {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
          "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_S3_ADDRESSING_STYLE",
          "REEL_CACHE_DIR", "REEL_CACHE_MAX_GB", "REEL_S3_MAX_ATTEMPTS", "REEL_S3_PART_SIZE_MB",
          "REEL_S3_MULTIPART_THRESHOLD_MB", "REEL_S3_PARALLELISM", "REEL_S3_CONNECT_TIMEOUT_MS"}) {
      const char* value = std::getenv(name);
      saved_[name] = value ? std::optional<std::string>(value) : std::nullopt;
      ::unsetenv(name);
    }
    Set("AWS_ACCESS_KEY_ID", "test-key");
    Set("AWS_SECRET_ACCESS_KEY", "test-secret");
    Set("AWS_ENDPOINT_URL", "http://127.0.0.1:1");
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  static void Set(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }

  TempDir dir_;

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST_F(OpenStoreTest, MemUrisShareDataWithinTheProcess) {
  auto first = OpenStore("mem://open-test-shared");
  auto second = OpenStore("mem://open-test-shared");
  auto other = OpenStore("mem://open-test-other");
  ASSERT_TRUE(first.ok() && second.ok() && other.ok());
  EXPECT_EQ((*first)->uri(), "mem://open-test-shared");
  ASSERT_OK((*first)->Put("k", "shared"));
  EXPECT_EQ(*(*second)->Get("k"), "shared");
  EXPECT_STATUS((*other)->Get("k"), StatusCode::kNotFound);
  // The data outlives every opener.
  first->reset();
  second->reset();
  auto third = OpenStore("mem://open-test-shared");
  ASSERT_OK(third);
  EXPECT_EQ(*(*third)->Get("k"), "shared");
}

TEST_F(OpenStoreTest, PathsAndFileUrisOpenLocalStores) {
  std::string root = dir_.Join("store");
  for (std::string uri : {root, "file://" + root, root + "/", root + "/./sub/.."}) {
    SCOPED_TRACE(uri);
    auto store = OpenStore(uri);
    ASSERT_OK(store);
    auto* local = dynamic_cast<LocalStore*>(store->get());
    ASSERT_NE(local, nullptr);
    EXPECT_EQ(local->uri(), "file://" + root);
    EXPECT_EQ(local->root(), root);
  }
  auto store = OpenStore(root);
  ASSERT_OK((*store)->Put("x/y", "data"));
  EXPECT_EQ(ReadFile(root + "/x/y"), "data");
}

TEST_F(OpenStoreTest, RelativePathsAreUnderTheCurrentDirectory) {
  char* cwd = ::getcwd(nullptr, 0);
  ASSERT_NE(cwd, nullptr);
  std::string old_cwd = cwd;
  std::free(cwd);
  ASSERT_EQ(::chdir(dir_.path().c_str()), 0);
  auto store = OpenStore("relative/store");
  ASSERT_EQ(::chdir(old_cwd.c_str()), 0);
  ASSERT_OK(store);
  EXPECT_EQ((*store)->uri(), "file://" + dir_.Join("relative/store"));
  EXPECT_TRUE(FileExists(dir_.Join("relative/store")));
}

TEST_F(OpenStoreTest, BadUrisAreInvalidArgument) {
  for (std::string uri : {"ftp://x", "http://host/bucket", "s3://Bad_Bucket", "s3://ab", "s3://",
                          "s3://bucket_with_underscore/k", ""}) {
    auto store = OpenStore(uri);
    EXPECT_STATUS(store, StatusCode::kInvalidArgument) << "'" << uri << "'";
    EXPECT_STATUS(OpenObjectUri(uri), StatusCode::kInvalidArgument) << "'" << uri << "'";
  }
}

TEST_F(OpenStoreTest, BadS3SettingsAreInvalidArgument) {
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  EXPECT_STATUS(OpenStore("s3://bucket"), StatusCode::kInvalidArgument);
  Set("AWS_SECRET_ACCESS_KEY", "test-secret");
  Set("REEL_S3_MAX_ATTEMPTS", "many");
  EXPECT_STATUS(OpenStore("s3://bucket"), StatusCode::kInvalidArgument);
  ::unsetenv("REEL_S3_MAX_ATTEMPTS");
  EXPECT_OK(OpenStore("s3://bucket"));
}

TEST_F(OpenStoreTest, S3UrisOpenS3Stores) {
  auto store = OpenStore("s3://bucket/some/prefix/");
  ASSERT_OK(store);
  ASSERT_NE(dynamic_cast<S3Store*>(store->get()), nullptr);
  EXPECT_EQ((*store)->uri(), "s3://bucket/some/prefix");
  auto plain = OpenStore("s3://bucket");
  ASSERT_OK(plain);
  EXPECT_EQ((*plain)->uri(), "s3://bucket");
}

TEST_F(OpenStoreTest, OpenObjectUriSplitsS3UrisWithoutContactingTheServer) {
  auto location = OpenObjectUri("s3://bucket/a/b.tar");
  ASSERT_OK(location);
  EXPECT_EQ(location->key, "a/b.tar");
  EXPECT_EQ(location->store->uri(), "s3://bucket");
  EXPECT_NE(dynamic_cast<S3Store*>(location->store.get()), nullptr);

  auto bucket_only = OpenObjectUri("s3://bucket");
  ASSERT_OK(bucket_only);
  EXPECT_EQ(bucket_only->key, "");
  auto directory = OpenObjectUri("s3://bucket/dir/");
  ASSERT_OK(directory);
  EXPECT_EQ(directory->key, "dir");

  auto memory = OpenObjectUri("mem://open-test-objects/x/y");
  ASSERT_OK(memory);
  EXPECT_EQ(memory->key, "x/y");
  EXPECT_EQ(memory->store->uri(), "mem://open-test-objects");
}

TEST_F(OpenStoreTest, OpenObjectUriOfALocalPathWritesThatFile) {
  std::string path = dir_.Join("sub/f.bin");
  for (std::string uri : {path, "file://" + path}) {
    SCOPED_TRACE(uri);
    auto location = OpenObjectUri(uri);
    ASSERT_OK(location);
    EXPECT_EQ(location->store->uri(), "file:///");
    EXPECT_EQ(location->key, path.substr(1));
    ASSERT_OK(location->store->Put(location->key, "via " + uri));
    EXPECT_TRUE(FileExists(path));
    EXPECT_EQ(ReadFile(path), "via " + uri);
    EXPECT_EQ(*location->store->Get(location->key), "via " + uri);
  }
  auto root = OpenObjectUri("/");
  ASSERT_OK(root);
  EXPECT_EQ(root->key, "");
  auto directory = OpenObjectUri(dir_.path() + "/sub/");
  ASSERT_OK(directory);
  EXPECT_EQ(directory->key, dir_.path().substr(1) + "/sub");
}

TEST_F(OpenStoreTest, CacheDirectoryWrapsRemoteStoresOnly) {
  std::string cache_dir = dir_.Join("cache");
  Set("REEL_CACHE_DIR", cache_dir);
  auto s3 = OpenStore("s3://bucket/prefix");
  ASSERT_OK(s3);
  auto* cached = dynamic_cast<CachingStore*>(s3->get());
  ASSERT_NE(cached, nullptr);
  EXPECT_EQ(cached->uri(), "s3://bucket/prefix");
  EXPECT_NE(dynamic_cast<S3Store*>(&cached->inner()), nullptr);
  EXPECT_TRUE(FileExists(cache_dir));

  auto object = OpenObjectUri("s3://bucket/a/b.tar");
  ASSERT_OK(object);
  EXPECT_NE(dynamic_cast<CachingStore*>(object->store.get()), nullptr);
  EXPECT_EQ(object->key, "a/b.tar");

  auto local = OpenStore(dir_.Join("local"));
  ASSERT_OK(local);
  EXPECT_NE(dynamic_cast<LocalStore*>(local->get()), nullptr);
  auto memory = OpenStore("mem://open-test-cache");
  ASSERT_OK(memory);
  EXPECT_EQ(dynamic_cast<CachingStore*>(memory->get()), nullptr);

  Set("REEL_CACHE_MAX_GB", "0");
  EXPECT_STATUS(OpenStore("s3://bucket"), StatusCode::kInvalidArgument);
  Set("REEL_CACHE_MAX_GB", "0.5");
  EXPECT_OK(OpenStore("s3://bucket"));

  // Without the variable, the option alone turns the cache on.
  ::unsetenv("REEL_CACHE_DIR");
  auto plain = OpenStore("s3://bucket");
  ASSERT_OK(plain);
  EXPECT_EQ(dynamic_cast<CachingStore*>(plain->get()), nullptr);
  StoreOpenOptions options;
  options.cache_directory = dir_.Join("explicit-cache");
  options.cache_max_bytes = 1 << 20;
  auto explicit_cache = OpenStore("s3://bucket", options);
  ASSERT_OK(explicit_cache);
  EXPECT_NE(dynamic_cast<CachingStore*>(explicit_cache->get()), nullptr);
  EXPECT_TRUE(FileExists(dir_.Join("explicit-cache")));
}

}  // namespace
}  // namespace reel::storage
