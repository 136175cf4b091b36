// Where a video's bytes come from: a file on a local or shared file system, or bytes in memory
// (a video fetched whole from an ObjectStore: ingest reads raw videos from S3 and decodes them
// without touching a disk). Probe and VideoDecoder take an Input.
//
// Memory inputs are read through a custom AVIOContext with read and seek over the bytes, so every
// container FFmpeg can demux from a file (MP4 with the moov atom at the end included) works the
// same from memory.
//
// Ownership: Input::Memory shares ownership of the bytes; every decoder opened from the Input keeps
// them alive, so the caller may drop its reference at once. Input::View does not own the bytes: the
// caller keeps them alive and unchanged until every decoder opened from the Input is destroyed.
//
// Thread-safety: an Input is an immutable value; copies may be used from any thread, and several
// decoders may read the same memory concurrently.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace reel::media {

class Input {
 public:
  // A file path (opened by FFmpeg's "file" protocol when a decoder opens).
  static Input File(std::string path);
  // Bytes in memory, shared. `name` appears in error messages and helps FFmpeg guess the
  // container from its extension (pass the object key, e.g. "raw/clip.mkv").
  static Input Memory(std::shared_ptr<const std::string> bytes, std::string name = "memory");
  static Input Memory(std::string bytes, std::string name = "memory");
  // Bytes in memory owned by the caller (see Ownership above).
  static Input View(std::string_view bytes, std::string name = "memory");

  bool is_file() const { return is_file_; }
  // The path for files, the given name for memory inputs; used in every error message.
  const std::string& name() const { return name_; }
  // The bytes of a memory input (empty for files).
  std::string_view bytes() const { return bytes_; }

 private:
  Input() = default;

  bool is_file_ = false;
  std::string name_;
  std::string_view bytes_;
  std::shared_ptr<const void> owner_;  // keeps Memory bytes alive; null for File and View
};

}  // namespace reel::media
