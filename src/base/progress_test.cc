#include "base/progress.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace reel {
namespace {

TEST(ProgressTest, FormatBytes) {
  EXPECT_EQ(Progress::FormatBytes(0), "0 B");
  EXPECT_EQ(Progress::FormatBytes(17), "17 B");
  EXPECT_EQ(Progress::FormatBytes(1023), "1023 B");
  EXPECT_EQ(Progress::FormatBytes(1024), "1.0 KiB");
  EXPECT_EQ(Progress::FormatBytes(12 * 1024), "12.0 KiB");
  EXPECT_EQ(Progress::FormatBytes(1.5 * 1024 * 1024), "1.5 MiB");
  EXPECT_EQ(Progress::FormatBytes(266.0 * 1024 * 1024), "266.0 MiB");
  EXPECT_EQ(Progress::FormatBytes(3.25 * 1024 * 1024 * 1024), "3.2 GiB");
  EXPECT_EQ(Progress::FormatBytes(2.0 * 1024 * 1024 * 1024 * 1024), "2.0 TiB");
}

TEST(ProgressTest, FormatBytesNeverShows1024OfAUnit) {
  EXPECT_EQ(Progress::FormatBytes(1024.0 * 1024 - 1), "1.0 MiB");
  EXPECT_EQ(Progress::FormatBytes(1024.0 * 1023.9), "1023.9 KiB");
}

TEST(ProgressTest, FormatBytesOfNonsenseIsZero) {
  EXPECT_EQ(Progress::FormatBytes(-5), "0 B");
  EXPECT_EQ(Progress::FormatBytes(0.0 / 0.0), "0 B");
}

TEST(ProgressTest, FormatDuration) {
  EXPECT_EQ(Progress::FormatDuration(0), "0:00");
  EXPECT_EQ(Progress::FormatDuration(2), "0:02");
  EXPECT_EQ(Progress::FormatDuration(123), "2:03");
  EXPECT_EQ(Progress::FormatDuration(59.6), "1:00");  // rounded, not truncated
  EXPECT_EQ(Progress::FormatDuration(3599), "59:59");
  EXPECT_EQ(Progress::FormatDuration(3600), "1:00:00");
  EXPECT_EQ(Progress::FormatDuration(3723), "1:02:03");
  EXPECT_EQ(Progress::FormatDuration(100 * 3600 + 5), "100:00:05");
  EXPECT_EQ(Progress::FormatDuration(-3), "0:00");
  EXPECT_EQ(Progress::FormatDuration(0.0 / 0.0), "-:--");
}

TEST(ProgressTest, DisabledIsInvisibleAndStillCounts) {
  Progress progress("upload", 100, Progress::Unit::kBytes, /*enabled=*/false);
  EXPECT_FALSE(progress.visible());
  progress.Add(30);
  progress.Add(12);
  EXPECT_EQ(progress.done(), 42u);
  progress.Finish();
  progress.Finish();  // idempotent
}

TEST(ProgressTest, VisibleOnlyOnATerminal) {
  Progress progress("x", 10);
  EXPECT_EQ(progress.visible(), isatty(STDERR_FILENO) == 1);
}

TEST(ProgressTest, AddFromManyThreads) {
  Progress progress("items", 0, Progress::Unit::kItems, /*enabled=*/false);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&progress] {
      for (int i = 0; i < 10000; ++i) progress.Add(1);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(progress.done(), 40000u);
}

// Points stderr at a pseudo-terminal so the bar draws, and collects what it drew. A reader
// thread empties the pty as it fills: a bar that redraws too often must fail the test, not block
// in write(). Skips where the environment has no ptys.
class PtyStderr {
 public:
  PtyStderr() {
    master_ = posix_openpt(O_RDWR | O_NOCTTY);
    if (master_ < 0 || grantpt(master_) != 0 || unlockpt(master_) != 0) return;
    const char* name = ptsname(master_);
    if (name == nullptr) return;
    slave_ = open(name, O_RDWR | O_NOCTTY);
    if (slave_ < 0) return;
    saved_stderr_ = dup(STDERR_FILENO);
    ok_ = saved_stderr_ >= 0 && dup2(slave_, STDERR_FILENO) >= 0;
    if (ok_) reader_ = std::thread([this] { ReadLoop(); });
  }
  ~PtyStderr() {
    Finish();
    if (slave_ >= 0) close(slave_);
    if (master_ >= 0) close(master_);
  }
  bool ok() const { return ok_; }

