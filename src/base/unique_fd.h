// A file descriptor that closes itself: RAII for open(2)'s results, as std::unique_ptr is for
// new. Movable, not copyable. Close() reports close(2)'s result for writers that must know
// whether their bytes reached the file (NFS reports write errors at close).
#pragma once

#include <unistd.h>

#include <utility>

namespace reel {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  bool valid() const { return fd_ >= 0; }
  int get() const { return fd_; }

  // Gives up ownership: the caller closes the returned descriptor.
  int release() { return std::exchange(fd_, -1); }

  // Closes the current descriptor (if any) and owns `fd`.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

  // Closes now; 0, or -1 with errno set by close(2). The descriptor is gone either way.
  int Close() { return fd_ >= 0 ? ::close(release()) : 0; }

 private:
  int fd_ = -1;
};

}  // namespace reel
