// What the Beast adapters (client.cc; server.cc and session.cc) all need: the names they use
// for Asio and Beast, and three helpers. Private to http/.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <chrono>
#include <string>

#include "http/message.h"

namespace reel::http::internal {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using BeastRequest = bhttp::request<bhttp::string_body>;
using BeastResponse = bhttp::response<bhttp::string_body>;

inline std::string Str(boost::beast::string_view s) { return std::string(s.data(), s.size()); }

// A malformed message (Beast's parse errors), as opposed to a failed read or write.
inline bool IsParseError(const boost::beast::error_code& ec) {
  return &ec.category() == &bhttp::make_error_code(bhttp::error::bad_target).category();
}

// A Beast message's header fields; a repeated field's values joined by ", " (RFC 9110 5.3).
template <class Message>
Headers HeadersOf(const Message& message) {
  Headers headers;
  for (const auto& field : message) {
    auto [it, inserted] = headers.emplace(Str(field.name_string()), Str(field.value()));
    if (!inserted) it->second += ", " + Str(field.value());
  }
  return headers;
}

}  // namespace reel::http::internal