  // Puts stderr back and returns everything written (the pty turns "\n" into "\r\n").
  std::string Finish() {
    if (saved_stderr_ >= 0) {
      dup2(saved_stderr_, STDERR_FILENO);
      close(saved_stderr_);
      saved_stderr_ = -1;
    }
    stop_ = true;
    if (reader_.joinable()) reader_.join();
    return out_;
  }

 private:
  // Reads until asked to stop and the pty has been quiet for a poll interval.
  void ReadLoop() {
    char buf[4096];
    while (true) {
      pollfd pfd{master_, POLLIN, 0};
      const int ready = poll(&pfd, 1, 50);
      if (ready < 0 && errno != EINTR) return;
      if (ready <= 0 || !(pfd.revents & POLLIN)) {
        if (stop_) return;
        continue;
      }
      const ssize_t n = read(master_, buf, sizeof(buf));
      if (n <= 0) return;
      out_.append(buf, static_cast<size_t>(n));
    }
  }

  int master_ = -1;
  int slave_ = -1;
  int saved_stderr_ = -1;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::thread reader_;
  std::string out_;  // written by reader_ only until it is joined
};

TEST(ProgressTest, DrawsOnATerminal) {
  PtyStderr pty;
  if (!pty.ok()) GTEST_SKIP() << "no pseudo-terminal available";
  {
    FakeClock clock;
    Progress progress("upload", 2 * 1024 * 1024, Progress::Unit::kBytes, true, &clock);
    EXPECT_TRUE(progress.visible());
    clock.Advance(std::chrono::milliseconds(120));  // past the redraw interval
    progress.Add(1024 * 1024);
    progress.Finish();
    progress.Finish();  // the final line is drawn once
  }
  const std::string out = pty.Finish();
  // The redraw after Add: half done, with a rate and an ETA.
  EXPECT_NE(out.find("\rupload   50% 1.0/2.0 MiB  "), std::string::npos) << out;
  EXPECT_NE(out.find(" MiB/s  ETA "), std::string::npos) << out;
  // The final line ends with the elapsed time and one newline.
  EXPECT_NE(out.find("  in 0:00\x1b[K\r\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("\n"), out.rfind("\n")) << out;
}

TEST(ProgressTest, DrawsItemsWithoutTotal) {
  PtyStderr pty;
  if (!pty.ok()) GTEST_SKIP() << "no pseudo-terminal available";
  {
    Progress progress("files", 0, Progress::Unit::kItems);
    progress.Add(7);
  }  // the destructor finishes
  const std::string out = pty.Finish();
  EXPECT_NE(out.find("\rfiles  7  "), std::string::npos) << out;
  EXPECT_NE(out.find("/s  in 0:00"), std::string::npos) << out;
  EXPECT_EQ(out.find('%'), std::string::npos) << out;  // no percentage without a total
  EXPECT_EQ(out.find("ETA"), std::string::npos) << out;
}

TEST(ProgressTest, DrawsASecondaryCounterWithItsRate) {
  PtyStderr pty;
  if (!pty.ok()) GTEST_SKIP() << "no pseudo-terminal available";
  {
    Progress progress("ingest", 10, Progress::Unit::kItems);
    progress.SetSecondaryName("clips");
    progress.AddSecondary(40);
    progress.Add(2);
  }
  const std::string out = pty.Finish();
  EXPECT_NE(out.find("\ringest   20% 2/10  "), std::string::npos) << out;
  EXPECT_NE(out.find("  40 clips "), std::string::npos) << out;
}

TEST(ProgressTest, RedrawsAreRateLimited) {
  PtyStderr pty;
  if (!pty.ok()) GTEST_SKIP() << "no pseudo-terminal available";
  {
    Progress progress("x", 1000000, Progress::Unit::kItems);
    for (int i = 0; i < 100000; ++i) progress.Add(1);
  }
  const std::string out = pty.Finish();
  size_t draws = 0;
  for (size_t pos = out.find("\rx "); pos != std::string::npos; pos = out.find("\rx ", pos + 1))
    ++draws;
  EXPECT_GE(draws, 1u);   // at least the final line
  EXPECT_LE(draws, 20u);  // not one line per Add
}

}  // namespace
}  // namespace reel
