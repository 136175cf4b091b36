// LocalStore beyond the shared conformance suite (object_store_conformance_test.cc): the root, keys
// that try to leave it, files in the way of keys, temporary files, and atomic replacement under
// concurrent writers in threads and in other processes.
#include "storage/local_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "storage/testing/temp_dir.h"
#include "testing/status_matchers.h"

namespace reel::storage {
namespace {

using testing::FileExists;
using testing::FilesUnder;
using testing::RandomBytes;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

std::unique_ptr<LocalStore> OpenOrDie(const std::string& root, LocalStoreOptions options = {}) {
  auto store = LocalStore::Open(root, options);
  EXPECT_OK(store);
  return std::move(store).value();
}

TEST(LocalStoreTest, UriAndRoot) {
  TempDir dir;
  std::string root = dir.Join("root");
  auto store = OpenOrDie(root);
  EXPECT_EQ(store->uri(), "file://" + root);
  EXPECT_EQ(store->root(), root);
  auto slashes = OpenOrDie(root + "///");
  EXPECT_EQ(slashes->root(), root);
  EXPECT_EQ(slashes->uri(), "file://" + root);

  auto fs_root = OpenOrDie("/");
  EXPECT_EQ(fs_root->uri(), "file:///");
  EXPECT_EQ(fs_root->PathOf("tmp/x"), "/tmp/x");
}

TEST(LocalStoreTest, OpenRefusesBadRoots) {
  TempDir dir;
  EXPECT_STATUS(LocalStore::Open(""), StatusCode::kInvalidArgument);
  EXPECT_STATUS(LocalStore::Open("relative/dir"), StatusCode::kInvalidArgument);

  WriteFile(dir.Join("file"), "x");
  EXPECT_STATUS(LocalStore::Open(dir.Join("file")), StatusCode::kFailedPrecondition);

  LocalStoreOptions no_create;
  no_create.create_root = false;
  EXPECT_STATUS(LocalStore::Open(dir.Join("missing"), no_create), StatusCode::kNotFound);
  EXPECT_FALSE(FileExists(dir.Join("missing")));

  // create_root (the default) makes every missing level.
  auto nested = LocalStore::Open(dir.Join("x/y/z"));
  ASSERT_OK(nested);
  struct stat st;
  ASSERT_EQ(::stat(dir.Join("x/y/z").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
}

TEST(LocalStoreTest, ObjectsAreFilesUnderTheRoot) {
  TempDir dir;
  auto store = OpenOrDie(dir.Join("root"));
  std::string data = RandomBytes(3000, 21);
  ASSERT_OK(store->Put("a/b/c.bin", data));
  EXPECT_EQ(ReadFile(dir.Join("root/a/b/c.bin")), data);

  // A file put there by other means is an object too.
  WriteFile(dir.Join("root/a/outside.txt"), "hello");
  EXPECT_EQ(*store->Get("a/outside.txt"), "hello");
  auto all = ListAll(*store, "a/");
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].key, "a/b/c.bin");
  EXPECT_EQ((*all)[1].key, "a/outside.txt");
  EXPECT_EQ((*all)[1].size, 5u);
}

TEST(LocalStoreTest, KeysThatLeaveTheRootAreRefused) {
  TempDir dir;
  std::string root = dir.Join("root");
  auto store = OpenOrDie(root);
  for (std::string key : {std::string("../x"), std::string("../../x"), std::string("a/../../x"),
                          std::string("/etc/passwd"), std::string("/x"), std::string("a/../x"),
                          std::string(".."), std::string("x\0/../../y", 10)}) {
    SCOPED_TRACE("key '" + key + "'");
    EXPECT_STATUS(store->Put(key, "escaped"), StatusCode::kInvalidArgument);
    EXPECT_STATUS(store->PutIfAbsent(key, "escaped"), StatusCode::kInvalidArgument);
    EXPECT_STATUS(store->OpenWriter(key), StatusCode::kInvalidArgument);
    EXPECT_STATUS(store->Get(key), StatusCode::kInvalidArgument);
    EXPECT_STATUS(store->Head(key), StatusCode::kInvalidArgument);
    EXPECT_STATUS(store->Delete(key), StatusCode::kInvalidArgument);
  }
  // Nothing was written anywhere under the temp dir, inside the root or beside it.
  EXPECT_EQ(FilesUnder(dir.path()), std::vector<std::string>{});
  EXPECT_FALSE(FileExists(dir.Join("x")));
}

TEST(LocalStoreTest, FileInTheWayOfAKey) {
  TempDir dir;
  auto store = OpenOrDie(dir.Join("root"));
  ASSERT_OK(store->Put("a", "file"));
  EXPECT_STATUS(store->Put("a/b", "x"), StatusCode::kFailedPrecondition);
  EXPECT_STATUS(store->Put("a/b/c", "x"), StatusCode::kFailedPrecondition);
  EXPECT_STATUS(store->PutIfAbsent("a/b", "x"), StatusCode::kFailedPrecondition);
  EXPECT_STATUS(store->OpenWriter("a/b"), StatusCode::kFailedPrecondition);
  EXPECT_STATUS(store->Get("a/b"), StatusCode::kNotFound);
  EXPECT_STATUS(store->Head("a/b"), StatusCode::kNotFound);
  EXPECT_STATUS(store->GetRange("a/b", 0, 1), StatusCode::kNotFound);
  EXPECT_OK(store->Delete("a/b"));
  EXPECT_EQ(*store->Get("a"), "file");

  // A key whose name is a directory of other objects holds no object and cannot become one.
  ASSERT_OK(store->Put("d/x", "inside"));
  EXPECT_STATUS(store->Put("d", "x"), StatusCode::kFailedPrecondition);
  EXPECT_STATUS(store->PutIfAbsent("d", "x"), StatusCode::kFailedPrecondition);
  EXPECT_STATUS(store->Get("d"), StatusCode::kNotFound);
  EXPECT_STATUS(store->Head("d"), StatusCode::kNotFound);
  EXPECT_STATUS(store->OpenReader("d"), StatusCode::kNotFound);
  EXPECT_OK(store->Delete("d"));
  EXPECT_EQ(*store->Get("d/x"), "inside");
  EXPECT_EQ(FilesUnder(dir.Join("root")), (std::vector<std::string>{"a", "d/x"}));
}

TEST(LocalStoreTest, TemporaryFilesAreNeverListed) {
  TempDir dir;
  std::string root = dir.Join("root");
  auto store = OpenOrDie(root);
  ASSERT_OK(store->Put("t/real", "1"));
  WriteFile(root + "/.reel-tmp-left-by-a-crash", "stale");
  WriteFile(root + "/t/.reel-tmp-another", "stale");
  auto writer = store->OpenWriter("t/pending");
  ASSERT_OK(writer);
  ASSERT_OK((*writer)->Write("in progress"));
  EXPECT_EQ(FilesUnder(root).size(), 4u);  // the real one, two stale, one being written

  for (std::string delimiter : {"", "/"}) {
    for (std::string prefix : {"", "t/", "t/.reel", "."}) {
      ListOptions options;
      options.prefix = prefix;
      options.delimiter = delimiter;
      auto page = store->List(options);
      ASSERT_OK(page);
      for (const ObjectInfo& info : page->objects) {
        EXPECT_EQ(info.key, "t/real") << "prefix '" << prefix << "'";
      }
    }
  }
  auto all = ListAll(*store, "");
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].key, "t/real");
  ASSERT_OK((*writer)->Close());
  EXPECT_EQ(ListAll(*store, "")->size(), 2u);
}

