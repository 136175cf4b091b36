// Class names, options, and the sampling of one clip's parameters (see datagen.h for why the
// trajectories are drawn the way they are).
#include <algorithm>
#include <cmath>
#include <set>

#include "base/check.h"
#include "base/random.h"
#include "datagen/datagen.h"

namespace reel::datagen {

using reel::Mix64;
using reel::Rng;

namespace {

// Ranges of the latent trajectories, for a frame whose shorter side is `m` pixels.
constexpr double kMinRadius = 0.07;  // x m: circumradius range
constexpr double kMaxRadius = 0.22;
constexpr double kMinSpeed = 0.6;  // x m/128 pixels per frame
constexpr double kMaxSpeed = 2.0;
constexpr double kMinOmega = 2.0 * M_PI / 180;  // radians per frame
constexpr double kMaxOmega = 6.0 * M_PI / 180;
constexpr double kMinGrowth = 0.015;  // ln(radius) per frame
constexpr double kMaxGrowth = 0.035;

// A shape colour at least this far (Euclidean RGB) from every colour of its background texture
// (except, rarely, when no random colour is: then the farthest corner of the RGB cube).
constexpr double kMinContrast = 110;
// Channel bounds of Polarity::kBrightOnDark.
constexpr int kDarkMax = 120;
constexpr int kBrightMin = 150;

struct MotionInfo {
  Motion motion;
  std::string_view name;
};
constexpr MotionInfo kMotions[kNumMotions] = {
    {Motion::kMoveLeft, "MoveLeft"},
    {Motion::kMoveRight, "MoveRight"},
    {Motion::kMoveUp, "MoveUp"},
    {Motion::kMoveDown, "MoveDown"},
    {Motion::kRotateClockwise, "RotateClockwise"},
    {Motion::kRotateCounterClockwise, "RotateCounterClockwise"},
    {Motion::kGrow, "Grow"},
    {Motion::kShrink, "Shrink"},
};

// The state variables a motion can animate, and the direction it animates them in.
enum Variable { kX = 0, kY = 1, kAngle = 2, kLogRadius = 3, kNumVariables = 4 };
struct Animation {
  Variable variable;
  bool forwards;  // increasing (true) or decreasing (false)
};
Animation AnimationOf(Motion motion) {
  switch (motion) {
    case Motion::kMoveLeft:
      return {kX, false};
    case Motion::kMoveRight:
      return {kX, true};
    case Motion::kMoveUp:
      return {kY, false};  // y grows downwards
    case Motion::kMoveDown:
      return {kY, true};
    case Motion::kRotateClockwise:
      return {kAngle, true};  // see ShapeState::angle
    case Motion::kRotateCounterClockwise:
      return {kAngle, false};
    case Motion::kGrow:
      return {kLogRadius, true};
    case Motion::kShrink:
      return {kLogRadius, false};
  }
  REEL_CHECK(false) << "unknown motion " << static_cast<int>(motion);
  return {kX, true};
}

// Euclidean RGB distance from `p` to the segment [a, b] (every colour the texture blends).
double DistanceToSegment(const uint8_t p[3], const uint8_t a[3], const uint8_t b[3]) {
  double ab2 = 0, ap_ab = 0;
  for (int c = 0; c < 3; ++c) {
    ab2 += (double(b[c]) - a[c]) * (double(b[c]) - a[c]);
    ap_ab += (double(p[c]) - a[c]) * (double(b[c]) - a[c]);
  }
  const double s = ab2 > 0 ? std::clamp(ap_ab / ab2, 0.0, 1.0) : 0.0;
  double d = 0;
  for (int c = 0; c < 3; ++c) {
    const double q = a[c] + s * (double(b[c]) - a[c]);
    d += (p[c] - q) * (p[c] - q);
  }
  return std::sqrt(d);
}

uint8_t ClampByte(double v) { return static_cast<uint8_t>(std::clamp(std::lround(v), 0l, 255l)); }

}  // namespace

std::string_view MotionName(Motion motion) {
  for (const auto& info : kMotions) {
    if (info.motion == motion) return info.name;
  }
  REEL_CHECK(false) << "unknown motion " << static_cast<int>(motion);
  return "";
}

std::optional<Motion> MotionFromName(std::string_view name) {
  for (const auto& info : kMotions) {
    if (info.name == name) return info.motion;
  }
  return std::nullopt;
}

std::string_view PolarityName(Polarity polarity) {
  return polarity == Polarity::kBrightOnDark ? "bright-on-dark" : "any";
}

std::optional<Polarity> PolarityFromName(std::string_view name) {
  if (name == "bright-on-dark") return Polarity::kBrightOnDark;
  if (name == "any") return Polarity::kAny;
  return std::nullopt;
}

const std::vector<Motion>& AllMotions() {
  static const std::vector<Motion> all = [] {
    std::vector<Motion> v;
    for (const auto& info : kMotions) v.push_back(info.motion);
    return v;
  }();
  return all;
}

std::string_view ShapeKindName(ShapeKind kind) {
  switch (kind) {
    case ShapeKind::kSquare:
      return "square";
    case ShapeKind::kTriangle:
      return "triangle";
    case ShapeKind::kStar:
      return "star";
    case ShapeKind::kCross:
      return "cross";
    case ShapeKind::kEllipse:
      return "ellipse";
  }
  return "";
}

Status ValidateOptions(const DatagenOptions& o) {
  auto bad = [](const std::string& what) { return InvalidArgumentError("datagen: " + what); };
  if (o.class_names.empty() && (o.num_classes < 1 || o.num_classes > kNumMotions)) {
    return bad("num_classes " + std::to_string(o.num_classes) + " not in [1, " +
               std::to_string(kNumMotions) + "]");
  }
  std::set<std::string> seen;
  for (const auto& name : o.class_names) {
    if (!MotionFromName(name)) {
      std::string known;
      for (const auto& info : kMotions)
        known += (known.empty() ? "" : ", ") + std::string(info.name);
      return bad("unknown class '" + name + "' (known: " + known + ")");
    }
    if (!seen.insert(name).second) return bad("class '" + name + "' given twice");
  }
  if (o.videos_per_class < 1 || o.videos_per_class > 99999) {
    return bad("videos_per_class " + std::to_string(o.videos_per_class) + " not in [1, 99999]");
  }
  if (!(o.train_fraction >= 0 && o.train_fraction <= 1)) {
    return bad("train_fraction " + std::to_string(o.train_fraction) + " not in [0, 1]");
  }
  if (o.width < 16 || o.width > 4096 || o.height < 16 || o.height > 4096) {
    return bad("size " + std::to_string(o.width) + "x" + std::to_string(o.height) +
               " not in [16, 4096] x [16, 4096]");
  }
  if (o.fps < 1 || o.fps > 240) return bad("fps " + std::to_string(o.fps) + " not in [1, 240]");
  if (o.min_frames < 2 || o.max_frames < o.min_frames || o.max_frames > 100000) {
    return bad("frames [" + std::to_string(o.min_frames) + ", " + std::to_string(o.max_frames) +
               "]: need 2 <= min_frames <= max_frames <= 100000");
  }
  if (o.noise < 0 || o.noise > 64)
    return bad("noise " + std::to_string(o.noise) + " not in [0, 64]");
  if (o.crf < 0 || o.crf > 51) return bad("crf " + std::to_string(o.crf) + " not in [0, 51]");
  if (o.gop < 0) return bad("gop " + std::to_string(o.gop) + " is negative");
  if (o.preset.empty()) return bad("empty encoder preset");
  return Status::Ok();
}

Result<std::vector<Motion>> ResolveClasses(const DatagenOptions& options) {
  REEL_RETURN_IF_ERROR(ValidateOptions(options));
  std::vector<Motion> classes;
  if (!options.class_names.empty()) {
    for (const auto& name : options.class_names) classes.push_back(*MotionFromName(name));
  } else {
    classes.assign(AllMotions().begin(), AllMotions().begin() + options.num_classes);
  }
  return classes;
}

ShapeState ClipSpec::StateAt(int t) const {
  ShapeState s;
  s.x = start.x + vx * t;
  s.y = start.y + vy * t;
  s.angle = start.angle + omega * t;
  s.radius = start.radius * std::exp(growth * t);
  return s;
}

uint64_t ClipSeed(uint64_t seed, Motion motion, int index) {
  uint64_t h = Mix64(seed ^ 0x6a09e667f3bcc909ull);
  h = Mix64(h ^ (static_cast<uint64_t>(motion) + 1) * 0x9e3779b97f4a7c15ull);
  h = Mix64(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(index)) + 1) * 0xc2b2ae3d27d4eb4full);
  return h;
}

