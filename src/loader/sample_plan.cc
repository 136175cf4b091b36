#include "loader/sample_plan.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "base/json.h"
#include "base/random.h"
#include "dataset/shard_reader.h"
#include "loader/streams.h"

namespace reel::loader {
namespace {

constexpr uint64_t kMaxWorldSize = uint64_t{1} << 20;

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

// Samples per rank for a stream of n: whole batches on every rank, padded or dropped.
uint64_t PerRank(uint64_t n, int world_size, int batch_size, Remainder remainder) {
  const uint64_t unit = static_cast<uint64_t>(world_size) * static_cast<uint64_t>(batch_size);
  const uint64_t batches = remainder == Remainder::kPad ? (n + unit - 1) / unit : n / unit;
  return batches * static_cast<uint64_t>(batch_size);
}

// Rank `rank`'s contiguous part of a stream in segment `segment`, as positions in the stream
// (those past its end are padding: they wrap to the start), permuted by the shuffle buffer:
// hold up to `shuffle_buffer` entries, emit a random one, refill in order.
std::vector<uint64_t> RankPart(uint64_t per_rank, int rank, const PlanOptions& o,
                               uint64_t segment) {
  std::vector<uint64_t> mine(per_rank);
  const uint64_t first = static_cast<uint64_t>(rank) * per_rank;
  for (uint64_t i = 0; i < per_rank; ++i) mine[i] = first + i;
  if (!o.shuffle || o.shuffle_buffer <= 1) return mine;
  auto rng =
      Rng::Stream(o.seed, kBufferStream, o.epoch, (segment << 32) + static_cast<uint64_t>(rank));
  std::vector<uint64_t> buffer;
  std::vector<uint64_t> out;
  out.reserve(mine.size());
  buffer.reserve(std::min<size_t>(o.shuffle_buffer, mine.size()));
  for (uint64_t position : mine) {
    if (buffer.size() < o.shuffle_buffer) {
      buffer.push_back(position);
      continue;
    }
    size_t pick = rng.Below(buffer.size());
    out.push_back(buffer[pick]);
    buffer[pick] = position;
  }
  while (!buffer.empty()) {
    size_t pick = rng.Below(buffer.size());
    out.push_back(buffer[pick]);
    buffer[pick] = buffer.back();
    buffer.pop_back();
  }
  return out;
}

// The stream the current segment splits: the epoch's, then after each earlier segment what its
// ranks left untaken (padding excluded: it repeats samples still in the stream).
Result<std::vector<SampleRef>> SegmentStream(const SplitCatalog& catalog, const PlanOptions& o) {
  std::vector<SampleRef> stream = Stream(catalog, o);
  if (o.class_balanced) stream = BalancedStream(stream, o);
  for (size_t k = 0; k < o.before.size(); ++k) {
    const PlanSegment& segment = o.before[k];
    const uint64_t n = stream.size();
    const uint64_t per_rank = PerRank(n, segment.world_size, o.batch_size, o.remainder);
    if (segment.position > per_rank) {
      return InvalidArgumentError("segment " + std::to_string(k) + " of epoch " +
                                  std::to_string(o.epoch) + " says its ranks took " +
                                  std::to_string(segment.position) + " samples of " +
                                  std::to_string(per_rank));
    }
    std::vector<SampleRef> rest;
    rest.reserve(n - std::min(n, segment.position * static_cast<uint64_t>(segment.world_size)));
    for (int r = 0; r < segment.world_size; ++r) {
      const std::vector<uint64_t> part = RankPart(per_rank, r, o, k);
      for (uint64_t i = segment.position; i < part.size(); ++i) {
        if (part[i] < n) rest.push_back(stream[part[i]]);
      }
    }
    stream = std::move(rest);
  }
  return stream;
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
  for (const PlanSegment& segment : o.before) {
    if (segment.world_size < 1) {
      return InvalidArgumentError("an earlier segment's world_size must be at least 1");
    }
  }
  return Status::Ok();
}

namespace {

// Samples per rank for a stream of `n` in the current segment; the first segment must fill a
// batch on every rank (a later one is the rest of an epoch, which may be empty).
Result<uint64_t> SegmentPerRank(uint64_t n, const PlanOptions& o) {
  const uint64_t per_rank = PerRank(n, o.world_size, o.batch_size, o.remainder);
  if (per_rank == 0 && o.before.empty()) {
    return InvalidArgumentError("the split's " + std::to_string(n) +
                                " samples do not fill one batch of " +
                                std::to_string(o.batch_size) + " on each of " +
                                std::to_string(o.world_size) + " ranks (use padding)");
  }
  return per_rank;
}

}  // namespace

Result<uint64_t> SamplesPerRank(const SplitCatalog& catalog, const PlanOptions& o) {
  REEL_RETURN_IF_ERROR(ValidatePlanOptions(catalog, o));
  if (o.before.empty()) return SegmentPerRank(catalog.size(), o);  // no stream to build
  REEL_ASSIGN_OR_RETURN(std::vector<SampleRef> rest, SegmentStream(catalog, o));
  return SegmentPerRank(rest.size(), o);
}

Result<std::vector<SampleRef>> PlanEpoch(const SplitCatalog& catalog, const PlanOptions& o) {
  REEL_RETURN_IF_ERROR(ValidatePlanOptions(catalog, o));
  REEL_ASSIGN_OR_RETURN(std::vector<SampleRef> stream, SegmentStream(catalog, o));
  REEL_ASSIGN_OR_RETURN(uint64_t per_rank, SegmentPerRank(stream.size(), o));
  std::vector<SampleRef> out;
  out.reserve(per_rank);
  for (uint64_t position : RankPart(per_rank, o.rank, o, o.before.size())) {
    out.push_back(stream[position % stream.size()]);
  }
  return out;
}

std::string LoaderState::ToJson() const {
  nlohmann::json j = {{"seed", seed}, {"epoch", epoch}, {"position", position}};
  if (world_size > 0) j["world_size"] = world_size;
  if (!before.empty()) {
    nlohmann::json segments = nlohmann::json::array();
    for (const PlanSegment& s : before) segments.push_back({s.world_size, s.position});
    j["before"] = segments;
  }
  return j.dump();
}

namespace {

// [[world_size, position], ...]; records an error in `f` when malformed.
std::vector<PlanSegment> ReadSegments(const nlohmann::json& j, JsonFields& f) {
  std::vector<PlanSegment> out;
  for (const auto& s : j) {
    if (!s.is_array() || s.size() != 2 || !s[0].is_number_unsigned() ||
        !s[1].is_number_unsigned() || s[0].get<uint64_t>() < 1 ||
        s[0].get<uint64_t>() > kMaxWorldSize) {
      f.Fail(f.Path("before"), "expected [[world_size, position], ...], got " + j.dump());
      return {};
    }
    out.push_back({s[0].get<int>(), s[1].get<uint64_t>()});
  }
  return out;
}

}  // namespace

Result<LoaderState> LoaderState::FromJson(const std::string& text) {
  REEL_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(text, "loader state"));
  JsonFields f(doc, "loader");
  LoaderState state;
  state.seed = f.Uint("seed");
  state.epoch = f.Int("epoch");
  state.position = f.Uint("position");
  if (f.Has("world_size")) {
    const uint64_t world = f.Uint("world_size");
    if (f.ok() && (world < 1 || world > kMaxWorldSize)) {
      f.Fail(f.Path("world_size"),
             "expected 1 to " + std::to_string(kMaxWorldSize) + ", got " + std::to_string(world));
    }
    state.world_size = static_cast<int>(world);
  }
  if (f.Has("before")) state.before = ReadSegments(f.Array("before"), f);
  if (!f.ok()) return DataLossError(f.error());
  return state;
}

}  // namespace reel::loader
