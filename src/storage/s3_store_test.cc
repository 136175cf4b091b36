// S3Store against a real Ceph radosgw on loopback (ctest fixture "ceph"). Ceph enforces SigV4,
// multipart rules and conditional writes, so these tests exercise what AWS would.
#include "storage/s3_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "base/hash.h"
#include "base/sync_point.h"
#include "storage/caching_store.h"
#include "storage/testing/ceph_env.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "testing/wait.h"

namespace reel::storage {
namespace {

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(n, '\0');
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  for (; i < n; ++i) out[i] = static_cast<char>(rng());
  return out;
}

class S3StoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(testing::LoadCephEnvironment())
        << "no Ceph cluster: run through ctest (fixture 'ceph') or set REEL_CEPH_DIR";
    bucket_ = "reel-test-" + std::to_string(::getpid());
    auto store = Open(bucket_);
    Status created = store->CreateBucket();
    ASSERT_OK(created);
  }

  static S3Options Options() {
    auto options = S3Options::FromEnvironment();
    EXPECT_OK(options);
    return *options;
  }

  static std::unique_ptr<S3Store> Open(const std::string& bucket, const std::string& prefix = "",
                                       S3Options options = Options()) {
    auto store = S3Store::Open(bucket, prefix, options);
    EXPECT_OK(store);
    return std::move(store).value();
  }

  std::unique_ptr<S3Store> store_ = Open(bucket_, "t");
  static std::string bucket_;
};
std::string S3StoreTest::bucket_;

TEST_F(S3StoreTest, SmallObjectRoundTripWithMetadata) {
  std::string data = RandomBytes(100000, 1);
  data[10] = '\0';
  ASSERT_OK(store_->Put("small/a.bin", data));
  ObjectInfo info;
  auto got = store_->Get("small/a.bin", &info);
  ASSERT_OK(got);
  EXPECT_EQ(*got, data);
  EXPECT_EQ(info.size, data.size());
  EXPECT_EQ(info.etag, Md5Hex(data));  // single-part ETag is the MD5 of the bytes
  auto head = store_->Head("small/a.bin");
  ASSERT_OK(head);
  EXPECT_EQ(head->size, data.size());
  EXPECT_EQ(head->etag, info.etag);
  EXPECT_GT(head->mtime_ms, 1600000000000);
  EXPECT_EQ(store_->uri(), "s3://" + bucket_ + "/t");
}

TEST_F(S3StoreTest, ConnectionsAreKeptAliveAndReused) {
  auto store = Open(bucket_, "t");
  ASSERT_OK(store->Put("reuse/k", "v"));
  for (int i = 0; i < 20; ++i) ASSERT_OK(store->Get("reuse/k"));
  auto stats = store->stats();
  EXPECT_EQ(stats.requests, 21u);
  EXPECT_EQ(stats.connections, 1u) << "each request opened its own connection";
}

TEST_F(S3StoreTest, KeysWithSpecialCharactersRoundTripAndList) {
  const std::string key = "odd/with space/\xc3\xbc+&=?#%.bin";
  ASSERT_OK(store_->Put(key, "x"));
  auto got = store_->Get(key);
  ASSERT_OK(got);
  EXPECT_EQ(*got, "x");
  auto listed = ListAll(*store_, "odd/");
  ASSERT_OK(listed);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].key, key);
}

TEST_F(S3StoreTest, MultipartRoundTripOf200MiBMatchesChecksum) {
  std::string data = RandomBytes(200u << 20, 2);
  const std::string expected = Xxh3_128Hex(data);
  ASSERT_OK(store_->Put("big/200m.bin", data));
  data = std::string();  // free before reading back
  auto head = store_->Head("big/200m.bin");
  ASSERT_OK(head);
  EXPECT_EQ(head->size, 200u << 20);
  // A multipart ETag ends in "-<parts>": 200 MiB in 16 MiB parts is 13 parts.
  EXPECT_NE(head->etag.find("-13"), std::string::npos) << head->etag;
  auto before = store_->stats();
  auto got = store_->Get("big/200m.bin");
  ASSERT_OK(got);
  EXPECT_EQ(got->size(), 200u << 20);
  EXPECT_EQ(Xxh3_128Hex(*got), expected);
  // Read as parallel ranges: 13 ranged GETs, no HEAD.
  EXPECT_EQ(store_->stats().requests - before.requests, 13u);
}