ClipSpec SampleClip(uint64_t seed, Motion motion, int index, const DatagenOptions& options) {
  REEL_CHECK(ValidateOptions(options).ok());
  ClipSpec spec;
  spec.motion = motion;
  spec.index = index;
  spec.clip_seed = ClipSeed(seed, motion, index);
  spec.width = options.width;
  spec.height = options.height;
  spec.fps = options.fps;
  spec.noise = options.noise;
  spec.antialias = options.antialias;

  // Every draw below happens for every class, in the same order; the class is only used at the
  // end, to choose which latent trajectory plays and which are frozen.
  Rng rng(spec.clip_seed);
  spec.num_frames =
      options.min_frames + rng.UniformInt(options.max_frames - options.min_frames + 1);
  const int last = spec.num_frames - 1;  // >= 1

  // Appearance.
  spec.shape = static_cast<ShapeKind>(rng.UniformInt(kNumShapeKinds));
  double param_u = rng.Uniform();
  spec.shape_param = spec.shape == ShapeKind::kStar      ? 0.38 + 0.17 * param_u
                     : spec.shape == ShapeKind::kEllipse ? 0.45 + 0.25 * param_u
                                                         : 0.0;
  // Bright-on-dark keeps the background's channels at or below kDarkMax and the shape's at or
  // above kBrightMin (see datagen.h for why).
  const bool bright_on_dark = options.polarity == Polarity::kBrightOnDark;
  const int background_levels = bright_on_dark ? kDarkMax + 1 : 256;
  for (int c = 0; c < 3; ++c)
    spec.background[0][c] = static_cast<uint8_t>(rng.UniformInt(background_levels));
  for (int c = 0; c < 3; ++c) {
    spec.background[1][c] = ClampByte(spec.background[0][c] + rng.Uniform(-120, 120));
    if (bright_on_dark) spec.background[1][c] = std::min<uint8_t>(spec.background[1][c], kDarkMax);
  }
  bool found = false;
  for (int attempt = 0; attempt < 64 && !found; ++attempt) {
    for (int c = 0; c < 3; ++c) {
      spec.color[c] = static_cast<uint8_t>(
          bright_on_dark ? kBrightMin + rng.UniformInt(256 - kBrightMin) : rng.UniformInt(256));
    }
    found = DistanceToSegment(spec.color, spec.background[0], spec.background[1]) >= kMinContrast;
  }
  if (!found) {  // rare: take the corner of the RGB cube farthest from the background
    double best = -1;
    for (int corner = 0; corner < 8; ++corner) {
      const uint8_t rgb[3] = {uint8_t(corner & 1 ? 255 : 0), uint8_t(corner & 2 ? 255 : 0),
                              uint8_t(corner & 4 ? 255 : 0)};
      const double d = DistanceToSegment(rgb, spec.background[0], spec.background[1]);
      if (d > best) {
        best = d;
        std::copy(rgb, rgb + 3, spec.color);
      }
    }
  }
  const double m = std::min(options.width, options.height);
  spec.texture_scale = m * rng.Uniform(0.15, 0.35);

  // Latent trajectories, one per variable: value(t) = origin + rate * t, t in [0, last], each
  // staying within its range for the whole clip.
  double origin[kNumVariables], rate[kNumVariables];
  // ln(radius) first: the positions' ranges keep the largest radius it reaches inside the frame.
  const double ln_lo = std::log(kMinRadius * m), ln_hi = std::log(kMaxRadius * m);
  rate[kLogRadius] = std::min(rng.Uniform(kMinGrowth, kMaxGrowth), (ln_hi - ln_lo) / last);
  origin[kLogRadius] = ln_lo + rng.Uniform() * (ln_hi - ln_lo - rate[kLogRadius] * last);
  const double margin = std::exp(origin[kLogRadius] + rate[kLogRadius] * last) + 1.0;
  const double extent[2] = {options.width - 2 * margin, options.height - 2 * margin};  // > 0
  for (int v : {kX, kY}) {
    double speed = rng.Uniform(kMinSpeed, kMaxSpeed) * m / 128;
    rate[v] = std::min(speed, extent[v] / last);
    origin[v] = margin + rng.Uniform() * (extent[v] - rate[v] * last);
  }
  rate[kAngle] = rng.Uniform(kMinOmega, kMaxOmega);
  origin[kAngle] = rng.Uniform(0, 2 * M_PI);
  int frozen_at[kNumVariables];
  for (int v = 0; v < kNumVariables; ++v) frozen_at[v] = rng.UniformInt(spec.num_frames);

  // The class: its variable plays forwards or backwards (a reversed trajectory has the same
  // per-frame law as the forward one); every other variable holds its value at a random frame.
  const Animation animation = AnimationOf(motion);
  double start[kNumVariables], velocity[kNumVariables];
  for (int v = 0; v < kNumVariables; ++v) {
    if (v == animation.variable) {
      start[v] = animation.forwards ? origin[v] : origin[v] + rate[v] * last;
      velocity[v] = animation.forwards ? rate[v] : -rate[v];
    } else {
      start[v] = origin[v] + rate[v] * frozen_at[v];
      velocity[v] = 0;
    }
  }
  spec.start.x = start[kX];
  spec.start.y = start[kY];
  spec.start.angle = start[kAngle];
  spec.start.radius = std::exp(start[kLogRadius]);
  spec.vx = velocity[kX];
  spec.vy = velocity[kY];
  spec.omega = velocity[kAngle];
  spec.growth = velocity[kLogRadius];
  return spec;
}

}  // namespace reel::datagen
