// datagen: a synthetic, labelled action-recognition dataset of real H.264 MP4 files, for the
// demo, the tests and accuracy checks of everything downstream (ingest, loader, training).
//
// Each video shows one filled shape (square, triangle, star, cross or ellipse) of a random
// colour over a per-video random smooth texture with fresh per-frame noise. The class is the
// shape's motion — MoveLeft, MoveRight, MoveUp, MoveDown, RotateClockwise,
// RotateCounterClockwise, Grow, Shrink — and only the motion: the four state variables of the
// shape (centre x, centre y, angle, size) are drawn so that a frame taken at a uniformly random
// time of a video has the SAME distribution whatever the class. Concretely, every video first
// samples a latent straight-line trajectory for each of the four variables, with class-free
// distributions (random speed, start, length; a trajectory never leaves the frame); the class
// then picks one variable to animate (forwards or played backwards, by the sign of the class)
// and freezes each other variable at its value at an independent uniformly random frame. Frame
// times being i.i.d. uniform for every variable, the joint law of a random frame's state is the
// same for every class. Telling the classes apart needs at least two frames.
//
// Contrast polarity: by default the shape is brighter than its background in every channel
// (background channels in [0, 120], shape channels in [150, 255]; colours still random and
// class-free). With random polarity (`Polarity::kAny`, colours anywhere in the RGB cube) the
// direction of motion is a product of two signs — the sign of the temporal change and the sign
// of the shape's contrast — which small 3D CNNs trained from scratch do not find: on 600 clips a
// plain PyTorch 3D CNN stayed at chance even for MoveLeft against MoveRight, and learned the
// same task within one epoch once polarity was fixed. kAny is kept as a harder benchmark.
//
// Caveat, inherent in bounded motion: the law of the FIRST (or last) frame does depend on the
// class — a MoveRight video tends to start left of centre — since a shape that moves
// monotonically while staying in the frame cannot have the same position law at its start and
// at its end. Measured at the defaults (datagen_test): a 15-nearest-neighbour classifier on
// single-frame statistics (centroid, area, mean colour, angle, size, shape) scores 0.12 on a
// random frame (chance: 0.125) but 0.36 on frame 0. Loaders should sample clips at random
// offsets, as they do for real data; a clip that starts at frame 0 carries this bias.
//
// Layout written by GenerateDataset under `prefix` (UCF101's, so `reel ingest` reads it like
// the real thing):
//   <prefix>/<ClassName>/<ClassName>_<NNNNN>.mp4   NNNNN = the video's index within its class,
//                                                   from 00000, zero-padded to 5 digits
//   <prefix>/classInd.txt      "1 MoveLeft\n2 MoveRight\n..." (1-based, dataset class order)
//   <prefix>/trainlist01.txt   "MoveLeft/MoveLeft_00000.mp4 1\n..."
//   <prefix>/testlist01.txt    "MoveLeft/MoveLeft_00017.mp4\n..."
// Lines end in "\n" (UCF101's own files use "\r\n"; readers should accept both). The three
// text files are written after every video, so their presence marks a complete dataset.
//
// Determinism: video k of class c is a pure function of (options, seed, c, k): its per-video
// seed is a hash of those, never a shared random stream, so the bytes of every file are the
// same whatever the thread count or the order of generation, as long as the encoder is
// deterministic (media::VideoEncoder with threads = 1 must be; datagen_test checks it). The random
// numbers are our own (SplitMix64 and explicit transforms), not <random>'s distributions, so they
// are the same with every standard library; the geometry uses libm (sin, cos, exp), so another libm
// could move a rare edge sample.
//
// Thread-safety: the free functions are reentrant; ClipRenderer objects are single-threaded
// values (distinct renderers may run concurrently).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "media/frame.h"
#include "storage/object_store.h"

