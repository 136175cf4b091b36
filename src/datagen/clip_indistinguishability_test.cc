// The property the dataset exists for: no single frame tells the classes apart (KS tests and a
// k-NN classifier on single-frame statistics), two frames always do (a mask-only motion estimate).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/random.h"
#include "datagen/clip_test_util.h"
#include "datagen/datagen.h"
#include "media/frame.h"

namespace reel::datagen {
namespace {

using testing::MaskMoments;
using testing::Moments;

// Two-sample Kolmogorov-Smirnov statistic.
double KsStatistic(std::vector<double> a, std::vector<double> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  size_t i = 0, j = 0;
  double d = 0;
  while (i < a.size() && j < b.size()) {
    double x = std::min(a[i], b[j]);
    while (i < a.size() && a[i] <= x) ++i;
    while (j < b.size() && b[j] <= x) ++j;
    d = std::max(d, std::abs(double(i) / a.size() - double(j) / b.size()));
  }
  return d;
}
// The KS statistic's critical value at significance 1e-5 per comparison, so that the 72
// comparisons below together have a false-alarm rate below 1e-3 (Bonferroni): a change that
// merely reshuffles random draws will not trip them, a real dependence on the class will.
double KsCritical(size_t n, size_t m) {
  const double c = std::sqrt(-std::log(1e-5 / 2) / 2);  // 2.42
  return c * std::sqrt(double(n + m) / (double(n) * m));
}

// Box blur (radius 2, twice ~ a Gaussian of sigma 1.6) of a GRAY8 mask, as floats in [0, 1].
std::vector<double> Blur(const media::Frame& mask) {
  const int w = mask.width, h = mask.height, r = 2;
  std::vector<double> a(mask.data.size()), b(mask.data.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = mask.data[i] / 255.0;
  for (int pass = 0; pass < 2; ++pass) {
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        double s = 0;
        for (int d = -r; d <= r; ++d)
          s += a[static_cast<size_t>(y) * w + std::clamp(x + d, 0, w - 1)];
        b[static_cast<size_t>(y) * w + x] = s / (2 * r + 1);
      }
    }
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        double s = 0;
        for (int d = -r; d <= r; ++d)
          s += b[static_cast<size_t>(std::clamp(y + d, 0, h - 1)) * w + x];
        a[static_cast<size_t>(y) * w + x] = s / (2 * r + 1);
      }
    }
  }
  return a;
}

// A two-frame motion estimate from masks alone (no knowledge of the spec): least-squares
// optical flow restricted to the four motions, v(p) = (vx, vy) + omega * (-ry, rx) + g * (rx, ry)
// with r = p - centroid, from brightness constancy on blurred masks.
struct Motion4 {
  double vx = 0, vy = 0, omega = 0, growth = 0;
};
Motion4 EstimateMotionIn(const media::Frame& m0, const media::Frame& m1);

// The box around both masks' non-zero pixels plus a margin for the blur, as two GRAY8 frames.
std::pair<media::Frame, media::Frame> CropToShapes(const media::Frame& m0, const media::Frame& m1) {
  int x0 = m0.width, y0 = m0.height, x1 = 0, y1 = 0;
  for (int y = 0; y < m0.height; ++y) {
    for (int x = 0; x < m0.width; ++x) {
      size_t i = static_cast<size_t>(y) * m0.width + x;
      if (m0.data[i] || m1.data[i]) {
        x0 = std::min(x0, x), y0 = std::min(y0, y), x1 = std::max(x1, x + 1),
        y1 = std::max(y1, y + 1);
      }
    }
  }
  const int margin = 8;
  x0 = std::max(0, x0 - margin), y0 = std::max(0, y0 - margin);
  x1 = std::min(m0.width, x1 + margin), y1 = std::min(m0.height, y1 + margin);
  auto crop = [&](const media::Frame& m) {
    media::Frame out = media::Frame::Make(x1 - x0, y1 - y0, media::PixelFormat::kGray8);
    for (int y = y0; y < y1; ++y) {
      for (int x = x0; x < x1; ++x) {
        out.data[static_cast<size_t>(y - y0) * out.width + (x - x0)] =
            m.data[static_cast<size_t>(y) * m.width + x];
      }
    }
    return out;
  };
  return {crop(m0), crop(m1)};
}

