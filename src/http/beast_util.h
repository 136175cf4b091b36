// What the Beast adapters (client.cc; server.cc and session.cc) all need: the names they use
// for Asio and Beast, and three helpers. Private to http/.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <chrono>
#include <cstdint>
#include <string>

#include "http/message.h"

namespace reel::http::internal {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// Beast's string_body, except that a body being read is appended to as it arrives, into room for
// its length and kBodyReadAhead bytes more. Beast's own reader grows the string with resize(),
// which zeroes the new bytes, and then copies over them: a second pass over every body read (1.6
// MB for a JSON clip), on new memory the first.
struct AppendingStringBody : bhttp::string_body {
  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(bhttp::header<isRequest, Fields>& /*header*/, value_type& body) : body_(body) {}

    void init(const boost::optional<std::uint64_t>& length, beast::error_code& ec) {
      ec = {};
      if (!length) return;
      if (*length > body_.max_size() - kBodyReadAhead) {
        ec = bhttp::error::buffer_overflow;
        return;
      }
      body_.reserve(static_cast<size_t>(*length) + kBodyReadAhead);
    }

    template <class ConstBufferSequence>
    size_t put(const ConstBufferSequence& buffers, beast::error_code& ec) {
      ec = {};
      size_t added = 0;
      for (const auto buffer : beast::buffers_range_ref(buffers)) {
        if (buffer.size() > body_.max_size() - body_.size()) {
          ec = bhttp::error::buffer_overflow;
          return added;
        }
        body_.append(static_cast<const char*>(buffer.data()), buffer.size());
        added += buffer.size();
      }
      return added;
    }

    void finish(beast::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

using BeastRequest = bhttp::request<AppendingStringBody>;
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