TEST_F(S3StoreTest, StreamingWriterAndReaderAcrossTheMultipartThreshold) {
  S3Options options = Options();
  options.multipart_threshold = 8 << 20;
  options.part_size = 5 << 20;
  auto store = Open(bucket_, "t", options);
  std::string data = RandomBytes(23u << 20, 3);  // 5 parts, the last one short
  auto writer = store->OpenWriter("stream/w.bin");
  ASSERT_OK(writer);
  for (size_t i = 0; i < data.size(); i += 777777) {
    ASSERT_OK((*writer)->Write(std::string_view(data).substr(i, 777777)));
  }
  ASSERT_OK((*writer)->Close());
  auto head = store->Head("stream/w.bin");
  ASSERT_OK(head);
  EXPECT_EQ(head->size, data.size());
  EXPECT_NE(head->etag.find("-5"), std::string::npos) << head->etag;

  auto reader = store->OpenReader("stream/w.bin");
  ASSERT_OK(reader);
  EXPECT_EQ((*reader)->size(), data.size());
  std::string read;
  std::string buffer(1 << 20, '\0');
  while (true) {
    auto n = (*reader)->Read(buffer.data(), 999999);
    ASSERT_OK(n);
    if (*n == 0) break;
    read.append(buffer.data(), *n);
  }
  EXPECT_TRUE(read == data);

  // A small streamed object goes up as one PUT.
  auto small = store->OpenWriter("stream/small.bin");
  ASSERT_OK(small);
  ASSERT_OK((*small)->Write("hello "));
  ASSERT_OK((*small)->Write("world"));
  ASSERT_OK((*small)->Close());
  EXPECT_EQ(store->Get("stream/small.bin").value(), "hello world");
}

TEST_F(S3StoreTest, AbandonedWriterLeavesNoObject) {
  S3Options options = Options();
  options.multipart_threshold = 5 << 20;
  options.part_size = 5 << 20;
  auto store = Open(bucket_, "t", options);
  {
    auto writer = store->OpenWriter("abandoned.bin");
    ASSERT_OK(writer);
    ASSERT_OK((*writer)->Write(RandomBytes(12 << 20, 4)));
  }  // destroyed without Close: the multipart upload is aborted
  EXPECT_STATUS(store->Head("abandoned.bin"), StatusCode::kNotFound);
}

TEST_F(S3StoreTest, RangedReadsAtObjectEdges) {
  std::string data = RandomBytes(1000, 5);
  ASSERT_OK(store_->Put("range/k", data));
  EXPECT_EQ(store_->GetRange("range/k", 0, 1).value(), data.substr(0, 1));
  EXPECT_EQ(store_->GetRange("range/k", 999, 1).value(), data.substr(999, 1));
  EXPECT_EQ(store_->GetRange("range/k", 990, 100).value(), data.substr(990));  // clipped
  EXPECT_EQ(store_->GetRange("range/k", 1000, 5).value(), "");                 // at the end
  EXPECT_EQ(store_->GetRange("range/k", 10, 0).value(), "");
  auto past = store_->GetRange("range/k", 1001, 1);
  EXPECT_STATUS(past, StatusCode::kOutOfRange) << past.status().ToString();
  EXPECT_STATUS(store_->GetRange("range/missing", 0, 1), StatusCode::kNotFound);

  // A range longer than a part is fetched as parallel ranges.
  std::string big = RandomBytes(40u << 20, 6);
  ASSERT_OK(store_->Put("range/big", big));
  auto middle = store_->GetRange("range/big", 12345, 35u << 20);
  ASSERT_OK(middle);
  EXPECT_TRUE(*middle == big.substr(12345, 35u << 20));
  auto tail = store_->GetRange("range/big", (40u << 20) - 7, 100u << 20);
  ASSERT_OK(tail);
  EXPECT_EQ(*tail, big.substr((40u << 20) - 7));

  // An empty object reads back empty (a ranged GET of it is a 416 on S3).
  ASSERT_OK(store_->Put("range/empty", ""));
  EXPECT_EQ(store_->Get("range/empty").value(), "");
}

