#include "base/unique_fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>

namespace reel {
namespace {

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(UniqueFdTest, ClosesWhenDestroyedResetOrMovedOver) {
  int raw = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(raw, 0);
  {
    UniqueFd fd(raw);
    EXPECT_TRUE(fd.valid());
    EXPECT_EQ(fd.get(), raw);
  }
  EXPECT_FALSE(IsOpen(raw));

  UniqueFd a(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int first = a.get();
  UniqueFd b(std::move(a));
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_EQ(b.get(), first);
  b = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  EXPECT_FALSE(IsOpen(first)) << "move assignment closes the old descriptor";
  const int second = b.get();
  EXPECT_EQ(b.Close(), 0);
  EXPECT_FALSE(b.valid());
  EXPECT_FALSE(IsOpen(second));
  EXPECT_EQ(b.Close(), 0) << "closing an empty UniqueFd does nothing";

  UniqueFd c(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int kept = c.release();
  EXPECT_FALSE(c.valid());
  EXPECT_TRUE(IsOpen(kept));
  ::close(kept);
}

}  // namespace
}  // namespace reel
