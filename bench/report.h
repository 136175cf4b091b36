// The one table every benchmark ends with, and the same figures as JSON for comparing runs.
//
//   reel::bench::Report report("loader_bench", /*threads=*/2);
//   report.Add({"loader, video mode", 1004, "clips/s", {1313, "pure decode"}, {110, "PyTorch"}});
//   return report.Finish(json_path);  // prints; writes the JSON when a path is given
//
// Each figure may have a limit (what the machine allows: pure decode, cp, SGEMM peak) and a peer
// (what people use instead: PyTorch's loader, curl); the ratios are value / reference, so for a
// rate above 1 is faster, and for a time ("s", "ms", "us" units) below 1 is faster.
// JSON (--json FILE): a list of {"name", "value", "unit", "limit", "limit_ratio", "peer",
// "peer_ratio", "limit_name", "peer_name"}, null where there is no such reference, after one
// {"machine": ...} record.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace reel::bench {

struct Reference {
  double value = 0;
  std::string name;  // what it is: "pure libavcodec decode, 2 threads", "curl"
};

struct Figure {
  std::string name;
  double value = 0;
  std::string unit;
  std::optional<Reference> limit, peer;
};

// The CPU's model name, as /proc/cpuinfo gives it ("unknown CPU" when it does not).
std::string CpuModel();

// Cores, CPU model, memory, and the thread settings a benchmark runs under.
std::string MachineDescription(int threads);

class Report {
 public:
  Report(std::string bench, int threads);

  void Add(Figure figure);

  // Prints the machine and the table; writes the JSON to `json_path` unless it is empty.
  // Returns the exit code: 0, or 1 (with a message) when the file cannot be written.
  int Finish(const std::string& json_path) const;

 private:
  std::string bench_;
  int threads_;
  std::vector<Figure> figures_;
};

// Takes "--json FILE" out of argv (argc adjusted) and returns FILE, or "" when absent.
std::string TakeJsonFlag(int* argc, char** argv);

}  // namespace reel::bench