namespace reel::datagen {

// The motion classes, in their canonical order (a dataset with N classes uses the first N).
enum class Motion {
  kMoveLeft,
  kMoveRight,
  kMoveUp,
  kMoveDown,
  kRotateClockwise,  // clockwise as seen on screen
  kRotateCounterClockwise,
  kGrow,
  kShrink,
};
inline constexpr int kNumMotions = 8;

// "MoveLeft", "MoveRight", "MoveUp", "MoveDown", "RotateClockwise", "RotateCounterClockwise",
// "Grow", "Shrink".
std::string_view MotionName(Motion motion);
// The inverse of MotionName (exact, case-sensitive); nullopt for unknown names.
std::optional<Motion> MotionFromName(std::string_view name);
// All motions in canonical order.
const std::vector<Motion>& AllMotions();

enum class Polarity { kBrightOnDark, kAny };
std::string_view PolarityName(Polarity polarity);  // "bright-on-dark", "any"
std::optional<Polarity> PolarityFromName(std::string_view name);

enum class ShapeKind { kSquare, kTriangle, kStar, kCross, kEllipse };
inline constexpr int kNumShapeKinds = 5;
std::string_view ShapeKindName(ShapeKind kind);

struct DatagenOptions {
  // Classes: `class_names` when non-empty (each a MotionName, no repeats, in the order given:
  // that order defines the 1-based class indices), else the first `num_classes` motions.
  int num_classes = kNumMotions;
  std::vector<std::string> class_names;
  int videos_per_class = 20;
  // Per class, indices [0, round(train_fraction * videos_per_class)) go to trainlist01.txt and
  // the rest to testlist01.txt. In [0, 1].
  double train_fraction = 0.75;
  int width = 128;      // 16..4096
  int height = 128;     // 16..4096
  int fps = 25;         // 1..240; only the container's time base, motion is per frame
  int min_frames = 24;  // each video's length is uniform in [min_frames, max_frames]; >= 2
  int max_frames = 48;
  uint64_t seed = 1;
  // Per-frame noise: uniform in [-noise, +noise] levels added to every channel. 0..64.
  int noise = 8;
  Polarity polarity = Polarity::kBrightOnDark;  // see the top of this file
  bool antialias = true;                        // 4x4 supersampling of the shape's edges
  // Encoding (media::EncoderOptions): quality 0..51, keyframe interval (0 = libx264 default).
  int crf = 23;
  int gop = 0;
  std::string preset = "veryfast";
  bool show_progress = true;  // progress bar on stderr (only when stderr is a terminal)
};

// Checks every field; InvalidArgument naming the first bad one.
Status ValidateOptions(const DatagenOptions& options);
// The dataset's classes, in class-index order. Errors: as ValidateOptions.
Result<std::vector<Motion>> ResolveClasses(const DatagenOptions& options);

// The shape's state in one frame, in pixel units of the frame.
struct ShapeState {
  double x = 0;       // centre, pixels from the left edge (pixel centres at i + 0.5)
  double y = 0;       // centre, pixels from the top edge
  double angle = 0;   // radians; increasing angle turns the shape clockwise on screen
  double radius = 0;  // circumradius: no point of the shape is farther than this from the centre
};

// Everything that determines one video; a plain value. Built by SampleClip; tests may edit it.
struct ClipSpec {
  Motion motion = Motion::kMoveLeft;
  int index = 0;           // within its class
  uint64_t clip_seed = 0;  // the per-video seed (textures, per-frame noise)
  int width = 0;
  int height = 0;
  int fps = 25;
  int num_frames = 0;

  ShapeKind shape = ShapeKind::kSquare;
  double shape_param = 0;  // star: inner/outer radius ratio; ellipse: minor/major axis ratio
  uint8_t color[3] = {0, 0, 0};
  uint8_t background[2][3] = {{0, 0, 0}, {0, 0, 0}};  // the texture blends these two colours
  double texture_scale = 0;  // pixels per cell of the texture's coarse octave
  int noise = 0;
  bool antialias = true;

