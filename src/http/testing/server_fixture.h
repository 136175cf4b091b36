// Test support for src/http's tests: a fixture that starts real servers on 127.0.0.1 port 0
// (and stops every one it started), and a bare TCP connection for what the Client does not do
// (pipelining, Expect: 100-continue, hand-written requests). Tests only.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/unique_fd.h"
#include "http/http.h"

namespace reel::http::testing {

class ServerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (auto& server : servers_) server->Shutdown();
  }

  Server& StartServer(Router router, ServerOptions options = {}) {
    Result<std::unique_ptr<Server>> server = Server::Start(std::move(options), std::move(router));
    REEL_CHECK(server.ok()) << server.status().ToString();
    servers_.push_back(std::move(server).value());
    return *servers_.back();
  }

  static Client MakeClient(const Server& server, ClientOptions options = {}) {
    Result<Client> client = Client::Make(server.url(), std::move(options));
    REEL_CHECK(client.ok()) << client.status().ToString();
    return std::move(client).value();
  }

 private:
  std::vector<std::unique_ptr<Server>> servers_;
};

class RawConnection {
 public:
  explicit RawConnection(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    REEL_CHECK(fd_.valid());
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REEL_CHECK(::connect(fd_.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  }

  void Write(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
      REEL_CHECK(n > 0) << "send failed";
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }

  // Everything read until `needle` arrived, the server closed, or 10 s passed (a failing test
  // then sees what did arrive). An empty needle reads to the end.
  std::string ReadUntil(std::string_view needle = {}) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (needle.empty() || read_.find(needle) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{fd_.get(), POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char chunk[4096];
      ssize_t n = ::recv(fd_.get(), chunk, sizeof(chunk), 0);
      if (n <= 0) break;
      read_.append(chunk, static_cast<size_t>(n));
    }
    return read_;
  }

 private:
  UniqueFd fd_;
  std::string read_;
};

}  // namespace reel::http::testing