Motion4 EstimateMotion(const media::Frame& m0, const media::Frame& m1) {
  auto [c0, c1] = CropToShapes(m0, m1);  // translation-invariant: the estimate is unchanged
  return EstimateMotionIn(c0, c1);
}

Motion4 EstimateMotionIn(const media::Frame& m0, const media::Frame& m1) {
  const int w = m0.width, h = m0.height;
  const std::vector<double> b0 = Blur(m0), b1 = Blur(m1);
  const Moments c0 = MaskMoments(m0), c1 = MaskMoments(m1);
  const double cx = (c0.cx + c1.cx) / 2, cy = (c0.cy + c1.cy) / 2;
  double ata[4][4] = {}, atb[4] = {};
  for (int y = 1; y < h - 1; ++y) {
    for (int x = 1; x < w - 1; ++x) {
      auto avg = [&](int xx, int yy) {
        size_t i = static_cast<size_t>(yy) * w + xx;
        return (b0[i] + b1[i]) / 2;
      };
      const double gx = (avg(x + 1, y) - avg(x - 1, y)) / 2,
                   gy = (avg(x, y + 1) - avg(x, y - 1)) / 2;
      if (gx == 0 && gy == 0) continue;
      const size_t i = static_cast<size_t>(y) * w + x;
      const double dt = b1[i] - b0[i];
      const double rx = x + 0.5 - cx, ry = y + 0.5 - cy;
      const double f[4] = {gx, gy, -gx * ry + gy * rx, gx * rx + gy * ry};
      for (int a = 0; a < 4; ++a) {
        for (int b = 0; b < 4; ++b) ata[a][b] += f[a] * f[b];
        atb[a] -= f[a] * dt;  // dt + f . theta = 0
      }
    }
  }
  // Gaussian elimination with partial pivoting.
  double theta[4];
  for (int col = 0; col < 4; ++col) {
    int pivot = col;
    for (int r = col + 1; r < 4; ++r) {
      if (std::abs(ata[r][col]) > std::abs(ata[pivot][col])) pivot = r;
    }
    std::swap(ata[col], ata[pivot]);
    std::swap(atb[col], atb[pivot]);
    for (int r = col + 1; r < 4; ++r) {
      double f = ata[r][col] / ata[col][col];
      for (int c = col; c < 4; ++c) ata[r][c] -= f * ata[col][c];
      atb[r] -= f * atb[col];
    }
  }
  for (int r = 3; r >= 0; --r) {
    double s = atb[r];
    for (int c = r + 1; c < 4; ++c) s -= ata[r][c] * theta[c];
    theta[r] = s / ata[r][r];
  }
  return {theta[0], theta[1], theta[2], theta[3]};
}

// The motion a two-frame estimate shows: the largest displacement at the shape's boundary.
Motion ClassifyTwoFrames(const Motion4& e, double radius) {
  const double mags[4] = {std::abs(e.vx), std::abs(e.vy), std::abs(e.omega) * radius,
                          std::abs(e.growth) * radius};
  const int best = static_cast<int>(std::max_element(mags, mags + 4) - mags);
  switch (best) {
    case 0:
      return e.vx < 0 ? Motion::kMoveLeft : Motion::kMoveRight;
    case 1:
      return e.vy < 0 ? Motion::kMoveUp : Motion::kMoveDown;
    case 2:
      return e.omega > 0 ? Motion::kRotateClockwise : Motion::kRotateCounterClockwise;
    default:
      return e.growth > 0 ? Motion::kGrow : Motion::kShrink;
  }
}

// Angle modulo the shape's rotational symmetry, as a fraction of the symmetry period.
double SymmetryPhase(const ClipSpec& s, double angle) {
  int order = 2;
  switch (s.shape) {
    case ShapeKind::kSquare:
      order = 4;
      break;
    case ShapeKind::kTriangle:
      order = 3;
      break;
    case ShapeKind::kStar:
      order = 5;
      break;
    case ShapeKind::kCross:
      order = 4;
      break;
    case ShapeKind::kEllipse:
      order = 2;
      break;
  }
  const double period = 2 * M_PI / order;
  double phase = std::fmod(angle, period) / period;
  return phase < 0 ? phase + 1 : phase;
}

