// Content hashes used across Reel: xxh3 for fast integrity checks of local bytes (caches,
// shards), MD5 for S3's Content-MD5 and ETags, SHA-256 for content addressing.
// Thread-safety: free functions are reentrant; a Hasher object is single-threaded.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace reel {

uint64_t Xxh3_64(std::string_view data);
std::string Xxh3_128Hex(std::string_view data);  // 32 lower-case hex digits

std::string Md5Raw(std::string_view data);     // the 16-byte digest
std::string Md5Hex(std::string_view data);     // 32 lower-case hex digits
std::string Md5Base64(std::string_view data);  // as S3's Content-MD5 header wants
std::string Sha256Hex(std::string_view data);  // 64 lower-case hex digits
std::string Sha256Raw(std::string_view data);  // the 32-byte digest

std::string HexEncode(std::string_view bytes);
// The bytes of an even run of hex digits (either case); nullopt for anything else.
std::optional<std::string> HexDecode(std::string_view hex);
std::string Base64Encode(std::string_view bytes);

// Incremental hashing for streams: Update many times, then Finish once.
class Hasher {
 public:
  enum class Kind { kXxh3_64, kMd5, kSha256 };
  explicit Hasher(Kind kind);
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  void Update(std::string_view data);
  std::string FinishHex();  // xxh3_64 as 16 hex digits

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace reel
