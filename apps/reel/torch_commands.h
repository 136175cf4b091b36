// The LibTorch commands' registrations, linked only into `reel-torch` (commands.h says why).
#pragma once

#include <CLI/CLI.hpp>

namespace reel::cli {

void RegisterTrain(CLI::App& app, int* exit_code);     // reel train and reel eval
void RegisterServe(CLI::App& app, int* exit_code);     // reel serve (inference), serve-stage
void RegisterPredict(CLI::App& app, int* exit_code);   // reel predict (offline inference)
void RegisterFeatures(CLI::App& app, int* exit_code);  // reel features (embeddings per clip)

}  // namespace reel::cli
