// Bearer tokens (RFC 6750): reading them from a request, storing only their SHA-256, and
// comparing in constant time so that a server's answer time does not leak how much of a guess
// was right.
//
// Thread-safety: pure functions; the hook BearerAuth returns holds immutable state.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "http/message.h"

namespace reel::http {

// The token of an `Authorization: Bearer <token>` header (scheme case-insensitive), or nullopt
// when the header is absent, has another scheme, or an empty token.
std::optional<std::string> BearerToken(const Request& request);

// What a server stores instead of the token: SHA-256, 64 lower-case hex digits.
std::string HashToken(std::string_view token);

// True when the strings are equal; the time taken depends on their lengths only.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// True when `token` hashes to `stored_hash` (as HashToken gives), compared in constant time.
bool TokenMatchesHash(std::string_view token, std::string_view stored_hash);

// An auth hook (ServerOptions::auth) accepting requests whose bearer token hashes to one of
// `token_hashes`. A missing or wrong token is UnauthenticatedError (401), never a hint which.
std::function<Status(const Request&)> BearerAuth(std::vector<std::string> token_hashes);

}  // namespace reel::http