TEST_F(S3StoreTest, ListsMoreThan1000KeysAcrossPages) {
  auto store = Open(bucket_, "list");
  constexpr int kKeys = 1100;
  std::atomic<int> next{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < 8; ++t) {
    writers.emplace_back([&] {
      for (int i = next++; i < kKeys; i = next++) {
        char key[32];
        std::snprintf(key, sizeof key, "%s/%05d", i % 2 ? "odd" : "even", i);
        if (!store->Put(key, std::to_string(i)).ok()) ++failures;
      }
    });
  }
  for (auto& w : writers) w.join();
  ASSERT_EQ(failures.load(), 0);

  auto all = ListAll(*store, "");
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), static_cast<size_t>(kKeys));
  for (size_t i = 1; i < all->size(); ++i) EXPECT_LT((*all)[i - 1].key, (*all)[i].key);
  EXPECT_EQ(all->front().key, "even/00000");

  ListOptions options;
  options.max_keys = 1000;
  auto first = store->List(options);
  ASSERT_OK(first);
  EXPECT_EQ(first->objects.size(), 1000u);
  EXPECT_FALSE(first->next_page_token.empty());
  options.page_token = first->next_page_token;
  auto second = store->List(options);
  ASSERT_OK(second);
  EXPECT_EQ(second->objects.size(), 100u);
  EXPECT_TRUE(second->next_page_token.empty());

  ListOptions grouped;
  grouped.delimiter = "/";
  auto groups = store->List(grouped);
  ASSERT_OK(groups);
  EXPECT_EQ(groups->common_prefixes, (std::vector<std::string>{"even/", "odd/"}));
  EXPECT_TRUE(groups->objects.empty());

  options.max_keys = 0;
  EXPECT_STATUS(store->List(options), StatusCode::kInvalidArgument);
}

TEST_F(S3StoreTest, MissingBucketAndMissingKeyAreNotFoundWithTheReason) {
  auto missing_key = store_->Get("no/such/key");
  EXPECT_STATUS(missing_key, StatusCode::kNotFound);
  EXPECT_NE(missing_key.status().message().find("NoSuchKey"), std::string::npos)
      << missing_key.status().ToString();
  auto head = store_->Head("no/such/key");
  EXPECT_STATUS(head, StatusCode::kNotFound);

  auto nobucket = Open("reel-no-such-bucket-" + std::to_string(::getpid()));
  for (const Status& status : {nobucket->Get("k").status(), nobucket->Head("k").status(),
                               nobucket->List(ListOptions{}).status(), nobucket->Put("k", "v")}) {
    EXPECT_STATUS(status, StatusCode::kNotFound) << status.ToString();
    EXPECT_NE(status.message().find("NoSuchBucket"), std::string::npos) << status.ToString();
  }
}

TEST_F(S3StoreTest, BadCredentialsArePermissionDeniedWithTheServersReason) {
  S3Options wrong_secret = Options();
  wrong_secret.secret_access_key = "not-the-secret-not-the-secret-not-the-se";
  auto status = Open(bucket_, "t", wrong_secret)->Put("denied", "x");
  EXPECT_STATUS(status, StatusCode::kPermissionDenied);
  EXPECT_NE(status.message().find("SignatureDoesNotMatch"), std::string::npos) << status.ToString();

  S3Options unknown_key = Options();
  unknown_key.access_key_id = "AKIANOTAKNOWNKEY0000";
  auto get = Open(bucket_, "t", unknown_key)->Get("small/a.bin");
  EXPECT_STATUS(get, StatusCode::kPermissionDenied);
  EXPECT_NE(get.status().message().find("InvalidAccessKeyId"), std::string::npos)
      << get.status().ToString();
  // 4xx answers are never retried.
  EXPECT_EQ(Open(bucket_, "t", unknown_key)->stats().retries, 0u);
}

TEST_F(S3StoreTest, PutIfAbsentHasExactlyOneWinner) {
  ASSERT_OK(store_->PutIfAbsent("lock/once", "first"));
  auto again = store_->PutIfAbsent("lock/once", "second");
  EXPECT_STATUS(again, StatusCode::kAlreadyExists) << again.ToString();
  EXPECT_EQ(store_->Get("lock/once").value(), "first");

  std::atomic<int> winners{0}, losers{0};
  std::vector<std::thread> racers;
  for (int i = 0; i < 8; ++i) {
    racers.emplace_back([&, i] {
      Status s = store_->PutIfAbsent("lock/race", "racer-" + std::to_string(i));
      if (s.ok())
        ++winners;
      else if (s.code() == StatusCode::kAlreadyExists)
        ++losers;
    });
  }
  for (auto& r : racers) r.join();
  EXPECT_EQ(winners.load(), 1);
  EXPECT_EQ(losers.load(), 7);
}

TEST_F(S3StoreTest, CacheServesTheSecondReadWithoutTouchingTheServer) {
  reel::testing::TempDir dir_template_owner;
  const std::string dir_template = dir_template_owner.path();
  auto s3 = Open(bucket_, "t");
  S3Store* raw = s3.get();
  std::string data = RandomBytes(3 << 20, 7);
  ASSERT_OK(raw->Put("cache/obj", data));
  CacheOptions options;
  options.directory = dir_template;
  options.max_bytes = 64 << 20;
  auto cache = CachingStore::Open(std::move(s3), options);
  ASSERT_OK(cache);
  uint64_t before_first = raw->stats().requests;
  EXPECT_EQ((*cache)->Get("cache/obj").value(), data);
  uint64_t after_first = raw->stats().requests;
  EXPECT_GE(after_first - before_first, 1u);
  EXPECT_EQ((*cache)->Get("cache/obj").value(), data);
  EXPECT_EQ((*cache)->GetRange("cache/obj", 100, 50).value(), data.substr(100, 50));
  EXPECT_EQ((*cache)->Head("cache/obj").value().size, data.size());
  EXPECT_EQ(raw->stats().requests, after_first) << "the cache went back to the server";
  EXPECT_EQ((*cache)->stats().hits, 3u);
  std::system(("rm -rf " + std::string(dir_template)).c_str());
}

