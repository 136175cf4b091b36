// `reel`: LibTorch's commands handed to `reel-torch` (commands.h says why they live apart).
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "apps/reel/commands.h"
#include "base/subprocess.h"

namespace reel::cli {
namespace {

// reel-torch is installed beside reel (the build folder, /usr/local/bin in the image).
Result<std::string> TorchProgram() {
  REEL_ASSIGN_OR_RETURN(std::string self, ThisProgram());
  return (std::filesystem::path(self).parent_path() / "reel-torch").string();
}

int HandOff(const TorchCommand& command, char** argv) {
  const std::string name = std::string("reel ") + command.name;
  Result<std::string> program = TorchProgram();
  if (!program.ok()) return Fail(name, program.status());
  // Set here, reel-torch need not start itself again to set it (a user's own setting stays).
  if (command.passive_openmp) setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  execv(program->c_str(), argv);
  const int error = errno;
  return Fail(name, FailedPreconditionError(
                        "cannot start " + *program +
                        ", which runs LibTorch's commands beside reel: " + std::strerror(error)));
}

}  // namespace

std::optional<int> PrepareTorchCommand(int argc, char** argv) {
  const TorchCommand* command = FindTorchCommand(SubcommandOf(argc, argv));
  if (command == nullptr) return std::nullopt;
  return HandOff(*command, argv);
}

void RegisterTorchCommands(CLI::App& app, int* exit_code) {
  for (const TorchCommand& command : kTorchCommands) {
    CLI::App* sub = app.add_subcommand(command.name, command.description);
    if (command.internal) sub->group("");
    // Only listed: PrepareTorchCommand hands every use of these names over before parsing.
    sub->set_help_flag();
    sub->allow_extras();
    sub->callback([exit_code, name = std::string(command.name)] {
      *exit_code = Fail("reel " + name, InternalError("was not handed to reel-torch (a bug)"));
    });
  }
}

}  // namespace reel::cli
