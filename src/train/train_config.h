// The training job's configuration, read from YAML and validated as a whole before anything
// runs. Every section and key is checked (a typo is an error naming file, line and key):
//
//   run_dir: runs/synthetic       # local folder for metrics.jsonl and eval reports
//   seed: 0                       # weights, data order, augmentation
//   threads: 2                    # LibTorch intra-op threads (0: LibTorch's default)
//   device: auto                  # auto (cuda when present), cpu, cuda, cuda:N
//   model: {name: r2plus1d, num_classes: 8, width: 16, layers: [1, 1, 1, 1]}  # model_zoo.h
//   data:
//     dataset: reel-data/datasets/synthetic   # dataset root URI (local, file://, s3://)
//     cache_dir: ""               # read-through cache for remote datasets
//     train_split: train
//     val_split: test
//     batch_size: 8               # per optimiser micro-step
//     workers: 2                  # loader decode threads
//     clip_frames: 8
//     frame_stride: 1
//     size: 112                   # crop height and width
//     min_scale: 0.25             # random resized crop: smallest area fraction
//     flip: true                  # horizontal flips with probability 1/2
//     flip_pairs: []              # classes a flip turns into each other: [[MoveLeft, MoveRight]]
//     reverse: false              # time reversal with probability 1/2
//     reverse_pairs: []           # classes it turns into each other: [[Grow, Shrink]]
//     eval_clips: 1               # clips per video at evaluation (uniformly spaced)
//   optimizer:
//     name: sgd                   # sgd or adamw
//     lr: 0.1                     # peak learning rate, after warmup
//     momentum: 0.9               # sgd
//     nesterov: false             # sgd
//     weight_decay: 1.0e-4
//     betas: [0.9, 0.999]         # adamw
//     eps: 1.0e-8                 # adamw
//     decay_norm_and_bias: false  # weight decay on batch-norm weights and biases too
//   schedule:
//     warmup_epochs: 0            # or warmup_steps
//     min_lr: 0
//   train:
//     epochs: 10                  # or max_steps (optimiser steps)
//     grad_accum: 1               # micro-batches per optimiser step
//     clip_grad_norm: 0           # 0: no clipping
//     label_smoothing: 0
//     amp: auto                   # auto (fp16 on CUDA; bf16 on a CPU with AVX512-BF16 or AMX,
//                                 # else fp32), off, fp16 (CUDA), bf16 (CUDA or CPU)
//     log_every: 10               # steps between metrics lines
//     eval_every_epochs: 1        # 0: evaluate only at the end
//     log_samples: false          # each rank writes the keys of every batch it trains on to
//                                 # <run_dir>/samples-rank<R>.jsonl (which clips made a step)
//   checkpoint:
//     uri: ""                     # any store URI; "" = <run_dir>/checkpoints
//     every_steps: 100            # 0: only at the end
//     keep: 3                     # newest checkpoints kept
//   dist:                         # data-parallel training (reel train --nproc, torchrun, srun)
//     bucket_cap_mb: 25           # gradient bucket size
//     first_bucket_mb: 1          # the first bucket, small so communication starts early
//     compression: none           # none, fp16, bf16: gradients on the wire
//     broadcast_buffers: true     # rank 0's buffers (batch-norm statistics) before each forward
//     timeout_s: 60               # watchdog: a collective slower than this fails naming the rank
//     connect_timeout_s: 300      # for every rank to join
//     iface: ""                   # network interface for collectives ("" = see parallel/comm.h)
//   parallel:                     # how the processes of a job split the work (`parallel: auto`
//                                 # is short for {pipeline_stages: auto}, the default)
//     pipeline_stages: auto       # S > 1: the model cut into S stages by measured layer cost;
//                                 # the world is world/S data-parallel replicas of an S-stage
//                                 # pipeline (parallel/mesh.h); checkpoints are sharded by stage.
//                                 # auto: parallel/planner.h picks S from the model's measured
//                                 costs, # the workers' memory and the link's measured speed, and
//                                 logs why
//     micro_batches: 4            # per pipeline step (data.batch_size is split into them)
//     schedule: 1f1b              # gpipe or 1f1b
//     worker_memory_mb: 0         # auto's memory per process (0: the machine's / its processes)
//     parameter_servers: 0        # K > 0: K server processes hold the model's state (split by
//                                 # size) and run the optimiser; `--nproc N` workers pull before
//                                 # and push gradients after each step (parallel/ps_server.h);
//                                 # no pipeline stages then; servers hold their shard in host
//                                 # memory, workers train on any device
//     sync: bsp                   # bsp: every step waits for all workers (the update equals data
//                                 # parallel's); ssp: gradients apply as they arrive
//     staleness: 0                # ssp: how many steps a worker may run ahead of the slowest
//
// data.batch_size is per process, as in PyTorch DDP: a step sees batch_size x grad_accum x
// world size clips.
//
// Errors: InvalidArgument naming file:line:col and the key; NotFound for a missing config file.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "loader/loader.h"
#include "models/model_spec.h"

