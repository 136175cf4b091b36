// Rendering of one clip: a smooth two-colour value-noise texture (fixed per clip), the shape
// composited with supersampled coverage, then fresh uniform noise per frame.
#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "base/random.h"
#include "datagen/datagen.h"

namespace reel::datagen {

using reel::Mix64;
using reel::Rng;

namespace {

constexpr int kSupersample = 4;  // per axis, when antialiasing

// Vertices (x, y pairs) of a unit shape: circumradius 1, angle 0.
std::vector<double> UnitPolygon(ShapeKind kind, double param) {
  std::vector<double> p;
  auto polar = [&p](double r, double degrees) {
    p.push_back(r * std::cos(degrees * M_PI / 180));
    p.push_back(r * std::sin(degrees * M_PI / 180));
  };
  switch (kind) {
    case ShapeKind::kSquare:
      for (int i = 0; i < 4; ++i) polar(1.0, 45 + 90 * i);
      break;
    case ShapeKind::kTriangle:
      for (int i = 0; i < 3; ++i) polar(1.0, -90 + 120 * i);
      break;
    case ShapeKind::kStar:
      for (int i = 0; i < 10; ++i) polar(i % 2 == 0 ? 1.0 : param, -90 + 36 * i);
      break;
    case ShapeKind::kCross: {
      const double w = 0.3, a = std::sqrt(1 - w * w);  // arm half-width and length
      const double q[12][2] = {{a, w},   {w, w},   {w, a},   {-w, a}, {-w, w}, {-a, w},
                               {-a, -w}, {-w, -w}, {-w, -a}, {w, -a}, {w, -w}, {a, -w}};
      for (const auto& v : q) {
        p.push_back(v[0]);
        p.push_back(v[1]);
      }
      break;
    }
    case ShapeKind::kEllipse:
      break;
  }
  return p;
}

// Distance from the origin to the nearest edge of a polygon (which contains the origin).
double InnerRadius(const std::vector<double>& p) {
  const size_t n = p.size() / 2;
  double best = 1.0;
  for (size_t i = 0; i < n; ++i) {
    double ax = p[2 * i], ay = p[2 * i + 1];
    double bx = p[2 * ((i + 1) % n)], by = p[2 * ((i + 1) % n) + 1];
    double dx = bx - ax, dy = by - ay;
    double s = std::clamp(-(ax * dx + ay * dy) / (dx * dx + dy * dy), 0.0, 1.0);
    best = std::min(best, std::hypot(ax + s * dx, ay + s * dy));
  }
  return best;
}

double SmoothStep(double t) { return t * t * (3 - 2 * t); }

// Value noise: random values on a grid with `cell` pixels per cell, smoothly interpolated.
class ValueNoise {
 public:
  ValueNoise(Rng& rng, int width, int height, double cell)
      : cell_(std::max(cell, 1.0)),
        nx_(static_cast<int>(width / cell_) + 2),
        ny_(static_cast<int>(height / cell_) + 2),
        values_(static_cast<size_t>(nx_) * ny_) {
    for (auto& v : values_) v = rng.Uniform();
  }
  double At(double x, double y) const {
    double gx = x / cell_, gy = y / cell_;
    int ix = std::min(static_cast<int>(gx), nx_ - 2), iy = std::min(static_cast<int>(gy), ny_ - 2);
    double fx = SmoothStep(gx - ix), fy = SmoothStep(gy - iy);
    auto v = [this](int i, int j) { return values_[static_cast<size_t>(j) * nx_ + i]; };
    double top = v(ix, iy) + fx * (v(ix + 1, iy) - v(ix, iy));
    double bottom = v(ix, iy + 1) + fx * (v(ix + 1, iy + 1) - v(ix, iy + 1));
    return top + fy * (bottom - top);
  }

