// registry_bench's shared helpers: the command line, clocks, shell and files, the machine, and
// the figures with their table rows and JSON records.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/status.h"

namespace reel::registry_bench {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// Command line, clocks, shell.

struct Args {
  std::string work;  // scratch folder; "" makes one under /tmp and removes it at the end
  std::string json;  // --json FILE
  std::string reel;  // the reel CLI; "" finds it beside this binary's build folder
  int threads = 0;   // LibTorch threads for training; 0: one per core
  int batch = 2, frames = 8, size = 56;
  int steps = 2;                    // optimizer steps between two checkpoints of the run (a)
  int finetune_steps = 4;           // optimizer steps of each fine-tune (b) and (c)
  std::string optimizer = "adamw";  // adamw (weight decay 0.01) or sgd (momentum 0.9, wd 1e-4)
  double lr = 0;                    // 0: as a fine-tune uses, 1e-4 for AdamW, 1e-3 for SGD
  int checkpoints = 10;
  int list_versions = 10000;
  int repeat = 3;         // runs per throughput figure (median)
  int list_repeat = 20;   // runs per listing figure (median)
  int max_chain = 8;      // WeightStoreOptions: deltas in a row before a chunk is stored whole
  int store_threads = 0;  // WeightStoreOptions::threads, of a push and a pull: 0, one per core
  bool peers = true;
  bool keep = false;
  bool listing_only = false;  // only the listing figures (no training, no peers)
};

Result<Args> ParseArgs(int argc, char** argv);

double SecondsSince(Clock::time_point start);

// The process's CPU seconds so far, user and system, of every thread it ran (a push's pool
// threads included; LibTorch's OpenMP workers sleep between steps: OMP_WAIT_POLICY=PASSIVE).
double ProcessCpuSeconds();

double Median(std::vector<double> v);

// A progress line on stderr, with the seconds since the first one.
void Progress(const std::string& what);

// Runs `command` with /bin/sh; its stderr goes to `log`. Returns its stdout.
// Errors: Internal naming the command, its exit code and the end of its log.
Result<std::string> Shell(const std::string& command, const std::string& log);

Status MakeFolder(const std::string& path);
Status WriteFile(const std::string& path, const std::string& bytes);
Result<std::string> ReadFile(const std::string& path);
std::string FormatBytes(double bytes);

// ---------------------------------------------------------------------------------------------
// The machine and the figures.

// The 1, 5 and 15 minute load averages: other work on these cores skews every time measured.
std::string LoadAverage();

struct Machine {
  std::string load_start = LoadAverage();
  int cores = 1;
  std::string cpu;
  int torch_threads = 1;
  std::string omp_wait_policy;
};

Machine DescribeMachine(int threads);

enum class Goal { kNone, kAtMost, kAtLeast };

struct Figure {
  std::string section, name;
  double value = 0;
  std::string unit;
  Goal goal = Goal::kNone;
  double limit = 0;
  std::string peer_name;  // "" when none
  double peer = 0;
  std::string note;  // printed after the row
};

Figure MakeFigure(std::string section, std::string name, double value, std::string unit,
                  Goal goal = Goal::kNone, double limit = 0);
std::string Number(double v);
std::string Ratio(double r);
void PrintFigures(const std::vector<Figure>& figures, const std::string& section);
// The closing table every benchmark prints (bench/report.h), and its JSON at `json_path` unless
// empty: a goal is the figure's limit. Returns the report's exit code.
int ReportFigures(const std::vector<Figure>& figures, int threads, const std::string& json_path);

}  // namespace reel::registry_bench
