// The Beast adapter of server.h, the listener and the server's lifecycle: Boost's exceptions
// and error codes stop here. session.cc serves the connections.
//
// Shutdown asks every session to drain: an idle one closes at once, a busy one closes after
// the answer in flight.
#include "http/server.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>

#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/logging.h"
#include "base/sync_point.h"
#include "http/session.h"

namespace reel::http {
namespace {

using namespace internal;  // the Beast names (beast_util.h) and the sessions (session.h)

// How often a Shutdown past its deadline says again which handlers it still waits for.
constexpr std::chrono::seconds kStuckReport(10);

// Past Shutdown's deadline only handlers still running keep the io threads from returning. They
// cannot be interrupted, and returning while one runs would free the router and the io context
// under it (and let the caller free what it uses), so Shutdown waits for them, but logs which
// ones, again every kStuckReport, instead of hanging silently.
void AwaitHandlers(Shared& shared, const std::string& address) {
  std::unique_lock<std::mutex> lock(shared.mu);
  auto none = [&] { return shared.running.empty(); };
  if (none()) return;
  do {
    const auto now = Clock::now();
    for (const auto& [id, running] : shared.running) {
      const auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(now - running.since).count();
      Logger("http")->warn(
          "http server {}: Shutdown waits for a handler, which cannot be interrupted: {} "
          "(running for {} ms)",
          address, running.what, ms);
    }
    lock.unlock();
    REEL_SYNC_POINT("Server::Shutdown:AwaitingHandlers");
    lock.lock();
  } while (!shared.changed.wait_for(lock, kStuckReport, none));
}

}  // namespace

struct Server::Impl {
  explicit Impl(std::shared_ptr<Shared> s)
      : io(s->options.threads),
        work(asio::make_work_guard(io)),
        acceptor(asio::make_strand(io)),
        retry(acceptor.get_executor()),
        shared(std::move(s)) {
    if (shared->options.handler_threads > 0) {
      handlers.emplace(static_cast<size_t>(shared->options.handler_threads));
      shared->handlers = &*handlers;
    }
  }

  Status Listen();
  void Accept();
  void OnAccept(const beast::error_code& ec, tcp::socket socket);

  asio::io_context io;  // first, so that it is destroyed last
  // Handlers' threads (handler_threads > 0); destroyed before the io context their sessions use.
  std::optional<asio::thread_pool> handlers;
  // Keeps the io threads in run() until Shutdown stops them. Without it run() returns as soon as
  // nothing is pending, which happens in Shutdown once the acceptor is closed and the last
  // connection's peer has closed it: what Shutdown posts next (a drain) would then never run,
  // and the connection it holds would count as busy until the deadline.
  asio::executor_work_guard<asio::io_context::executor_type> work;
  tcp::acceptor acceptor;
  asio::steady_timer retry;  // after a failed accept (out of descriptors)
  std::shared_ptr<Shared> shared;
  std::vector<std::thread> threads;
  std::string address;
  int port = 0;
  std::mutex shutdown_mu;
  bool shut_down = false;  // guarded by shutdown_mu
};

Status Server::Impl::Listen() {
  const ServerOptions& o = shared->options;
  beast::error_code ec;
  tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(o.host, std::to_string(o.port),
                                    tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) {
    return InvalidArgumentError("http server: cannot resolve host '" + o.host +
                                "': " + ec.message());
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  const std::string where = "http server: listening on " + EndpointText(endpoint);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    // A port in use is a service that cannot come up now, as a refused connection is.
    if (ec == asio::error::address_in_use) return UnavailableError(where + ": " + ec.message());
    return ErrnoToStatus(ec.value(), where);
  }
  const tcp::endpoint local = acceptor.local_endpoint(ec);
  if (ec) return ErrnoToStatus(ec.value(), where);
  port = local.port();
  address = EndpointText(local);
  return Status::Ok();
}

void Server::Impl::Accept() {
  acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
    OnAccept(ec, std::move(socket));
  });
}

void Server::Impl::OnAccept(const beast::error_code& ec, tcp::socket socket) {
  if (!acceptor.is_open() || ec == asio::error::operation_aborted) return;
  if (ec) {
    // Out of file descriptors, typically: wait a little instead of spinning on the error.
    Logger("http")->warn("{}: accept failed: {}", address, ec.message());
    retry.expires_after(std::chrono::milliseconds(50));
    retry.async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec && acceptor.is_open()) Accept();
    });
    return;
  }
  shared->accepted++;
  std::make_shared<Session>(std::move(socket), shared)->Start();
  Accept();
}