 private:
  double cell_;
  int nx_, ny_;
  std::vector<double> values_;
};

}  // namespace

ClipRenderer::ClipRenderer(const ClipSpec& spec) : spec_(spec) {
  REEL_CHECK(spec.width > 0 && spec.height > 0 && spec.num_frames > 0);
  polygon_ = UnitPolygon(spec.shape, spec.shape_param);
  inner_radius_ = spec.shape == ShapeKind::kEllipse ? spec.shape_param : InnerRadius(polygon_);

  // The texture: three octaves of value noise blending the two background colours. Its random
  // stream is separate from SampleClip's (different seed), so the two never interact.
  Rng rng(Mix64(spec.clip_seed ^ 0x3c6ef372fe94f82bull));
  ValueNoise coarse(rng, spec.width, spec.height, spec.texture_scale);
  ValueNoise middle(rng, spec.width, spec.height, spec.texture_scale / 4);
  ValueNoise fine(rng, spec.width, spec.height, 3.0);
  background_.resize(static_cast<size_t>(spec.width) * spec.height * 3);
  uint8_t* out = background_.data();
  for (int y = 0; y < spec.height; ++y) {
    for (int x = 0; x < spec.width; ++x) {
      const double px = x + 0.5, py = y + 0.5;
      const double t = 0.55 * coarse.At(px, py) + 0.3 * middle.At(px, py) + 0.15 * fine.At(px, py);
      for (int c = 0; c < 3; ++c) {
        double a = spec.background[0][c], b = spec.background[1][c];
        *out++ = static_cast<uint8_t>(std::lround(a + t * (b - a)));
      }
    }
  }
}

bool ClipRenderer::Inside(double u, double v) const {
  if (spec_.shape == ShapeKind::kEllipse) {
    double w = v / spec_.shape_param;
    return u * u + w * w <= 1.0;
  }
  // Even-odd crossing test.
  bool inside = false;
  const size_t n = polygon_.size() / 2;
  for (size_t i = 0, j = n - 1; i < n; j = i++) {
    double xi = polygon_[2 * i], yi = polygon_[2 * i + 1];
    double xj = polygon_[2 * j], yj = polygon_[2 * j + 1];
    if ((yi > v) != (yj > v) && u < (xj - xi) * (v - yi) / (yj - yi) + xi) inside = !inside;
  }
  return inside;
}

ClipRenderer::Cover ClipRenderer::CoverageOf(const ShapeState& s) const {
  Cover cover;
  const double r = s.radius;
  cover.x0 = std::max(0, static_cast<int>(std::floor(s.x - r - 1)));
  cover.y0 = std::max(0, static_cast<int>(std::floor(s.y - r - 1)));
  int x1 = std::min(spec_.width, static_cast<int>(std::ceil(s.x + r + 1)));
  int y1 = std::min(spec_.height, static_cast<int>(std::ceil(s.y + r + 1)));
  cover.w = std::max(0, x1 - cover.x0);
  cover.h = std::max(0, y1 - cover.y0);
  cover.alpha.assign(static_cast<size_t>(cover.w) * cover.h, 0.0f);

  const double cos_a = std::cos(s.angle), sin_a = std::sin(s.angle);
  const int n = spec_.antialias ? kSupersample : 1;
  const double half_diagonal = 0.7072;  // a pixel's centre to its corners
  const double outer = r + half_diagonal, inner = inner_radius_ * r - half_diagonal;
  for (int j = 0; j < cover.h; ++j) {
    for (int i = 0; i < cover.w; ++i) {
      const double px = cover.x0 + i + 0.5, py = cover.y0 + j + 0.5;
      const double d = std::hypot(px - s.x, py - s.y);
      float& alpha = cover.alpha[static_cast<size_t>(j) * cover.w + i];
      if (d >= outer) continue;
      if (d <= inner) {
        alpha = 1.0f;
        continue;
      }
      int hits = 0;
      for (int b = 0; b < n; ++b) {
        const double dy = cover.y0 + j + (b + 0.5) / n - s.y;
        for (int a = 0; a < n; ++a) {
          const double dx = cover.x0 + i + (a + 0.5) / n - s.x;
          // Into the unit shape's frame: undo the rotation, then the scale.
          const double u = (dx * cos_a + dy * sin_a) / r;
          const double v = (-dx * sin_a + dy * cos_a) / r;
          hits += Inside(u, v);
        }
      }
      alpha = static_cast<float>(hits) / static_cast<float>(n * n);
    }
  }
  return cover;
}

media::Frame ClipRenderer::Render(int t) const {
  REEL_CHECK(t >= 0 && t < spec_.num_frames);
  media::Frame frame;
  frame.width = spec_.width;
  frame.height = spec_.height;
  frame.format = media::PixelFormat::kRgb24;
  frame.data = background_;
  frame.index = t;
  frame.timestamp_s = static_cast<double>(t) / spec_.fps;

  const Cover cover = CoverageOf(spec_.StateAt(t));
  for (int j = 0; j < cover.h; ++j) {
    for (int i = 0; i < cover.w; ++i) {
      const float alpha = cover.alpha[static_cast<size_t>(j) * cover.w + i];
      if (alpha == 0.0f) continue;
      uint8_t* p = frame.Pixel(cover.x0 + i, cover.y0 + j);
      for (int c = 0; c < 3; ++c) {
        p[c] = static_cast<uint8_t>(std::lround(p[c] + alpha * (double(spec_.color[c]) - p[c])));
      }
    }
  }

  if (spec_.noise > 0) {
    // Uniform integers in [-noise, noise], eight per 64-bit draw; a fresh stream per frame.
    Rng rng(Mix64(spec_.clip_seed ^ Mix64(0xa54ff53a5f1d36f1ull + static_cast<uint64_t>(t))));
    const uint32_t span = 2 * static_cast<uint32_t>(spec_.noise) + 1;
    uint64_t bits = 0;
    int left = 0;
    for (uint8_t& byte : frame.data) {
      if (left == 0) {
        bits = rng.Next();
        left = 8;
      }
      int delta = static_cast<int>(((bits & 0xff) * span) >> 8) - spec_.noise;
      bits >>= 8;
      --left;
      byte = static_cast<uint8_t>(std::clamp(byte + delta, 0, 255));
    }
  }
  return frame;
}

media::Frame ClipRenderer::Mask(int t) const {
  REEL_CHECK(t >= 0 && t < spec_.num_frames);
  media::Frame mask = media::Frame::Make(spec_.width, spec_.height, media::PixelFormat::kGray8);
  mask.index = t;
  mask.timestamp_s = static_cast<double>(t) / spec_.fps;
  const Cover cover = CoverageOf(spec_.StateAt(t));
  for (int j = 0; j < cover.h; ++j) {
    for (int i = 0; i < cover.w; ++i) {
      mask.data[static_cast<size_t>(cover.y0 + j) * spec_.width + cover.x0 + i] =
          static_cast<uint8_t>(
              std::lround(255.0f * cover.alpha[static_cast<size_t>(j) * cover.w + i]));
    }
  }
  return mask;
}

std::vector<media::Frame> RenderClip(const ClipSpec& spec) {
  ClipRenderer renderer(spec);
  std::vector<media::Frame> frames;
  frames.reserve(static_cast<size_t>(spec.num_frames));
  for (int t = 0; t < spec.num_frames; ++t) frames.push_back(renderer.Render(t));
  return frames;
}

}  // namespace reel::datagen
