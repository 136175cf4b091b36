// From a stored clip (uint8 frames) to the training input: temporal sampling (random, uniform or
// centre clips, several per video for evaluation) and spatial transforms (random resized crop
// and horizontal flip for training; resize and centre crop for evaluation; normalisation).
// Random choices come from a generator the caller seeds per sample, so a sample's result does
// not depend on which thread made it.
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/random.h"
#include "base/status.h"

namespace reel::loader {

// Frames as stored: T x H x W x C, uint8, C = 3 (RGB). A string, so that a decoded frames
// payload becomes a stack without a copy.
struct FrameStack {
  int t = 0, h = 0, w = 0, c = 3;
  std::string pixels;
};

enum class ClipSampling { kRandom, kUniform, kCenter };

struct ClipOptions {
  int frames = 8;  // frames per clip
  int stride = 1;  // stored frames between consecutive clip frames
  ClipSampling sampling = ClipSampling::kRandom;
  int clips_per_video = 1;  // > 1 for multi-clip evaluation (uniform spacing)
};

struct TransformOptions {
  bool train = true;  // random resized crop + flip; otherwise resize short side + centre crop
  int size = 112;     // output height and width
  double min_scale = 0.25, max_scale = 1.0;         // crop area as a fraction of the frame
  double min_ratio = 3.0 / 4, max_ratio = 4.0 / 3;  // crop aspect ratio
  bool flip = true;       // horizontal flip with probability 1/2 (train only)
  bool reverse = false;   // time reversal with probability 1/2 (train only)
  bool normalize = true;  // float output (x / 255 - mean) / std; otherwise uint8 output
  std::array<float, 3> mean = {0.43216f, 0.394666f, 0.37645f};  // Kinetics, as torchvision
  std::array<float, 3> std = {0.22803f, 0.22145f, 0.216989f};
};

// Starting frame of each clip (clips_per_video of them); clips longer than the stack repeat
// its last frame. InvalidArgument for non-positive options.
Result<std::vector<int>> ClipStarts(int stored_frames, const ClipOptions& clip, Rng& rng);

// The mirror and time reversal of one training sample, drawn once per sample so that all its
// clips, and its label, agree. Neither for evaluation or when its option is off.
struct Flips {
  bool mirror = false;
  bool reverse = false;
};
Flips DrawFlips(const TransformOptions& transform, Rng& rng);

// Values in one transformed clip: 3 x frames x size x size.
int64_t ClipValues(const ClipOptions& clip, const TransformOptions& transform);

// One clip, transformed, as C x T x H x W (the layout video models take), written to the
// ClipValues() values at `out_f32` (normalised) or `out_u8` (the other may be null), so several
// clips and samples can go straight into one batch. The resampling runs 8 pixels at a time where
// the CPU has AVX2, with the same result, bit for bit, as one at a time.
Status MakeClipInto(const FrameStack& stack, int start, const ClipOptions& clip,
                    const TransformOptions& transform, Flips flips, Rng& rng, float* out_f32,
                    uint8_t* out_u8);

// MakeClipInto, appended to `out_f32` or `out_u8` (the other is left alone).
Status MakeClip(const FrameStack& stack, int start, const ClipOptions& clip,
                const TransformOptions& transform, Flips flips, Rng& rng,
                std::vector<float>* out_f32, std::vector<uint8_t>* out_u8);

}  // namespace reel::loader
