#include "parallel/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

namespace reel::parallel {

Result<std::string> InterfaceAddress(const std::string& interface_name) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0)
    return InternalError(std::string("getifaddrs: ") + std::strerror(errno));
  std::string found;
  std::set<std::string> names;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    names.insert(it->ifa_name);
    if (found.empty() && interface_name == it->ifa_name) {
      char text[INET_ADDRSTRLEN] = {0};
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr, text,
                sizeof(text));
      found = text;
    }
  }
  freeifaddrs(list);
  if (!found.empty()) return found;
  std::string present;
  for (const auto& n : names) present += (present.empty() ? "" : ", ") + n;
  return NotFoundError("network interface '" + interface_name +
                       "' has no IPv4 address here (interfaces: " + present + ")");
}

std::string DefaultHostAddress() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) return "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (getaddrinfo(host, nullptr, &hints, &result) != 0 || result == nullptr) return "127.0.0.1";
  char text[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(result->ai_addr)->sin_addr, text,
            sizeof(text));
  freeaddrinfo(result);
  return text;
}

Result<std::unique_ptr<ProbeListener>> ProbeListener::Listen(const std::string& host) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return InvalidArgumentError("'" + host + "' is not an IPv4 address");
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return InternalError(std::string("socket: ") + std::strerror(errno));
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 128) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::string error = std::strerror(errno);
    close(fd);
    return UnavailableError("cannot listen on " + host + ": " + error);
  }
  return std::unique_ptr<ProbeListener>(new ProbeListener(fd, ntohs(addr.sin_port)));
}

ProbeListener::ProbeListener(int fd, int port) : fd_(fd), port_(port) {
  thread_ = std::thread([this] { AcceptLoop(); });
}

ProbeListener::~ProbeListener() {
  stop_ = true;
  thread_.join();
  close(fd_);
}

void ProbeListener::AcceptLoop() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    int client = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client >= 0) close(client);
  }
}

Status ProbeConnect(const std::string& host, int port, std::chrono::milliseconds timeout) {
  const std::string where = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &result);
  if (rc != 0 || result == nullptr)
    return UnavailableError("cannot resolve " + host + ": " + gai_strerror(rc));
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    freeaddrinfo(result);
    return InternalError(std::string("socket: ") + std::strerror(errno));
  }
  rc = connect(fd, result->ai_addr, result->ai_addrlen);
  freeaddrinfo(result);
  std::string error;
  if (rc != 0 && errno != EINPROGRESS) {
    error = std::strerror(errno);
  } else if (rc != 0) {
    pollfd p{fd, POLLOUT, 0};
    int ready = poll(&p, 1, static_cast<int>(timeout.count()));
    if (ready == 0) {
      error = "no answer within " + std::to_string(timeout.count()) + " ms";
    } else {
      int so_error = 0;
      socklen_t len = sizeof(so_error);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
      if (so_error != 0) error = std::strerror(so_error);
    }
  }
  close(fd);
  if (!error.empty()) return UnavailableError(where + ": " + error);
  return Status::Ok();
}

}  // namespace reel::parallel
