#include "loader/sample_plan.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "base/random.h"
#include "dataset/shard_reader.h"
#include "loader/streams.h"

namespace reel::loader {
namespace {

// The split's records in epoch stream order: shards in (shuffled) order, records in order.
std::vector<SampleRef> Stream(const SplitCatalog& catalog, const PlanOptions& o) {
  std::vector<size_t> order(catalog.shards.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (o.shuffle) {
    auto rng = Rng::Stream(o.seed, kShardOrderStream, o.epoch);
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.Below(i)]);
  }
  std::vector<SampleRef> stream;
  stream.reserve(catalog.size());
  for (size_t i : order) {
    for (size_t r = 0; r < catalog.labels[i].size(); ++r) {
      stream.push_back({catalog.shards[i], static_cast<uint32_t>(r), catalog.labels[i][r]});
    }
  }
  return stream;
}

// Draws size() samples with replacement, weight 1 / (count of the sample's class), and returns
// them in stream order (so each rank still reads contiguous parts of few shards).
std::vector<SampleRef> BalancedStream(const std::vector<SampleRef>& stream, const PlanOptions& o) {
  std::map<int, uint64_t> counts;
  for (const auto& s : stream) ++counts[s.label];
  // Pick a class uniformly among those present, then a sample of it uniformly: the same
  // distribution as weights 1/count, in O(1) per draw.
  std::vector<int> classes;
  std::map<int, std::vector<uint64_t>> members;  // class -> stream positions
  for (uint64_t i = 0; i < stream.size(); ++i) members[stream[i].label].push_back(i);
  classes.reserve(members.size());
  for (const auto& [label, positions] : members) classes.push_back(label);
  auto rng = Rng::Stream(o.seed, kBalancedDrawStream, o.epoch);
  std::vector<uint64_t> drawn;
  drawn.reserve(stream.size());
  for (uint64_t i = 0; i < stream.size(); ++i) {
    const auto& positions = members[classes[rng.Below(classes.size())]];
    drawn.push_back(positions[rng.Below(positions.size())]);
  }
  std::sort(drawn.begin(), drawn.end());
  std::vector<SampleRef> out;
  out.reserve(drawn.size());
  for (uint64_t position : drawn) out.push_back(stream[position]);
  return out;
}

}  // namespace

uint64_t SplitCatalog::size() const {
  uint64_t n = 0;
  for (const auto& shard : labels) n += shard.size();
  return n;
}

Result<SplitCatalog> SplitCatalog::FromIndexes(storage::ObjectStore& store, const std::string& root,
                                               const std::string& split) {
  SplitCatalog catalog;
  REEL_ASSIGN_OR_RETURN(auto numbers, dataset::ListShards(store, root, split));
  for (uint32_t number : numbers) {
    REEL_ASSIGN_OR_RETURN(auto reader, dataset::ShardReader::Open(store, root, split, number));
    std::vector<int> labels;
    for (const auto& record : reader->index().records) labels.push_back(record.label);
    catalog.shards.push_back(number);
    catalog.labels.push_back(std::move(labels));
  }
  return catalog;
}

Status ValidatePlanOptions(const SplitCatalog& catalog, const PlanOptions& o) {
  if (o.world_size < 1) return InvalidArgumentError("world_size must be at least 1");
  if (o.rank < 0 || o.rank >= o.world_size) {
    return InvalidArgumentError("rank " + std::to_string(o.rank) + " is outside [0, " +
                                std::to_string(o.world_size) + ")");
  }
  if (o.batch_size < 1) return InvalidArgumentError("batch_size must be at least 1");
  if (o.shuffle_buffer < 1) return InvalidArgumentError("shuffle_buffer must be at least 1");
  if (o.epoch < 0) return InvalidArgumentError("epoch must not be negative");
  if (catalog.shards.size() != catalog.labels.size()) {
    return InvalidArgumentError("catalog: shards and labels differ in length");
  }
  if (catalog.size() == 0) return InvalidArgumentError("the split has no samples");
  return Status::Ok();
}

Result<uint64_t> SamplesPerRank(const SplitCatalog& catalog, const PlanOptions& o) {
  REEL_RETURN_IF_ERROR(ValidatePlanOptions(catalog, o));
  const uint64_t n = catalog.size();
  const uint64_t unit = static_cast<uint64_t>(o.world_size) * static_cast<uint64_t>(o.batch_size);
  const uint64_t batches = o.remainder == Remainder::kPad ? (n + unit - 1) / unit : n / unit;
  if (batches == 0) {
    return InvalidArgumentError("the split's " + std::to_string(n) +
                                " samples do not fill one batch of " +
                                std::to_string(o.batch_size) + " on each of " +
                                std::to_string(o.world_size) + " ranks (use padding)");
  }
  return batches * static_cast<uint64_t>(o.batch_size);
}

Result<std::vector<SampleRef>> PlanEpoch(const SplitCatalog& catalog, const PlanOptions& o) {
  REEL_ASSIGN_OR_RETURN(uint64_t per_rank, SamplesPerRank(catalog, o));
  std::vector<SampleRef> stream = Stream(catalog, o);
  if (o.class_balanced) stream = BalancedStream(stream, o);

  // This rank's contiguous part; positions past the end wrap to the start (padding).
  std::vector<SampleRef> mine;
  mine.reserve(per_rank);
  const uint64_t first = static_cast<uint64_t>(o.rank) * per_rank;
  for (uint64_t i = 0; i < per_rank; ++i) mine.push_back(stream[(first + i) % stream.size()]);

  if (!o.shuffle || o.shuffle_buffer <= 1) return mine;
  // The shuffle buffer: hold up to `shuffle_buffer` samples, emit a random one, refill in order.
  auto rng = Rng::Stream(o.seed, kBufferStream, o.epoch, static_cast<uint64_t>(o.rank));
  std::vector<SampleRef> buffer;
  std::vector<SampleRef> out;
  out.reserve(mine.size());
  buffer.reserve(std::min<size_t>(o.shuffle_buffer, mine.size()));
  for (const SampleRef& sample : mine) {
    if (buffer.size() < o.shuffle_buffer) {
      buffer.push_back(sample);
      continue;
    }
    size_t pick = rng.Below(buffer.size());
    out.push_back(buffer[pick]);
    buffer[pick] = sample;
  }
  while (!buffer.empty()) {
    size_t pick = rng.Below(buffer.size());
    out.push_back(buffer[pick]);
    buffer[pick] = buffer.back();
    buffer.pop_back();
  }
  return out;
}

std::string LoaderState::ToJson() const {
  return nlohmann::json{{"seed", seed}, {"epoch", epoch}, {"position", position}}.dump();
}

Result<LoaderState> LoaderState::FromJson(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("seed") || !j.contains("epoch") || !j.contains("position") ||
      !j["seed"].is_number_unsigned() || !j["epoch"].is_number_integer() ||
      !j["position"].is_number_unsigned()) {
    return DataLossError("loader state: expected {\"seed\", \"epoch\", \"position\"}, got '" +
                         text.substr(0, 200) + "'");
  }
  LoaderState state;
  state.seed = j["seed"].get<uint64_t>();
  state.epoch = j["epoch"].get<int64_t>();
  state.position = j["position"].get<uint64_t>();
  return state;
}

}  // namespace reel::loader
