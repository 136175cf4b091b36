// What both binaries' mains share (commands.h).
#include "apps/reel/commands.h"

#include <cstdlib>

namespace reel::cli {

const TorchCommand* FindTorchCommand(std::string_view name) {
  for (const TorchCommand& command : kTorchCommands) {
    if (name == command.name) return &command;
  }
  return nullptr;
}

const TorchCommand& TorchCommandNamed(std::string_view name) {
  if (const TorchCommand* command = FindTorchCommand(name)) return *command;
  std::fprintf(stderr, "reel: bug: '%.*s' is not one of kTorchCommands\n",
               static_cast<int>(name.size()), name.data());
  std::abort();
}

std::string_view SubcommandOf(int argc, char** argv) {
  int i = 1;
  while (i < argc && argv[i][0] == '-') i += std::string_view(argv[i]) == "--log-level" ? 2 : 1;
  return i < argc ? std::string_view(argv[i]) : std::string_view();
}

}  // namespace reel::cli
