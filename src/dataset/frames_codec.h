// The payload of a frames-mode sample, "<key>.frames.zst": a clip's decoded frames as uint8
// pixels in T x H x W x C order (frames, rows, columns, channels; rows without padding), behind a
// fixed 32-byte little-endian header and compressed as one zstd frame:
//
//   offset size  field
//        0    4  magic "RLFZ"
//        4    2  version (1)
//        6    2  header size in bytes (32); a reader skips to this offset
//        8    4  T  frames        (>= 1)
//       12    4  H  height        (>= 1)
//       16    4  W  width         (>= 1)
//       20    4  C  channels      (>= 1)
//       24    1  pixel format: 0 = raw (C channels of unknown meaning), 1 = RGB24 (C == 3),
//                2 = GRAY8 (C == 1)
//       25    7  reserved, zero
//       32       one zstd frame whose content size is T*H*W*C bytes (written in its header)
//
// In Python: `t,h,w,c = struct.unpack_from("<4I", b, 8); x = np.frombuffer(
// zstandard.ZstdDecompressor().decompress(b[32:]), np.uint8).reshape(t, h, w, c)`.
//
// Errors: encoding returns InvalidArgument for inconsistent sizes or formats. Decoding returns
// DataLoss for anything that does not match the layout above (bad magic, a truncated or corrupt
// zstd frame, a content size other than T*H*W*C, trailing bytes), FailedPrecondition for a newer
// version, and ResourceExhausted when T*H*W*C exceeds the caller's limit.
// Thread-safety: free functions, reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "media/frame.h"

namespace reel::dataset {

inline constexpr std::string_view kFramesMagic = "RLFZ";
inline constexpr uint16_t kFramesVersion = 1;
inline constexpr size_t kFramesHeaderBytes = 32;

enum class FramesPixelFormat : uint8_t { kRaw = 0, kRgb24 = 1, kGray8 = 2 };

struct FramesHeader {
  uint32_t frames = 0;    // T
  uint32_t height = 0;    // H
  uint32_t width = 0;     // W
  uint32_t channels = 0;  // C
  FramesPixelFormat format = FramesPixelFormat::kRaw;

  uint64_t pixel_bytes() const {
    return uint64_t{frames} * height * width * channels;  // callers check for overflow first
  }
};

struct FramesCodecOptions {
  int level = 3;  // zstd level, 1 (fast) .. 19 (small); negative values are zstd's fast modes
};

struct FramesDecodeOptions {
  uint64_t max_pixel_bytes = 4ull << 30;  // refuse (ResourceExhausted) larger clips
};

// Encodes T*H*W*C bytes of pixels. Errors: InvalidArgument when a dimension is 0, the pixel count
// does not match the header, or the format contradicts C; Internal when zstd fails.
Result<std::string> EncodeFrames(const FramesHeader& header, std::string_view pixels,
                                 const FramesCodecOptions& options = {});

// Encodes equally sized RGB24 or GRAY8 frames (YUV420P has no T x H x W x C layout and is refused
// with InvalidArgument, as are empty input and mixed sizes or formats).
Result<std::string> EncodeFrames(const std::vector<media::Frame>& frames,
                                 const FramesCodecOptions& options = {});

// Parses and validates only the header. Errors: DataLoss, FailedPrecondition.
Result<FramesHeader> ReadFramesHeader(std::string_view payload);

struct DecodedFrames {
  FramesHeader header;
  std::string pixels;  // header.pixel_bytes() bytes, T x H x W x C
};

Result<DecodedFrames> DecodeFrames(std::string_view payload,
                                   const FramesDecodeOptions& options = {});

// Decodes into media::Frame values (RGB24 or GRAY8 payloads only; raw ones give
// InvalidArgument). Frames get index -1 and timestamp 0: positions within the source video are in
// the sample's metadata.
Result<std::vector<media::Frame>> DecodeFramesToFrames(std::string_view payload,
                                                       const FramesDecodeOptions& options = {});

}  // namespace reel::dataset
