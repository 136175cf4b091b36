#include "dataset/frames_codec.h"

#include <cstring>
#include <limits>

#include "base/zstd.h"

namespace reel::dataset {
namespace {

void PutU16(char* p, uint16_t v) {
  p[0] = static_cast<char>(v & 0xff);
  p[1] = static_cast<char>(v >> 8);
}
void PutU32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint16_t GetU16(const char* p) {
  return static_cast<uint16_t>(static_cast<unsigned char>(p[0]) |
                               (static_cast<unsigned char>(p[1]) << 8));
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// T*H*W*C, or false on overflow.
bool PixelBytes(const FramesHeader& h, uint64_t* out) {
  uint64_t total = 1;
  for (uint64_t d :
       {uint64_t{h.frames}, uint64_t{h.height}, uint64_t{h.width}, uint64_t{h.channels}}) {
    if (d != 0 && total > std::numeric_limits<uint64_t>::max() / d) return false;
    total *= d;
  }
  *out = total;
  return true;
}

std::string Dims(const FramesHeader& h) {
  return std::to_string(h.frames) + "x" + std::to_string(h.height) + "x" + std::to_string(h.width) +
         "x" + std::to_string(h.channels);
}

Status CheckHeader(const FramesHeader& h) {
  if (h.frames == 0 || h.height == 0 || h.width == 0 || h.channels == 0) {
    return InvalidArgumentError("frames payload needs T, H, W, C >= 1, got " + Dims(h));
  }
  switch (h.format) {
    case FramesPixelFormat::kRaw:
      break;
    case FramesPixelFormat::kRgb24:
      if (h.channels != 3) return InvalidArgumentError("RGB24 frames need C == 3, got " + Dims(h));
      break;
    case FramesPixelFormat::kGray8:
      if (h.channels != 1) return InvalidArgumentError("GRAY8 frames need C == 1, got " + Dims(h));
      break;
    default:
      return InvalidArgumentError("unknown frames pixel format " +
                                  std::to_string(static_cast<int>(h.format)));
  }
  uint64_t bytes = 0;
  if (!PixelBytes(h, &bytes))
    return InvalidArgumentError("frames payload " + Dims(h) + " overflows");
  return Status::Ok();
}

}  // namespace

Result<std::string> EncodeFrames(const FramesHeader& header, std::string_view pixels,
                                 const FramesCodecOptions& options) {
  REEL_RETURN_IF_ERROR(CheckHeader(header));
  uint64_t expected = 0;
  PixelBytes(header, &expected);
  if (pixels.size() != expected) {
    return InvalidArgumentError("frames " + Dims(header) + " need " + std::to_string(expected) +
                                " pixel bytes, got " + std::to_string(pixels.size()));
  }
  std::string out(kFramesHeaderBytes, '\0');
  std::memcpy(out.data(), kFramesMagic.data(), 4);
  PutU16(out.data() + 4, kFramesVersion);
  PutU16(out.data() + 6, static_cast<uint16_t>(kFramesHeaderBytes));
  PutU32(out.data() + 8, header.frames);
  PutU32(out.data() + 12, header.height);
  PutU32(out.data() + 16, header.width);
  PutU32(out.data() + 20, header.channels);
  out[24] = static_cast<char>(header.format);

  REEL_RETURN_IF_ERROR(ZstdCompressAppend(pixels, ZstdOptions{options.level}, &out));
  return out;
}

Result<std::string> EncodeFrames(const std::vector<media::Frame>& frames,
                                 const FramesCodecOptions& options) {
  if (frames.empty()) return InvalidArgumentError("no frames to encode");
  const media::Frame& first = frames.front();
  FramesHeader header;
  switch (first.format) {
    case media::PixelFormat::kRgb24:
      header.format = FramesPixelFormat::kRgb24;
      header.channels = 3;
      break;
    case media::PixelFormat::kGray8:
      header.format = FramesPixelFormat::kGray8;
      header.channels = 1;
      break;
    default:
      return InvalidArgumentError("frames payloads hold RGB24 or GRAY8 frames, not YUV420P");
  }
  if (first.width <= 0 || first.height <= 0) {
    return InvalidArgumentError("frame size " + std::to_string(first.width) + "x" +
                                std::to_string(first.height) + " is empty");
  }
  if (frames.size() > std::numeric_limits<uint32_t>::max()) {
    return InvalidArgumentError("too many frames");
  }
  header.frames = static_cast<uint32_t>(frames.size());
  header.width = static_cast<uint32_t>(first.width);
  header.height = static_cast<uint32_t>(first.height);
  const size_t frame_bytes = media::Frame::ByteSize(first.width, first.height, first.format);
  std::string pixels;
  pixels.reserve(frame_bytes * frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    const media::Frame& f = frames[i];
    if (f.width != first.width || f.height != first.height || f.format != first.format) {
      return InvalidArgumentError("frame " + std::to_string(i) +
                                  " differs in size or format from "
                                  "frame 0");
    }
    if (f.data.size() != frame_bytes) {
      return InvalidArgumentError("frame " + std::to_string(i) + " holds " +
                                  std::to_string(f.data.size()) + " bytes, its size needs " +
                                  std::to_string(frame_bytes));
    }
    pixels.append(reinterpret_cast<const char*>(f.data.data()), f.data.size());
  }
  return EncodeFrames(header, pixels, options);
}

Result<FramesHeader> ReadFramesHeader(std::string_view payload) {
  if (payload.size() < kFramesHeaderBytes) {
    return DataLossError("frames payload of " + std::to_string(payload.size()) +
                         " bytes is shorter than its " + std::to_string(kFramesHeaderBytes) +
                         "-byte header");
  }
  const char* p = payload.data();
  if (std::memcmp(p, kFramesMagic.data(), 4) != 0) {
    return DataLossError("frames payload does not start with the magic \"RLFZ\"");
  }
  const uint16_t version = GetU16(p + 4);
  if (version == 0) return DataLossError("frames payload has version 0");
  if (version > kFramesVersion) {
    return FailedPreconditionError("frames payload version " + std::to_string(version) +
                                   " is newer than this build reads (" +
                                   std::to_string(kFramesVersion) + ")");
  }
  const uint16_t header_bytes = GetU16(p + 6);
  if (header_bytes != kFramesHeaderBytes) {
    return DataLossError("frames payload header size is " + std::to_string(header_bytes) +
                         ", version 1 has " + std::to_string(kFramesHeaderBytes));
  }
  FramesHeader h;
  h.frames = GetU32(p + 8);
  h.height = GetU32(p + 12);
  h.width = GetU32(p + 16);
  h.channels = GetU32(p + 20);
  h.format = static_cast<FramesPixelFormat>(static_cast<uint8_t>(p[24]));
  Status valid = CheckHeader(h);
  if (!valid.ok()) return DataLossError("corrupt frames payload header: " + valid.message());
  return h;
}

Result<DecodedFrames> DecodeFrames(std::string_view payload, const FramesDecodeOptions& options) {
  REEL_ASSIGN_OR_RETURN(FramesHeader header, ReadFramesHeader(payload));
  uint64_t expected = 0;
  PixelBytes(header, &expected);
  if (expected > options.max_pixel_bytes) {
    return ResourceExhaustedError("frames payload " + Dims(header) + " decodes to " +
                                  std::to_string(expected) + " bytes, over the limit of " +
                                  std::to_string(options.max_pixel_bytes));
  }
  std::string_view body = payload.substr(kFramesHeaderBytes);
  REEL_ASSIGN_OR_RETURN(uint64_t content, ZstdContentSize(body, "frames payload"));
  if (content != expected) {
    return DataLossError("frames payload " + Dims(header) + " needs " + std::to_string(expected) +
                         " bytes, its zstd frame holds " + std::to_string(content));
  }
  DecodedFrames out;
  out.header = header;
  REEL_ASSIGN_OR_RETURN(out.pixels, ZstdDecompress(body, expected, "frames payload"));
  return out;
}

Result<std::vector<media::Frame>> DecodeFramesToFrames(std::string_view payload,
                                                       const FramesDecodeOptions& options) {
  REEL_ASSIGN_OR_RETURN(FramesHeader header, ReadFramesHeader(payload));
  media::PixelFormat format;
  if (header.format == FramesPixelFormat::kRgb24) {
    format = media::PixelFormat::kRgb24;
  } else if (header.format == FramesPixelFormat::kGray8) {
    format = media::PixelFormat::kGray8;
  } else {
    return InvalidArgumentError("raw frames payload (C = " + std::to_string(header.channels) +
                                ") has no media::Frame pixel format; use DecodeFrames");
  }
  if (header.width > static_cast<uint32_t>(std::numeric_limits<int>::max()) ||
      header.height > static_cast<uint32_t>(std::numeric_limits<int>::max())) {
    return DataLossError("frames payload " + Dims(header) + " is too large for media::Frame");
  }
  REEL_ASSIGN_OR_RETURN(DecodedFrames decoded, DecodeFrames(payload, options));
  const int width = static_cast<int>(header.width), height = static_cast<int>(header.height);
  const size_t frame_bytes = media::Frame::ByteSize(width, height, format);
  std::vector<media::Frame> frames;
  frames.reserve(header.frames);
  for (uint32_t t = 0; t < header.frames; ++t) {
    media::Frame f;
    f.width = width;
    f.height = height;
    f.format = format;
    const auto* begin = reinterpret_cast<const uint8_t*>(decoded.pixels.data()) + t * frame_bytes;
    f.data.assign(begin, begin + frame_bytes);
    frames.push_back(std::move(f));
  }
  return frames;
}

}  // namespace reel::dataset
