// Small socket helpers for the connectivity check that runs before the process group forms:
// every rank listens on the address its collectives will use, publishes it, and connects to every
// other rank's, so an unreachable peer is an error naming it instead of a hang in the transport.
//
// Errors: NotFound (no such interface, with the list of those present), Unavailable (a peer that
// refuses or does not answer within the timeout, naming host:port and the reason), Internal
// (socket calls that fail for local reasons).
// Thread-safety: ProbeListener owns one accept thread; its methods may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "base/status.h"

namespace reel::parallel {

// The IPv4 address of a network interface ("eth0", "lo").
Result<std::string> InterfaceAddress(const std::string& interface_name);

// The address this host's collectives bind to without a named interface: the first IPv4 address
// the hostname resolves to, or 127.0.0.1 when it does not resolve (Gloo's own rule).
std::string DefaultHostAddress();

// Accepts and immediately closes connections on host:0 until destroyed.
class ProbeListener {
 public:
  static Result<std::unique_ptr<ProbeListener>> Listen(const std::string& host);
  ~ProbeListener();
  int port() const { return port_; }

 private:
  ProbeListener(int fd, int port);
  void AcceptLoop();
  int fd_;
  int port_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Opens and closes one TCP connection to host:port within `timeout`.
Status ProbeConnect(const std::string& host, int port, std::chrono::milliseconds timeout);

}  // namespace reel::parallel