TEST(LocalStoreTest, ReaderKeepsTheFileItOpened) {
  TempDir dir;
  auto store = OpenOrDie(dir.Join("root"));
  std::string old_data = RandomBytes(200000, 22);
  ASSERT_OK(store->Put("k", old_data));
  auto reader = store->OpenReader("k");
  ASSERT_OK(reader);
  ASSERT_OK(store->Put("k", "new"));
  std::string got;
  char buffer[4096];
  while (true) {
    auto n = (*reader)->Read(buffer, sizeof buffer);
    ASSERT_OK(n);
    if (*n == 0) break;
    got.append(buffer, *n);
  }
  EXPECT_EQ(got, old_data);
  EXPECT_EQ(*store->Get("k"), "new");
}

TEST(LocalStoreTest, ListAllOverMoreThanAThousandFiles) {
  TempDir dir;
  LocalStoreOptions options;
  options.fsync = false;  // 1100 small files; durability is not what this checks
  auto store = OpenOrDie(dir.Join("root"), options);
  std::vector<std::string> keys;
  for (int i = 0; i < 1100; ++i) {
    char key[32];
    std::snprintf(key, sizeof key, "d%d/%04d", i % 3, i);
    keys.push_back(key);
    ASSERT_OK(store->Put(key, ""));
  }
  ASSERT_OK(store->Put("z", ""));
  std::sort(keys.begin(), keys.end());
  auto all = ListAll(*store, "d");
  ASSERT_OK(all);
  std::vector<std::string> got;
  for (const ObjectInfo& info : *all) got.push_back(info.key);
  EXPECT_EQ(got, keys);

  ListOptions groups;
  groups.delimiter = "/";
  auto page = store->List(groups);
  ASSERT_OK(page);
  EXPECT_EQ(page->common_prefixes, (std::vector<std::string>{"d0/", "d1/", "d2/"}));
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].key, "z");
}

