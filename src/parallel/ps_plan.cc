#include "parallel/ps_plan.h"

#include <algorithm>
#include <numeric>

namespace reel::parallel {

Result<PsSync> ParsePsSync(const std::string& name) {
  if (name == "bsp") return PsSync::kBsp;
  if (name == "ssp") return PsSync::kSsp;
  return InvalidArgumentError("unknown parameter-server sync '" + name + "' (expected bsp or ssp)");
}

const char* PsSyncName(PsSync sync) { return sync == PsSync::kBsp ? "bsp" : "ssp"; }

Result<std::vector<int>> AssignToServers(const std::vector<int64_t>& bytes, int servers) {
  if (servers < 1) return InvalidArgumentError("parameter servers: need at least one server");
  for (int64_t b : bytes) {
    if (b < 0) return InvalidArgumentError("parameter servers: a tensor of negative size");
  }
  std::vector<size_t> order(bytes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bytes[a] > bytes[b]; });
  std::vector<int64_t> load(static_cast<size_t>(servers), 0);
  std::vector<int> server(bytes.size(), 0);
  for (size_t t : order) {
    const auto least = std::min_element(load.begin(), load.end());
    server[t] = static_cast<int>(least - load.begin());
    *least += bytes[t];
  }
  return server;
}

}  // namespace reel::parallel
