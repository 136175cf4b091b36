#include "base/hash.h"

#include <openssl/evp.h>
#include <xxhash.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "base/check.h"

namespace reel {
namespace {

std::string Hex64(uint64_t value) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, value);
  return buf;
}

// One-shot EVP digest. An empty result means OpenSSL refused (e.g. MD5 disabled by a FIPS-only
// configuration); callers comparing digests then see a mismatch rather than a crash.
std::string EvpDigest(const EVP_MD* md, std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (md == nullptr || EVP_Digest(data.data(), data.size(), digest, &length, md, nullptr) != 1) {
    return std::string();
  }
  return std::string(reinterpret_cast<const char*>(digest), length);
}

}  // namespace

uint64_t Xxh3_64(std::string_view data) { return XXH3_64bits(data.data(), data.size()); }

std::string Xxh3_128Hex(std::string_view data) {
  // The canonical form is big-endian high half then low half, as xxhsum prints it.
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits(data.data(), data.size()));
  return HexEncode(
      std::string_view(reinterpret_cast<const char*>(canonical.digest), sizeof(canonical.digest)));
}

std::string Md5Raw(std::string_view data) { return EvpDigest(EVP_md5(), data); }
std::string Md5Hex(std::string_view data) { return HexEncode(EvpDigest(EVP_md5(), data)); }
std::string Md5Base64(std::string_view data) { return Base64Encode(EvpDigest(EVP_md5(), data)); }
std::string Sha256Hex(std::string_view data) { return HexEncode(EvpDigest(EVP_sha256(), data)); }
std::string Sha256Raw(std::string_view data) { return EvpDigest(EVP_sha256(), data); }

std::string HexEncode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    out += kDigits[byte >> 4];
    out += kDigits[byte & 0xF];
  }
  return out;
}

std::optional<std::string> HexDecode(std::string_view hex) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    const int hi = digit(hex[2 * i]), lo = digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<char>(hi << 4 | lo);
  }
  return out;
}

std::string Base64Encode(std::string_view bytes) {
  // EVP_EncodeBlock takes an int length, so large inputs go through in chunks; a multiple of 3
  // bytes encodes without padding, which keeps the concatenation equal to one encoding.
  constexpr size_t kChunk = 3 * 1024 * 1024;
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::string buffer(kChunk / 3 * 4 + 1, '\0');  // +1: EVP_EncodeBlock writes a NUL
  for (size_t offset = 0; offset < bytes.size(); offset += kChunk) {
    const size_t n = std::min(kChunk, bytes.size() - offset);
    const int written = EVP_EncodeBlock(
        reinterpret_cast<unsigned char*>(buffer.data()),
        reinterpret_cast<const unsigned char*>(bytes.data() + offset), static_cast<int>(n));
    out.append(buffer.data(), static_cast<size_t>(written));
  }
  return out;
}

struct Hasher::State {
  Kind kind;
  XXH3_state_t* xxh = nullptr;
  EVP_MD_CTX* evp = nullptr;
  bool ok = true;  // false once OpenSSL refused; FinishHex then returns ""
  bool finished = false;
  std::string result;
};

Hasher::Hasher(Kind kind) : state_(std::make_unique<State>()) {
  state_->kind = kind;
  if (kind == Kind::kXxh3_64) {
    state_->xxh = XXH3_createState();
    state_->ok = state_->xxh != nullptr && XXH3_64bits_reset(state_->xxh) == XXH_OK;
    return;
  }
  state_->evp = EVP_MD_CTX_new();
  const EVP_MD* md = kind == Kind::kMd5 ? EVP_md5() : EVP_sha256();
  state_->ok =
      state_->evp != nullptr && md != nullptr && EVP_DigestInit_ex(state_->evp, md, nullptr) == 1;
}

Hasher::~Hasher() {
  if (state_->xxh != nullptr) XXH3_freeState(state_->xxh);
  if (state_->evp != nullptr) EVP_MD_CTX_free(state_->evp);
}

void Hasher::Update(std::string_view data) {
  REEL_CHECK(!state_->finished) << "Hasher::Update after FinishHex";
  if (!state_->ok || state_->finished) return;
  if (state_->xxh != nullptr) {
    state_->ok = XXH3_64bits_update(state_->xxh, data.data(), data.size()) == XXH_OK;
  } else {
    state_->ok = EVP_DigestUpdate(state_->evp, data.data(), data.size()) == 1;
  }
}

std::string Hasher::FinishHex() {
  // A second call returns the same digest: finalising an EVP context twice is undefined.
  if (state_->finished) return state_->result;
  state_->finished = true;
  if (!state_->ok) return state_->result;
  if (state_->xxh != nullptr) {
    state_->result = Hex64(XXH3_64bits_digest(state_->xxh));
  } else {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    if (EVP_DigestFinal_ex(state_->evp, digest, &length) == 1) {
      state_->result = HexEncode(std::string_view(reinterpret_cast<const char*>(digest), length));
    }
  }
  return state_->result;
}

}  // namespace reel