// Every read must see one complete payload. Payloads are 1 MiB of one repeated byte, so a torn
// file (parts of two writes, or a short file) is detected.
TEST(LocalStoreTest, ConcurrentWritersInThreadsAndProcessesNeverTear) {
  TempDir dir;
  std::string root = dir.Join("root");
  LocalStoreOptions options;
  options.fsync = false;  // atomicity comes from rename(2); fsync only adds durability
  auto store = OpenOrDie(root, options);
  constexpr size_t kSize = 1 << 20;
  constexpr int kThreads = 4, kProcesses = 3, kRounds = 15;
  auto payload = [](int writer) { return std::string(kSize, static_cast<char>('A' + writer)); };
  const char kInitial = 'A' + kThreads + kProcesses;
  ASSERT_OK(store->Put("shared/obj", std::string(kSize, kInitial)));

  // Fork before any thread starts, so the children copy a single-threaded process.
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto child_store = LocalStore::Open(root, options);
      bool ok = child_store.ok();
      const std::string data = payload(kThreads + p);
      for (int i = 0; ok && i < kRounds; ++i) ok = (*child_store)->Put("shared/obj", data).ok();
      ::_exit(ok ? 0 : 1);
    }
    children.push_back(pid);
  }

  std::atomic<int> running{kThreads};
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string data = payload(t);
      for (int i = 0; i < kRounds; ++i) {
        if (!store->Put("shared/obj", data).ok()) ++failures;
      }
      --running;
    });
  }

  // On a bad read, remember it and stop reading, but still join and reap the writers.
  std::string bad_read;
  int reads = 0;
  size_t children_left = children.size();
  std::vector<int> exit_codes;
  do {
    if (bad_read.empty()) {
      auto got = store->Get("shared/obj");
      char first = got.ok() && !got->empty() ? got->front() : '\0';
      if (!got.ok()) {
        bad_read = got.status().ToString();
      } else if (got->size() != kSize) {
        bad_read = "a read of " + std::to_string(got->size()) + " bytes: torn file";
      } else if (first < 'A' || first > kInitial) {
        bad_read = "a payload nobody wrote";
      } else if (got->find_first_not_of(first) != std::string::npos) {
        bad_read = "bytes of two writers mixed in one read";
      }
      ++reads;
    }
    for (pid_t& pid : children) {
      int status = 0;
      if (pid > 0 && ::waitpid(pid, &status, WNOHANG) == pid) {
        exit_codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128);
        pid = -1;
        --children_left;
      }
    }
  } while (running.load() > 0 || children_left > 0);
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(bad_read, "") << "after " << reads << " reads";
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(exit_codes, std::vector<int>(kProcesses, 0));
  EXPECT_GT(reads, 0);
  // The last write wins whole, and no temporary file is left behind.
  auto last = store->Get("shared/obj");
  ASSERT_OK(last);
  EXPECT_EQ(last->find_first_not_of(last->front()), std::string::npos);
  EXPECT_EQ(FilesUnder(root), std::vector<std::string>{"shared/obj"});
}

