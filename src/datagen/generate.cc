// GenerateDataset: render, encode and store every video in parallel, then the UCF101 lists.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <future>

#include "base/progress.h"
#include "base/thread_pool.h"
#include "datagen/datagen.h"
#include "media/encoder.h"

namespace reel::datagen {
namespace {

// Renders and encodes one video; returns the MP4 file's bytes.
Result<std::string> EncodeClip(const ClipSpec& spec, const DatagenOptions& options) {
  media::EncoderOptions encoder_options;
  encoder_options.width = spec.width;
  encoder_options.height = spec.height;
  encoder_options.fps_num = spec.fps;
  encoder_options.fps_den = 1;
  encoder_options.gop = options.gop;
  encoder_options.crf = options.crf;
  encoder_options.preset = options.preset;
  encoder_options.threads = 1;  // parallel over videos; also what makes the bytes deterministic
  encoder_options.container = "mp4";
  REEL_ASSIGN_OR_RETURN(auto encoder, media::VideoEncoder::Create(encoder_options));
  ClipRenderer renderer(spec);
  for (int t = 0; t < spec.num_frames; ++t) {
    REEL_RETURN_IF_ERROR(encoder->Add(renderer.Render(t)));
  }
  return encoder->Finish();
}

}  // namespace

std::string ClassIndText(const std::vector<Motion>& classes) {
  std::string text;
  for (size_t i = 0; i < classes.size(); ++i) {
    text += std::to_string(i + 1) + " " + std::string(MotionName(classes[i])) + "\n";
  }
  return text;
}

std::string TrainListText(const std::vector<DatagenVideo>& videos) {
  std::string text;
  for (const auto& video : videos) {
    if (video.train) text += video.relative_path + " " + std::to_string(video.class_index) + "\n";
  }
  return text;
}

std::string TestListText(const std::vector<DatagenVideo>& videos) {
  std::string text;
  for (const auto& video : videos) {
    if (!video.train) text += video.relative_path + "\n";
  }
  return text;
}

Result<DatagenReport> GenerateDataset(storage::ObjectStore& out, const std::string& prefix,
                                      const DatagenOptions& options, int threads) {
  const auto start = std::chrono::steady_clock::now();
  if (threads < 0)
    return InvalidArgumentError("datagen: threads " + std::to_string(threads) + " < 0");
  DatagenReport report;
  REEL_ASSIGN_OR_RETURN(report.classes, ResolveClasses(options));

  std::string dir = prefix;
  while (!dir.empty() && dir.back() == '/') dir.pop_back();
  if (!dir.empty()) dir += '/';
  for (const char* name : {"classInd.txt", "trainlist01.txt", "testlist01.txt"}) {
    REEL_RETURN_IF_ERROR(
        storage::ValidateKey(dir + name).WithContext("datagen: prefix '" + prefix + "'"));
  }

  const int per_class = options.videos_per_class;
  const int train_per_class = static_cast<int>(std::lround(options.train_fraction * per_class));
  for (size_t c = 0; c < report.classes.size(); ++c) {
    const std::string name(MotionName(report.classes[c]));
    for (int k = 0; k < per_class; ++k) {
      DatagenVideo video;
      char number[16];
      std::snprintf(number, sizeof number, "%05d", k);
      video.relative_path = name + "/" + name + "_" + number + ".mp4";
      video.key = dir + video.relative_path;
      video.class_index = static_cast<int>(c) + 1;
      video.motion = report.classes[c];
      video.index = k;
      video.train = k < train_per_class;
      report.videos.push_back(std::move(video));
    }
  }

  {
    Progress progress("datagen", report.videos.size(), Progress::Unit::kItems,
                      options.show_progress);
    std::atomic<bool> failed{false};
    std::vector<std::future<Status>> done;
    done.reserve(report.videos.size());
    // Declared last, destroyed first: every task has finished before what it uses goes away.
    ThreadPool pool(static_cast<size_t>(threads));
    for (auto& video : report.videos) {
      // Each task writes only its own DatagenVideo; the futures order the writes before the
      // reads below.
      done.push_back(pool.Submit([&out, &options, &failed, &progress, &video]() -> Status {
        if (failed.load()) return Status::Ok();  // skipped; the failure is reported below
        const ClipSpec spec = SampleClip(options.seed, video.motion, video.index, options);
        Result<std::string> mp4 = EncodeClip(spec, options);
        Status status = mp4.ok() ? out.Put(video.key, *mp4) : mp4.status();
        if (!status.ok()) {
          failed.store(true);
          return status.WithContext(video.key);
        }
        video.num_frames = spec.num_frames;
        video.bytes = mp4->size();
        progress.Add(1);
        return Status::Ok();
      }));
    }
    Status first_error;
    for (auto& f : done) {
      Status status = f.get();
      if (first_error.ok() && !status.ok()) first_error = std::move(status);
    }
    progress.Finish();
    REEL_RETURN_IF_ERROR(first_error);
  }

  for (const auto& video : report.videos) {
    (video.train ? report.num_train : report.num_test) += 1;
    report.total_frames += static_cast<uint64_t>(video.num_frames);
    report.total_bytes += video.bytes;
  }
  REEL_RETURN_IF_ERROR(out.Put(dir + "classInd.txt", ClassIndText(report.classes)));
  REEL_RETURN_IF_ERROR(out.Put(dir + "trainlist01.txt", TrainListText(report.videos)));
  REEL_RETURN_IF_ERROR(out.Put(dir + "testlist01.txt", TestListText(report.videos)));
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace reel::datagen
