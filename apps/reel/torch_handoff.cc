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

bool IsTorchCommand(std::string_view name) {
  for (const TorchCommand& command : kTorchCommands) {
    if (name == command.name) return true;
  }
  return false;
}

// reel-torch is installed beside reel (the build folder, /usr/local/bin in the image).
Result<std::string> TorchProgram() {
  REEL_ASSIGN_OR_RETURN(std::string self, ThisProgram());
  return (std::filesystem::path(self).parent_path() / "reel-torch").string();
}

int HandOff(std::string_view command, char** argv) {
  const std::string name = "reel " + std::string(command);
  Result<std::string> program = TorchProgram();
  if (!program.ok()) return Fail(name, program.status());
  // OpenMP reads its wait policy once, when LibTorch loads: spinning threads would take the
  // cores a server's requests and a prediction's decoders need (a user's own setting stays).
  if (command == "serve" || command == "predict") setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  execv(program->c_str(), argv);
  const int error = errno;
  return Fail(name, FailedPreconditionError(
                        "cannot start " + *program +
                        ", which runs LibTorch's commands beside reel: " + std::strerror(error)));
}

}  // namespace

std::optional<int> PrepareTorchCommand(int argc, char** argv) {
  const std::string_view command = SubcommandOf(argc, argv);
  if (!IsTorchCommand(command)) return std::nullopt;
  return HandOff(command, argv);
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
