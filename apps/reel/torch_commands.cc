// `reel-torch`: LibTorch's commands themselves (commands.h says why they live apart).
#include "apps/reel/torch_commands.h"

#include <unistd.h>

#include <cstdlib>

#include "apps/reel/commands.h"

namespace reel::cli {

std::optional<int> PrepareTorchCommand(int argc, char** argv) {
  const TorchCommand* command = FindTorchCommand(SubcommandOf(argc, argv));
  if (command == nullptr || !command->passive_openmp || std::getenv("OMP_WAIT_POLICY")) {
    return std::nullopt;
  }
  // libgomp reads its environment once, when it is loaded: set it, then start again. (`reel`
  // sets it before handing over, so this start is paid only by reel-torch run by hand.)
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: serve with spinning threads then
  return std::nullopt;
}

void RegisterTorchCommands(CLI::App& app, int* exit_code) {
  RegisterTrain(app, exit_code);
  RegisterServe(app, exit_code);
  RegisterPredict(app, exit_code);
  RegisterFeatures(app, exit_code);
}

}  // namespace reel::cli