Result<std::unique_ptr<Server>> Server::Start(ServerOptions options, Router router) {
  if (options.threads < 1) return InvalidArgumentError("http server: threads must be at least 1");
  if (options.handler_threads < 0) {
    return InvalidArgumentError("http server: handler_threads must not be negative");
  }
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgumentError("http server: port " + std::to_string(options.port));
  }
  if (options.idle_timeout.count() <= 0 || options.read_timeout.count() <= 0 ||
      options.write_timeout.count() <= 0 || options.max_header_bytes == 0) {
    return InvalidArgumentError("http server: timeouts and the header limit must be positive");
  }
  auto impl =
      std::make_unique<Impl>(std::make_shared<Shared>(std::move(options), std::move(router)));
  try {
    REEL_RETURN_IF_ERROR(impl->Listen());
    impl->Accept();
    for (int i = 0; i < impl->shared->options.threads; ++i) {
      impl->threads.emplace_back([io = &impl->io] {
        for (;;) {
          try {
            io->run();
            return;
          } catch (const std::exception& e) {  // a bug in a completion handler: keep serving
            Logger("http")->error("http server: io thread: {}", e.what());
          }
        }
      });
    }
  } catch (const std::exception& e) {  // std::system_error from thread creation, bad_alloc
    Server failed(std::move(impl));    // stops what did start
    return InternalError(std::string("http server: ") + e.what());
  }
  Logger("http")->info("http server listening on {}", impl->address);
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  if (impl_) Shutdown();
}

int Server::port() const { return impl_->port; }
std::string Server::address() const { return impl_->address; }
std::string Server::url() const { return "http://" + impl_->address; }

ServerStats Server::stats() const {
  ServerStats stats;
  stats.connections_accepted = impl_->shared->accepted;
  stats.requests = impl_->shared->requests;
  stats.draining = impl_->shared->draining;
  std::lock_guard<std::mutex> lock(impl_->shared->mu);
  stats.open_connections = impl_->shared->sessions.size();
  return stats;
}

void Server::Shutdown(std::chrono::milliseconds deadline) {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> once(s.shutdown_mu);
  for (const std::thread& thread : s.threads) {
    REEL_CHECK(thread.get_id() != std::this_thread::get_id())
        << "Server::Shutdown from a handler would wait for itself";
  }
  REEL_CHECK(!s.handlers || !s.handlers->get_executor().running_in_this_thread())
      << "Server::Shutdown from a handler would wait for itself";
  if (s.shut_down) return;
  s.shut_down = true;
  const auto until = Clock::now() + deadline;
  Shared& shared = *s.shared;
  {
    std::lock_guard<std::mutex> lock(shared.mu);
    shared.draining = true;  // under mu: a session starting now sees it, or is in the list
  }
  asio::post(s.acceptor.get_executor(), [&s] {
    beast::error_code ignored;
    s.acceptor.close(ignored);
    s.retry.cancel();
    REEL_SYNC_POINT("Server::Shutdown:AcceptorClosed");
  });
  {
    // Scoped: holding the sessions past their drain would keep them from ending.
    const std::vector<std::shared_ptr<Session>> live = shared.LiveSessions();
    REEL_SYNC_POINT("Server::Shutdown:DrainingIdle");
    for (const auto& session : live) session->DrainIfIdle();
  }
  bool late = false;
  {
    std::unique_lock<std::mutex> lock(shared.mu);
    if (!shared.changed.wait_until(lock, until, [&] { return shared.sessions.empty(); })) {
      late = true;
      Logger("http")->warn("http server {}: {} connections still busy after {} ms; closing them",
                           s.address, shared.sessions.size(), deadline.count());
    }
  }
  if (late) REEL_SYNC_POINT("Server::Shutdown:PastDeadline");
  s.io.stop();  // each io thread returns as soon as the handler it runs (if any) does
  if (late) AwaitHandlers(shared, s.address);
  for (std::thread& thread : s.threads) thread.join();
  s.threads.clear();
  // Handlers are done (or waited for above): what they posted to the stopped io context is
  // dropped with it.
  if (s.handlers) s.handlers->join();
  // No io thread runs now: what is left is closed from here.
  beast::error_code ignored;
  s.acceptor.close(ignored);
  for (const auto& session : shared.LiveSessions()) session->CloseNow();
  {
    // Closed now, though their objects live until the io context drops the handlers they still
    // had pending: stats() must not count them as open.
    std::lock_guard<std::mutex> lock(shared.mu);
    shared.sessions.clear();
  }
  Logger("http")->info("http server {} stopped", s.address);
}

}  // namespace reel::http