// Single-frame statistics, each from one frame at a uniformly random time of its clip:
// from the pixels (mask centroid and area, the frame's mean colour) and from the spec (angle
// within the shape's symmetry period, circumradius, shape kind).
constexpr int kNumStats = 9;
const char* const kStatNames[kNumStats] = {"centroid_x", "centroid_y", "area",   "mean_r", "mean_g",
                                           "mean_b",     "phase",      "radius", "shape"};

// The statistics above for frame t of a clip.
std::array<double, kNumStats> SingleFrameStats(const ClipSpec& s, const ClipRenderer& r, int t) {
  const Moments mo = MaskMoments(r.Mask(t));
  const media::Frame frame = r.Render(t);
  double mean[3] = {0, 0, 0};
  for (size_t i = 0; i < frame.data.size(); ++i) mean[i % 3] += frame.data[i];
  const double pixels = static_cast<double>(frame.width) * frame.height;
  const ShapeState st = s.StateAt(t);
  return {mo.cx,
          mo.cy,
          mo.area,
          mean[0] / pixels,
          mean[1] / pixels,
          mean[2] / pixels,
          SymmetryPhase(s, st.angle),
          st.radius,
          static_cast<double>(s.shape)};
}

// Leave-one-out accuracy of a k-nearest-neighbour classifier over standardised features;
// stats[class][feature][sample].
double KnnLeaveOneOutAccuracy(const std::vector<std::array<std::vector<double>, kNumStats>>& stats,
                              int k) {
  std::vector<std::array<double, kNumStats>> x;
  std::vector<int> label;
  for (size_t c = 0; c < stats.size(); ++c) {
    for (size_t i = 0; i < stats[c][0].size(); ++i) {
      std::array<double, kNumStats> row;
      for (int v = 0; v < kNumStats; ++v) row[v] = stats[c][v][i];
      x.push_back(row);
      label.push_back(static_cast<int>(c));
    }
  }
  for (int v = 0; v < kNumStats; ++v) {
    double mean = 0, var = 0;
    for (const auto& row : x) mean += row[v];
    mean /= x.size();
    for (const auto& row : x) var += (row[v] - mean) * (row[v] - mean);
    const double sd = std::sqrt(var / x.size());
    for (auto& row : x) row[v] = (row[v] - mean) / sd;
  }
  int correct = 0;
  std::vector<std::pair<double, int>> dist(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    for (size_t j = 0; j < x.size(); ++j) {
      double d = 0;
      for (int v = 0; v < kNumStats; ++v) d += (x[i][v] - x[j][v]) * (x[i][v] - x[j][v]);
      dist[j] = {j == i ? 1e300 : d, label[j]};
    }
    std::partial_sort(dist.begin(), dist.begin() + k, dist.end());
    std::vector<int> votes(stats.size(), 0);
    for (int n = 0; n < k; ++n) votes[dist[n].second]++;
    correct += std::max_element(votes.begin(), votes.end()) - votes.begin() == label[i];
  }
  return static_cast<double>(correct) / x.size();
}

