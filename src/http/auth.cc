#include "http/auth.h"

#include <cctype>
#include <utility>

#include "base/hash.h"

namespace reel::http {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<std::string> BearerToken(const Request& request) {
  const std::string header = request.Header("Authorization");
  std::string_view value = Trim(header);
  size_t space = value.find_first_of(" \t");
  if (space == std::string_view::npos) return std::nullopt;
  if (!EqualsIgnoringCase(value.substr(0, space), "Bearer")) return std::nullopt;
  std::string_view token = Trim(value.substr(space));
  if (token.empty()) return std::nullopt;
  return std::string(token);
}

std::string HashToken(std::string_view token) { return Sha256Hex(token); }

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  // volatile: the compiler may not stop at the first difference.
  volatile unsigned char difference = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    difference = difference | static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return difference == 0;
}

bool TokenMatchesHash(std::string_view token, std::string_view stored_hash) {
  return ConstantTimeEquals(HashToken(token), stored_hash);
}

std::function<Status(const Request&)> BearerAuth(std::vector<std::string> token_hashes) {
  return [hashes = std::move(token_hashes)](const Request& request) -> Status {
    std::optional<std::string> token = BearerToken(request);
    if (!token.has_value()) return UnauthenticatedError("a bearer token is required");
    const std::string hash = HashToken(*token);
    bool match = false;
    for (const std::string& stored : hashes) match |= ConstantTimeEquals(hash, stored);
    if (!match) return UnauthenticatedError("the bearer token is not valid");
    return Status::Ok();
  };
}

}  // namespace reel::http