// The gateway dies in the middle of a transfer and comes back: the transfer is retried and
// completes with the right bytes.
TEST_F(S3StoreTest, RadosgwRestartMidTransferIsRetriedToCompletion) {
  S3Options options = Options();
  // The gateway is down until the store has retried, plus its restart (1-2 s, more under load);
  // with full-jitter backoff, 12 attempts sometimes spent only 3.2 s and gave up first.
  options.max_attempts = 24;
  options.max_backoff_ms = 2000;
  options.part_size = 8 << 20;
  auto store = Open(bucket_, "t", options);
  std::string data = RandomBytes(160u << 20, 8);
  const std::string expected = Xxh3_128Hex(data);

  // The outage is decided by the client's own events, not by timing: the first request that
  // ends with `started` true stops the gateway before any request of the transfer goes on (they
  // wait at the sync point meanwhile; a fast download once finished in the time a stop took),
  // and the gateway comes back only after the store has failed a request and backed off.
  SyncPoint& sp = SyncPoint::Get();
  auto outage = [&](const std::function<bool()>& started) {
    auto mu = std::make_shared<std::mutex>();
    auto stopped = std::make_shared<std::atomic<bool>>(false);
    const uint64_t retries_before = store->stats().retries;
    sp.SetCallback("HttpClient::Execute:Attempted", [mu, stopped, started] {
      std::lock_guard<std::mutex> lock(*mu);
      if (stopped->load() || !started()) return;
      EXPECT_EQ(testing::CephControl("stop-rgw"), 0);
      stopped->store(true);
    });
    sp.EnableProcessing();
    return std::thread([&, stopped, retries_before] {
      EXPECT_TRUE(
          reel::testing::WaitUntil([&] { return stopped->load(); }, std::chrono::seconds(60)));
      EXPECT_TRUE(reel::testing::WaitUntil([&] { return store->stats().retries > retries_before; },
                                           std::chrono::seconds(30)));
      EXPECT_EQ(testing::CephControl("start-rgw"), 0);
    });
  };

  // Upload: the gateway stops once 40 MiB have gone out.
  std::thread restarter = outage([&] { return store->stats().bytes_sent > (40u << 20); });
  Status put = store->Put("restart/obj", data);
  restarter.join();
  sp.Reset();
  ASSERT_OK(put);
  EXPECT_GT(store->stats().retries, 0u) << "the restart did not interrupt the upload";

  // Download: the gateway stops once 40 MiB have come back.
  const uint64_t received_before = store->stats().bytes_received;
  const uint64_t retries_before = store->stats().retries;
  restarter = outage([&] { return store->stats().bytes_received - received_before > (40u << 20); });
  auto got = store->Get("restart/obj");
  restarter.join();
  sp.Reset();
  ASSERT_OK(got);
  EXPECT_EQ(Xxh3_128Hex(*got), expected);
  EXPECT_GT(store->stats().retries, retries_before) << "the restart did not interrupt the download";
}

TEST_F(S3StoreTest, GatewayDownBeyondTheRetryBudgetIsUnavailable) {
  S3Options options = Options();
  options.max_attempts = 3;
  options.initial_backoff_ms = 50;
  options.connect_timeout_ms = 1000;
  auto store = Open(bucket_, "t", options);
  ASSERT_EQ(testing::CephControl("stop-rgw"), 0);
  auto got = store->Get("small/a.bin");
  Status put = store->Put("down", "x");
  ASSERT_EQ(testing::CephControl("start-rgw"), 0);
  EXPECT_STATUS(got, StatusCode::kUnavailable) << got.status().ToString();
  EXPECT_NE(got.status().message().find("gave up after 3 attempts"), std::string::npos)
      << got.status().ToString();
  EXPECT_STATUS(put, StatusCode::kUnavailable);
  EXPECT_EQ(store->stats().requests, 6u);
  // And it works again once the gateway is back.
  EXPECT_OK(store->Put("down", "x"));
}

}  // namespace
}  // namespace reel::storage