namespace reel::train {

enum class OptimizerKind { kSgd, kAdamW };
enum class AmpMode { kAuto, kOff, kFp16, kBf16 };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kSgd;
  double lr = 0.1;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 1e-4;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  bool decay_norm_and_bias = false;
};

struct DataConfig {
  std::string dataset;
  std::string cache_dir;
  std::string train_split = "train";
  std::string val_split = "test";
  int batch_size = 8;
  int workers = 2;
  int clip_frames = 8;
  int frame_stride = 1;
  int size = 112;
  double min_scale = 0.25;
  bool flip = true;
  std::vector<std::pair<std::string, std::string>> flip_pairs;
  bool reverse = false;
  std::vector<std::pair<std::string, std::string>> reverse_pairs;
  int eval_clips = 1;
};

// Where a finished run registers its model (registry/registry.h): `registry.model` names it,
// `registry.uri` is the registry (a folder or postgresql://; "" = $REEL_REGISTRY_URI, else
// reel-data/registry), with `registry.chunks` for a PostgreSQL registry's weights.
struct RegistryConfig {
  std::string uri, chunks;
  std::string model;  // "" = do not register
  std::string branch = "main";
  std::vector<std::string> aliases;  // pointed at the registered version
  bool with_optimizer = false;
  // Also keep the checkpoint with the best validation top-1 of the run's evaluations (under
  // <checkpoint.uri>/best/) and register it before the final one, with `best_alias` on it.
  bool best = false;
  std::string best_alias = "best";
};

struct DistConfig {
  double bucket_cap_mb = 25;
  double first_bucket_mb = 1;
  std::string compression = "none";
  bool broadcast_buffers = true;
  double timeout_s = 60;
  double connect_timeout_s = 300;
  std::string iface;
};

struct ParallelConfig {
  bool auto_stages = true;  // pipeline_stages: auto
  int pipeline_stages = 1;  // when not auto
  double worker_memory_mb = 0;
  int micro_batches = 4;
  std::string schedule = "1f1b";
  // Parameter servers (parallel/ps_server.h): > 0 runs this many server processes besides the
  // workers (`--nproc` counts workers); no pipeline stages then.
  int parameter_servers = 0;
  std::string sync = "bsp";  // bsp: every step waits for all workers; ssp: bounded staleness
  int staleness = 0;         // ssp: a worker may run this many steps ahead of the slowest
};

struct TrainConfig {
  std::string source_text;  // the YAML as read, saved into every checkpoint
  std::string run_dir = "runs/default";
  uint64_t seed = 0;
  int threads = 0;
  std::string device = "auto";
  models::ModelSpec model;
  // model.init: the weights to start from (a fine-tune): a registry URI (models:/NAME@ALIAS, ...;
  // that version becomes the registered version's parent) or a .safetensors file. Only a fresh
  // run reads it; a resumed one continues from its checkpoint.
  std::string model_init;
  DataConfig data;
  OptimizerConfig optimizer;
  int64_t warmup_epochs = 0;  // one of warmup_epochs / warmup_steps is used
  int64_t warmup_steps = -1;
  double min_lr = 0;
  int64_t epochs = 10;  // one of epochs / max_steps bounds the run
  int64_t max_steps = -1;
  int grad_accum = 1;
  double clip_grad_norm = 0;
  double label_smoothing = 0;
  AmpMode amp = AmpMode::kAuto;
  int64_t log_every = 10;
  int64_t eval_every_epochs = 1;
  bool log_samples = false;
  std::string checkpoint_uri;  // resolved: never "" after parsing
  int64_t checkpoint_every_steps = 100;
  int checkpoint_keep = 3;
  DistConfig dist;
  ParallelConfig parallel;
  RegistryConfig registry;

  // Loader options for the training split, for `rank` of `world_size`.
  loader::LoaderOptions TrainLoaderOptions(int world_size = 1, int rank = 0) const;
  // Loader options for evaluation on `split` (centre or multi-clip, no augmentation).
  loader::LoaderOptions EvalLoaderOptions(const std::string& split) const;
};

Result<TrainConfig> ParseTrainConfig(const ConfigNode& root);
Result<TrainConfig> LoadTrainConfig(const std::string& path);
// `text` as a config; `source_name` stands in for the file name in errors.
Result<TrainConfig> ParseTrainConfigText(const std::string& text, const std::string& source_name);

// `text` with "dotted.key=value" overrides applied (values parsed as YAML scalars or flow
// collections, e.g. "train.max_steps=20", "model.layers=[1,1,1,1]"). InvalidArgument for an
// override without '=', an empty key, or a key whose parent is not a map.
Result<std::string> ApplyConfigOverrides(const std::string& text,
                                         const std::vector<std::string>& overrides);

}  // namespace reel::train