  // The trajectory: state(t) = start + t * velocity (radius: log-linear), t = 0..num_frames-1.
  // Exactly one component of `velocity` is non-zero, the one the motion animates.
  ShapeState start;
  double vx = 0, vy = 0, omega = 0, growth = 0;  // px/frame, px/frame, rad/frame, ln(r)/frame

  ShapeState StateAt(int t) const;
};

// The per-video seed: a hash of (seed, motion, index). Different for every argument change.
uint64_t ClipSeed(uint64_t seed, Motion motion, int index);

// Samples the video `index` of `motion`. Uses width, height, fps, min/max_frames, noise and
// antialias of `options` (which must be valid: asserted).
ClipSpec SampleClip(uint64_t seed, Motion motion, int index, const DatagenOptions& options);

// Renders the frames of one clip, one at a time (the background texture is computed once).
class ClipRenderer {
 public:
  explicit ClipRenderer(const ClipSpec& spec);
  const ClipSpec& spec() const { return spec_; }
  // RGB24 frame t (0 <= t < num_frames, asserted), with index and timestamp_s set.
  media::Frame Render(int t) const;
  // GRAY8: the shape's coverage of every pixel in frame t, 0..255 (no background, no noise).
  media::Frame Mask(int t) const;

 private:
  // The shape's coverage (0..1) of the pixels of a box around it; pixels outside are 0.
  struct Cover {
    int x0 = 0, y0 = 0, w = 0, h = 0;  // the box, clipped to the frame
    std::vector<float> alpha;          // w * h, row-major
  };
  Cover CoverageOf(const ShapeState& state) const;
  bool Inside(double u, double v) const;  // in the unit shape (circumradius 1, angle 0)?

  ClipSpec spec_;
  std::vector<uint8_t> background_;  // RGB24, width x height
  std::vector<double> polygon_;      // unit shape's vertices (x, y pairs); empty for ellipse
  double inner_radius_ = 0;          // unit shape contains the disc of this radius
};

// Every frame of a clip.
std::vector<media::Frame> RenderClip(const ClipSpec& spec);

struct DatagenVideo {
  std::string key;            // "<prefix>/MoveLeft/MoveLeft_00003.mp4" (no prefix: no leading '/')
  std::string relative_path;  // "MoveLeft/MoveLeft_00003.mp4", as in the split lists
  int class_index = 0;        // 1-based, as classInd.txt
  Motion motion = Motion::kMoveLeft;
  int index = 0;
  int num_frames = 0;
  uint64_t bytes = 0;
  bool train = false;
};

struct DatagenReport {
  std::vector<Motion> classes;       // class index i+1 is classes[i]
  std::vector<DatagenVideo> videos;  // class-major, then index order
  int num_train = 0;
  int num_test = 0;
  uint64_t total_frames = 0;
  uint64_t total_bytes = 0;  // of the MP4 files
  double seconds = 0;        // wall time of GenerateDataset
};

// Renders, encodes (H.264 in MP4, media::VideoEncoder with one thread each) and writes every
// video with `threads` workers (0 = one per core), then writes classInd.txt, trainlist01.txt
// and testlist01.txt. `prefix` may be "" (the store's root) and may end in '/'.
// Errors: InvalidArgument (options, or a prefix that makes bad keys); the encoder's errors
// (Unavailable when FFmpeg has no libx264, Internal); the store's errors from Put. On an error
// the remaining videos are skipped, objects already written stay, the text files are not
// written, and the first error in video order is returned with the video's key as context.
Result<DatagenReport> GenerateDataset(storage::ObjectStore& out, const std::string& prefix,
                                      const DatagenOptions& options, int threads = 0);

// The contents of the three text files for a list of videos (as GenerateDataset writes them).
std::string ClassIndText(const std::vector<Motion>& classes);
std::string TrainListText(const std::vector<DatagenVideo>& videos);
std::string TestListText(const std::vector<DatagenVideo>& videos);

}  // namespace reel::datagen
