#include "media/input.h"

#include <utility>

namespace reel::media {

Input Input::File(std::string path) {
  Input input;
  input.is_file_ = true;
  input.name_ = std::move(path);
  return input;
}

Input Input::Memory(std::shared_ptr<const std::string> bytes, std::string name) {
  Input input;
  input.name_ = std::move(name);
  if (bytes) input.bytes_ = *bytes;
  input.owner_ = std::move(bytes);
  return input;
}

Input Input::Memory(std::string bytes, std::string name) {
  return Memory(std::make_shared<const std::string>(std::move(bytes)), std::move(name));
}

Input Input::View(std::string_view bytes, std::string name) {
  Input input;
  input.name_ = std::move(name);
  input.bytes_ = bytes;
  return input;
}

}  // namespace reel::media