TEST(IndistinguishabilityTest, SingleFramesDoNotTellClassesApartTwoFramesDo) {
  DatagenOptions o;  // the defaults: 128x128, 24..48 frames
  const int per_class = 250;
  Rng pick(2024);
  // stats[class][stat] = values over clips
  std::vector<std::array<std::vector<double>, kNumStats>> stats(kNumMotions);
  auto first_frame_stats = stats;  // the same statistics of every clip's frame 0
  int two_frame_correct = 0, two_frame_total = 0;
  std::map<std::pair<int, int>, int> confusion;
  for (int c = 0; c < kNumMotions; ++c) {
    const Motion motion = AllMotions()[c];
    for (int k = 0; k < per_class; ++k) {
      const ClipSpec s = SampleClip(99, motion, k, o);
      ClipRenderer r(s);
      const int t = pick.UniformInt(s.num_frames);
      const auto values = SingleFrameStats(s, r, t);
      const auto first = SingleFrameStats(s, r, 0);
      for (int v = 0; v < kNumStats; ++v) {
        stats[c][v].push_back(values[v]);
        first_frame_stats[c][v].push_back(first[v]);
      }

      // Two consecutive frames, from the masks only.
      const int t0 = pick.UniformInt(s.num_frames - 1);
      const media::Frame m0 = r.Mask(t0), m1 = r.Mask(t0 + 1);
      const double radius = std::sqrt(MaskMoments(m0).area / M_PI);
      const Motion guess = ClassifyTwoFrames(EstimateMotion(m0, m1), radius);
      confusion[{c, static_cast<int>(guess)}]++;
      two_frame_correct += guess == motion;
      ++two_frame_total;
    }
  }

  // 1. Every single-frame statistic has the same distribution in every class: two-sample KS of
  //    each class against the others, and class means within 4.5 standard errors.
  std::printf("single-frame statistics: class means (KS D vs the other classes; critical %.3f)\n",
              KsCritical(per_class, per_class * (kNumMotions - 1)));
  std::printf("%-24s", "class");
  for (const char* name : kStatNames) std::printf(" %16s", name);
  std::printf("\n");
  double max_d = 0, max_z = 0;
  for (int c = 0; c < kNumMotions; ++c) {
    std::printf("%-24s", std::string(MotionName(AllMotions()[c])).c_str());
    for (int v = 0; v < kNumStats; ++v) {
      std::vector<double> rest;
      for (int o2 = 0; o2 < kNumMotions; ++o2) {
        if (o2 != c) rest.insert(rest.end(), stats[o2][v].begin(), stats[o2][v].end());
      }
      const double d = KsStatistic(stats[c][v], rest);
      double mean = 0, mean_rest = 0, var_rest = 0;
      for (double x : stats[c][v]) mean += x;
      mean /= stats[c][v].size();
      for (double x : rest) mean_rest += x;
      mean_rest /= rest.size();
      for (double x : rest) var_rest += (x - mean_rest) * (x - mean_rest);
      var_rest /= rest.size() - 1;
      const double z =
          std::abs(mean - mean_rest) / std::sqrt(var_rest / per_class + var_rest / rest.size());
      max_d = std::max(max_d, d);
      max_z = std::max(max_z, z);
      std::printf(" %9.3f (%.3f)", mean, d);
      EXPECT_LT(d, KsCritical(stats[c][v].size(), rest.size()))
          << MotionName(AllMotions()[c]) << " " << kStatNames[v];
      EXPECT_LT(z, 4.5) << MotionName(AllMotions()[c]) << " " << kStatNames[v];  // p < 1e-5
    }
    std::printf("\n");
  }
  std::printf("largest KS D %.3f, largest |z| of a class mean %.2f\n", max_d, max_z);

  // 1b. Jointly, too: a 15-nearest-neighbour classifier on all the statistics of one frame
  //     (standardised), leave-one-out, stays at chance (1/8); on frame 0 it would not.
  const double knn_accuracy = KnnLeaveOneOutAccuracy(stats, 15);
  std::printf("single-frame 15-NN leave-one-out accuracy: %.3f (chance %.3f)\n", knn_accuracy,
              1.0 / kNumMotions);
  EXPECT_LT(knn_accuracy,
            1.0 / kNumMotions + 4 * std::sqrt(0.125 * 0.875 / (kNumMotions * per_class)));

  // 2. Two frames separate the classes perfectly.
  std::printf("two-frame mask classifier: %d/%d correct\n", two_frame_correct, two_frame_total);
  for (const auto& [cell, count] : confusion) {
    if (cell.first != cell.second) {
      std::printf("  %s taken for %s: %d\n",
                  std::string(MotionName(AllMotions()[cell.first])).c_str(),
                  std::string(MotionName(static_cast<Motion>(cell.second))).c_str(), count);
    }
  }
  EXPECT_EQ(two_frame_correct, two_frame_total);

  // 3. The same checks see a difference when there is one: the FIRST frame's state does depend
  //    on the direction of motion (the caveat in datagen.h), and both KS and k-NN notice.
  const double d_first = KsStatistic(first_frame_stats[0][0], first_frame_stats[1][0]);
  std::printf("frame 0 centroid x, MoveLeft vs MoveRight: KS D %.3f (critical %.3f)\n", d_first,
              KsCritical(per_class, per_class));
  EXPECT_GT(d_first, KsCritical(per_class, per_class));
  const double knn_first = KnnLeaveOneOutAccuracy(first_frame_stats, 15);
  std::printf("frame-0 15-NN leave-one-out accuracy: %.3f\n", knn_first);
  EXPECT_GT(knn_first, 0.25);
}

}  // namespace
}  // namespace reel::datagen