TEST(LocalStoreTest, DurablePutsFromThreadsLeaveOneWholeObject) {
  TempDir dir;
  auto store = OpenOrDie(dir.Join("root"));  // fsync on: the default path
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) {
        EXPECT_OK(store->Put("k", std::string(65536, static_cast<char>('a' + t))));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  auto got = store->Get("k");
  ASSERT_OK(got);
  EXPECT_EQ(got->size(), 65536u);
  EXPECT_EQ(got->find_first_not_of(got->front()), std::string::npos);
  EXPECT_EQ(FilesUnder(dir.Join("root")), std::vector<std::string>{"k"});
}

// A batch's objects appear only at Commit, each whole, and a batch dropped before it leaves
// nothing behind, not even its temp files.
TEST(LocalStoreTest, BatchShowsItsObjectsAtCommitAndDroppedLeavesNothing) {
  TempDir dir;
  auto store = OpenOrDie(dir.Join("root"));
  ASSERT_OK(store->Put("kept", "before"));
  {
    std::unique_ptr<PutBatch> dropped = store->NewBatch();
    ASSERT_OK(dropped->Put("kept", "replaced, never committed"));
    ASSERT_OK(dropped->Put("a/new", RandomBytes(100000, 4)));
    EXPECT_STATUS(store->Get("a/new"), StatusCode::kNotFound);
  }
  EXPECT_EQ(*store->Get("kept"), "before");
  EXPECT_EQ(FilesUnder(dir.Join("root")), std::vector<std::string>{"kept"});

  std::unique_ptr<PutBatch> batch = store->NewBatch();
  ASSERT_OK(batch->Put("kept", "after"));
  ASSERT_OK(batch->Put("a/new", "new"));
  EXPECT_EQ(*store->Get("kept"), "before");
  EXPECT_STATUS(store->Get("a/new"), StatusCode::kNotFound);
  ASSERT_OK(batch->Commit());
  EXPECT_EQ(*store->Get("kept"), "after");
  EXPECT_EQ(*store->Get("a/new"), "new");
  EXPECT_EQ(FilesUnder(dir.Join("root")), (std::vector<std::string>{"a/new", "kept"}));
}

TEST(LocalStoreTest, BatchRefusesAKeyUnderAFileAtPut) {
  TempDir dir;
  auto store = OpenOrDie(dir.Join("root"));
  ASSERT_OK(store->Put("file", "x"));
  std::unique_ptr<PutBatch> batch = store->NewBatch();
  EXPECT_STATUS(batch->Put("file/below", "y"), StatusCode::kFailedPrecondition);
  ASSERT_OK(batch->Commit());
  EXPECT_EQ(FilesUnder(dir.Join("root")), std::vector<std::string>{"file"});
}

// Without fsync a batch has nothing to share, and its Puts are the store's, at once.
TEST(LocalStoreTest, BatchWithoutFsyncPutsAtOnce) {
  TempDir dir;
  LocalStoreOptions scratch;
  scratch.fsync = false;
  auto store = OpenOrDie(dir.Join("root"), scratch);
  std::unique_ptr<PutBatch> batch = store->NewBatch();
  ASSERT_OK(batch->Put("k", "v"));
  EXPECT_EQ(*store->Get("k"), "v");
  ASSERT_OK(batch->Commit());
  EXPECT_EQ(*store->Get("k"), "v");
}

}  // namespace
}  // namespace reel::storage
