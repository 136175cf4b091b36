#include "train/train_config.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "base/strings.h"

namespace reel::train {
namespace {

// Reads an optional integer child within [lo, hi].
Status ReadInt(const ConfigNode& node, const char* key, int64_t lo, int64_t hi, int64_t* out) {
  REEL_ASSIGN_OR_RETURN(int64_t v, node.GetInt(key, *out));
  if (v < lo || v > hi) {
    return node.Child(key).value().Error("must be in [" + std::to_string(lo) + ", " +
                                         std::to_string(hi) + "]");
  }
  *out = v;
  return Status::Ok();
}

Status ReadInt(const ConfigNode& node, const char* key, int64_t lo, int64_t hi, int* out) {
  int64_t v = *out;
  REEL_RETURN_IF_ERROR(ReadInt(node, key, lo, hi, &v));
  *out = static_cast<int>(v);
  return Status::Ok();
}

Status ReadDouble(const ConfigNode& node, const char* key, double lo, double hi, double* out) {
  REEL_ASSIGN_OR_RETURN(double v, node.GetDouble(key, *out));
  if (!(v >= lo && v <= hi)) {
    std::ostringstream range;
    range << "must be in [" << lo << ", " << hi << "]";
    return node.Child(key).value().Error(range.str());
  }
  *out = v;
  return Status::Ok();
}

Status ReadString(const ConfigNode& node, const char* key, std::string* out) {
  REEL_ASSIGN_OR_RETURN(*out, node.GetString(key, *out));
  return Status::Ok();
}

Status ReadBool(const ConfigNode& node, const char* key, bool* out) {
  REEL_ASSIGN_OR_RETURN(*out, node.GetBool(key, *out));
  return Status::Ok();
}

// A section that may be absent (then all its defaults hold) but must be a map when present.
Result<std::optional<ConfigNode>> Section(const ConfigNode& root, const char* key) {
  if (!root.Has(key)) return std::optional<ConfigNode>();
  REEL_ASSIGN_OR_RETURN(ConfigNode node, root.Child(key));
  if (!node.IsMap()) return node.Error("expected a map of settings");
  return std::optional<ConfigNode>(node);
}

// An optional list of class-name pairs: [[MoveLeft, MoveRight], [Grow, Shrink]].
Status ReadPairs(const ConfigNode& node, const char* key,
                 std::vector<std::pair<std::string, std::string>>* out) {
  if (!node.Has(key)) return Status::Ok();
  REEL_ASSIGN_OR_RETURN(ConfigNode list, node.Child(key));
  REEL_ASSIGN_OR_RETURN(auto pairs, list.Elements());
  for (const ConfigNode& pair : pairs) {
    auto names = pair.Elements();
    if (!names.ok() || names->size() != 2) {
      return pair.Error("expected a pair of class names, e.g. [MoveLeft, MoveRight]");
    }
    REEL_ASSIGN_OR_RETURN(std::string a, (*names)[0].AsString());
    REEL_ASSIGN_OR_RETURN(std::string b, (*names)[1].AsString());
    out->emplace_back(std::move(a), std::move(b));
  }
  return Status::Ok();
}

Status ParseData(const ConfigNode& node, DataConfig* d) {
  REEL_RETURN_IF_ERROR(
      node.CheckKeys({"dataset", "cache_dir", "train_split", "val_split", "batch_size", "workers",
                      "clip_frames", "frame_stride", "size", "min_scale", "flip", "flip_pairs",
                      "reverse", "reverse_pairs", "eval_clips"}));
  REEL_ASSIGN_OR_RETURN(d->dataset, node.GetString("dataset"));
  if (d->dataset.empty()) return node.Child("dataset").value().Error("must name the dataset root");
  REEL_RETURN_IF_ERROR(ReadString(node, "cache_dir", &d->cache_dir));
  REEL_RETURN_IF_ERROR(ReadString(node, "train_split", &d->train_split));
  REEL_RETURN_IF_ERROR(ReadString(node, "val_split", &d->val_split));
  REEL_RETURN_IF_ERROR(ReadInt(node, "batch_size", 1, 65536, &d->batch_size));
  REEL_RETURN_IF_ERROR(ReadInt(node, "workers", 1, 256, &d->workers));
  REEL_RETURN_IF_ERROR(ReadInt(node, "clip_frames", 1, 1024, &d->clip_frames));
  REEL_RETURN_IF_ERROR(ReadInt(node, "frame_stride", 1, 64, &d->frame_stride));
  REEL_RETURN_IF_ERROR(ReadInt(node, "size", 8, 1024, &d->size));
  REEL_RETURN_IF_ERROR(ReadDouble(node, "min_scale", 0.01, 1.0, &d->min_scale));
  REEL_RETURN_IF_ERROR(ReadBool(node, "flip", &d->flip));
  REEL_RETURN_IF_ERROR(ReadPairs(node, "flip_pairs", &d->flip_pairs));
  REEL_RETURN_IF_ERROR(ReadBool(node, "reverse", &d->reverse));
  REEL_RETURN_IF_ERROR(ReadPairs(node, "reverse_pairs", &d->reverse_pairs));
  REEL_RETURN_IF_ERROR(ReadInt(node, "eval_clips", 1, 64, &d->eval_clips));
  return Status::Ok();
}

Status ParseOptimizer(const ConfigNode& node, OptimizerConfig* o) {
  REEL_RETURN_IF_ERROR(node.CheckKeys({"name", "lr", "momentum", "nesterov", "weight_decay",
                                       "betas", "eps", "decay_norm_and_bias"}));
  std::string name = "sgd";
  REEL_RETURN_IF_ERROR(ReadString(node, "name", &name));
  if (name == "sgd") {
    o->kind = OptimizerKind::kSgd;
  } else if (name == "adamw") {
    o->kind = OptimizerKind::kAdamW;
    o->lr = 1e-3;
    o->weight_decay = 1e-2;
  } else {
    return node.Child("name").value().Error("unknown optimizer '" + name +
                                            "' (expected sgd or adamw)");
  }
  bool sgd = o->kind == OptimizerKind::kSgd;
  auto only = [&](const char* key, bool allowed) -> Status {
    if (node.Has(key) && !allowed) {
      return node.Child(key).value().Error(std::string("not an option of ") + name);
    }
    return Status::Ok();
  };
  REEL_RETURN_IF_ERROR(only("momentum", sgd));
  REEL_RETURN_IF_ERROR(only("nesterov", sgd));
  REEL_RETURN_IF_ERROR(only("betas", !sgd));
  REEL_RETURN_IF_ERROR(only("eps", !sgd));
  REEL_RETURN_IF_ERROR(ReadDouble(node, "lr", 1e-12, 100.0, &o->lr));
  REEL_RETURN_IF_ERROR(ReadDouble(node, "momentum", 0.0, 0.999999, &o->momentum));
  REEL_RETURN_IF_ERROR(ReadBool(node, "nesterov", &o->nesterov));
  if (o->nesterov && o->momentum <= 0)
    return node.Child("nesterov").value().Error("nesterov needs momentum > 0");
  REEL_RETURN_IF_ERROR(ReadDouble(node, "weight_decay", 0.0, 10.0, &o->weight_decay));
  REEL_RETURN_IF_ERROR(ReadDouble(node, "eps", 1e-20, 1.0, &o->eps));
  REEL_RETURN_IF_ERROR(ReadBool(node, "decay_norm_and_bias", &o->decay_norm_and_bias));
  if (node.Has("betas")) {
    REEL_ASSIGN_OR_RETURN(ConfigNode betas, node.Child("betas"));
    REEL_ASSIGN_OR_RETURN(auto elements, betas.Elements());
    if (elements.size() != 2) return betas.Error("betas needs two numbers, e.g. [0.9, 0.999]");
    REEL_ASSIGN_OR_RETURN(o->beta1, elements[0].AsDouble());
    REEL_ASSIGN_OR_RETURN(o->beta2, elements[1].AsDouble());
    if (!(o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 && o->beta2 < 1)) {
      return betas.Error("betas must be in [0, 1)");
    }
  }
  return Status::Ok();
}

Status ParseTrain(const ConfigNode& node, TrainConfig* c) {
  REEL_RETURN_IF_ERROR(
      node.CheckKeys({"epochs", "max_steps", "grad_accum", "clip_grad_norm", "label_smoothing",
                      "amp", "log_every", "eval_every_epochs", "log_samples"}));
  if (node.Has("epochs") && node.Has("max_steps")) {
    return node.Child("max_steps").value().Error("give either epochs or max_steps, not both");
  }
  REEL_RETURN_IF_ERROR(ReadInt(node, "epochs", 1, 1000000, &c->epochs));
  if (node.Has("max_steps")) {
    c->max_steps = 0;
    REEL_RETURN_IF_ERROR(ReadInt(node, "max_steps", 1, int64_t{1} << 40, &c->max_steps));
  }
  REEL_RETURN_IF_ERROR(ReadInt(node, "grad_accum", 1, 4096, &c->grad_accum));
  REEL_RETURN_IF_ERROR(ReadDouble(node, "clip_grad_norm", 0.0, 1e9, &c->clip_grad_norm));
  REEL_RETURN_IF_ERROR(ReadDouble(node, "label_smoothing", 0.0, 0.999, &c->label_smoothing));
  std::string amp = "auto";
  REEL_RETURN_IF_ERROR(ReadString(node, "amp", &amp));
  if (amp == "auto")
    c->amp = AmpMode::kAuto;
  else if (amp == "off")
    c->amp = AmpMode::kOff;
  else if (amp == "fp16")
    c->amp = AmpMode::kFp16;
  else if (amp == "bf16")
    c->amp = AmpMode::kBf16;
  else
    return node.Child("amp").value().Error("unknown amp mode '" + amp +
                                           "' (expected auto, off, fp16 or bf16)");
  REEL_RETURN_IF_ERROR(ReadInt(node, "log_every", 1, 1000000000, &c->log_every));
  REEL_RETURN_IF_ERROR(ReadInt(node, "eval_every_epochs", 0, 1000000, &c->eval_every_epochs));
  REEL_RETURN_IF_ERROR(ReadBool(node, "log_samples", &c->log_samples));
  return Status::Ok();
}

Status ParseDist(const ConfigNode& node, DistConfig* d) {
  REEL_RETURN_IF_ERROR(
      node.CheckKeys({"bucket_cap_mb", "first_bucket_mb", "compression", "broadcast_buffers",
                      "timeout_s", "connect_timeout_s", "iface"}));
  REEL_RETURN_IF_ERROR(ReadDouble(node, "bucket_cap_mb", 0.001, 4096, &d->bucket_cap_mb));
  REEL_RETURN_IF_ERROR(ReadDouble(node, "first_bucket_mb", 0.001, 4096, &d->first_bucket_mb));
  REEL_RETURN_IF_ERROR(ReadString(node, "compression", &d->compression));
  if (d->compression != "none" && d->compression != "fp16" && d->compression != "bf16") {
    return node.Child("compression")
        .value()
        .Error("unknown gradient compression '" + d->compression +
               "' (expected none, fp16 or bf16)");
  }
  REEL_RETURN_IF_ERROR(ReadBool(node, "broadcast_buffers", &d->broadcast_buffers));
  REEL_RETURN_IF_ERROR(ReadDouble(node, "timeout_s", 0.1, 86400, &d->timeout_s));
  REEL_RETURN_IF_ERROR(ReadDouble(node, "connect_timeout_s", 0.1, 86400, &d->connect_timeout_s));
  REEL_RETURN_IF_ERROR(ReadString(node, "iface", &d->iface));
  return Status::Ok();
}

// parameter_servers, sync and staleness; servers train without pipeline stages.
Status ParseParameterServers(const ConfigNode& node, ParallelConfig* p) {
  REEL_RETURN_IF_ERROR(ReadInt(node, "parameter_servers", 0, 1024, &p->parameter_servers));
  REEL_RETURN_IF_ERROR(ReadString(node, "sync", &p->sync));
  REEL_RETURN_IF_ERROR(ReadInt(node, "staleness", 0, 1 << 20, &p->staleness));
  if (p->sync != "bsp" && p->sync != "ssp") {
    return node.Child("sync").value().Error("unknown parameter-server sync '" + p->sync +
                                            "' (expected bsp or ssp)");
  }
  if (p->sync == "bsp" && p->staleness > 0) {
    return node.Child("staleness")
        .value()
        .Error("staleness needs sync: ssp (bsp waits for every worker at every step)");
  }
  const bool ps_keys = node.Has("sync") || node.Has("staleness");
  if (ps_keys && p->parameter_servers == 0) {
    return node.Error("sync and staleness need parameter_servers >= 1");
  }
  if (p->parameter_servers == 0) return Status::Ok();
  if (!p->auto_stages && p->pipeline_stages > 1) {
    return node.Child("parameter_servers")
        .value()
        .Error("parameter servers train without pipeline stages (pipeline_stages is " +
               std::to_string(p->pipeline_stages) + ")");
  }
  p->auto_stages = false;
  p->pipeline_stages = 1;
  return Status::Ok();
}

Status ParseParallel(const ConfigNode& node, int batch_size, ParallelConfig* p) {
  if (!node.IsMap()) {
    REEL_ASSIGN_OR_RETURN(std::string word, node.AsString());
    if (word != "auto") return node.Error("expected auto or a map of settings");
    return Status::Ok();
  }
  REEL_RETURN_IF_ERROR(
      node.CheckKeys({"pipeline_stages", "micro_batches", "schedule", "worker_memory_mb",
                      "parameter_servers", "sync", "staleness"}));
  if (node.Has("pipeline_stages")) {
    REEL_ASSIGN_OR_RETURN(ConfigNode stages, node.Child("pipeline_stages"));
    Result<std::string> word = stages.AsString();
    p->auto_stages = word.ok() && *word == "auto";
    if (!p->auto_stages) {
      REEL_RETURN_IF_ERROR(ReadInt(node, "pipeline_stages", 1, 1024, &p->pipeline_stages));
    }
  }
  REEL_RETURN_IF_ERROR(ReadDouble(node, "worker_memory_mb", 0, 1e12, &p->worker_memory_mb));
  REEL_RETURN_IF_ERROR(ReadInt(node, "micro_batches", 1, 1 << 20, &p->micro_batches));
  REEL_RETURN_IF_ERROR(ReadString(node, "schedule", &p->schedule));
  if (p->schedule != "gpipe" && p->schedule != "1f1b") {
    return node.Child("schedule")
        .value()
        .Error("unknown pipeline schedule '" + p->schedule + "' (expected gpipe or 1f1b)");
  }
  REEL_RETURN_IF_ERROR(ParseParameterServers(node, p));
  // auto fits its default to the batch; what a user asks for must fit as it is.
  const bool asked = node.Has("micro_batches") || (!p->auto_stages && p->pipeline_stages > 1);
  if (asked && p->micro_batches > batch_size) {
    return node.Child("micro_batches")
        .value()
        .Error("micro_batches (" + std::to_string(p->micro_batches) +
               ") must not exceed data.batch_size (" + std::to_string(batch_size) + ")");
  }
  return Status::Ok();
}

Status ParseRegistry(const ConfigNode& node, RegistryConfig* r) {
  REEL_RETURN_IF_ERROR(node.CheckKeys(
      {"uri", "chunks", "model", "branch", "aliases", "with_optimizer", "best", "best_alias"}));
  REEL_RETURN_IF_ERROR(ReadString(node, "uri", &r->uri));
  REEL_RETURN_IF_ERROR(ReadString(node, "chunks", &r->chunks));
  REEL_RETURN_IF_ERROR(ReadString(node, "model", &r->model));
  REEL_RETURN_IF_ERROR(ReadString(node, "branch", &r->branch));
  REEL_ASSIGN_OR_RETURN(r->with_optimizer, node.GetBool("with_optimizer", r->with_optimizer));
  REEL_ASSIGN_OR_RETURN(r->best, node.GetBool("best", r->best));
  REEL_RETURN_IF_ERROR(ReadString(node, "best_alias", &r->best_alias));
  if (node.Has("aliases")) {
    REEL_ASSIGN_OR_RETURN(ConfigNode aliases, node.Child("aliases"));
    REEL_ASSIGN_OR_RETURN(std::vector<ConfigNode> items, aliases.Elements());
    for (const ConfigNode& item : items) {
      REEL_ASSIGN_OR_RETURN(std::string alias, item.AsString());
      r->aliases.push_back(std::move(alias));
    }
  }
  if (r->model.empty() && (node.Has("branch") || node.Has("aliases") || r->best)) {
    return node.Error("registry.branch, registry.aliases and registry.best need registry.model");
  }
  return Status::Ok();
}

}  // namespace

Result<TrainConfig> ParseTrainConfig(const ConfigNode& root) {
  if (!root.IsMap()) return root.Error("a training config is a map of sections");
  REEL_RETURN_IF_ERROR(
      root.CheckKeys({"run_dir", "seed", "threads", "device", "model", "data", "optimizer",
                      "schedule", "train", "checkpoint", "dist", "parallel", "registry"}));
  TrainConfig c;
  REEL_RETURN_IF_ERROR(ReadString(root, "run_dir", &c.run_dir));
  if (c.run_dir.empty()) return root.Child("run_dir").value().Error("must not be empty");
  int64_t seed = 0;
  REEL_RETURN_IF_ERROR(ReadInt(root, "seed", 0, int64_t{1} << 62, &seed));
  c.seed = static_cast<uint64_t>(seed);
  REEL_RETURN_IF_ERROR(ReadInt(root, "threads", 0, 1024, &c.threads));
  REEL_RETURN_IF_ERROR(ReadString(root, "device", &c.device));
  if (c.device != "auto" && c.device != "cpu" && c.device.rfind("cuda", 0) != 0) {
    return root.Child("device").value().Error("unknown device '" + c.device +
                                              "' (expected auto, cpu, cuda or cuda:N)");
  }

  REEL_ASSIGN_OR_RETURN(ConfigNode model, root.Child("model"));
  REEL_ASSIGN_OR_RETURN(c.model, models::ModelSpecFromConfig(model));
  REEL_RETURN_IF_ERROR(ReadString(model, "init", &c.model_init));
  REEL_ASSIGN_OR_RETURN(ConfigNode data, root.Child("data"));
  if (!data.IsMap()) return data.Error("expected a map of settings");
  REEL_RETURN_IF_ERROR(ParseData(data, &c.data));

  REEL_ASSIGN_OR_RETURN(auto optimizer, Section(root, "optimizer"));
  if (optimizer) REEL_RETURN_IF_ERROR(ParseOptimizer(*optimizer, &c.optimizer));

  REEL_ASSIGN_OR_RETURN(auto schedule, Section(root, "schedule"));
  if (schedule) {
    REEL_RETURN_IF_ERROR(schedule->CheckKeys({"warmup_epochs", "warmup_steps", "min_lr"}));
    if (schedule->Has("warmup_epochs") && schedule->Has("warmup_steps")) {
      return schedule->Child("warmup_steps")
          .value()
          .Error("give either warmup_epochs or warmup_steps, not both");
    }
    REEL_RETURN_IF_ERROR(ReadInt(*schedule, "warmup_epochs", 0, 1000000, &c.warmup_epochs));
    if (schedule->Has("warmup_steps")) {
      c.warmup_steps = 0;
      REEL_RETURN_IF_ERROR(
          ReadInt(*schedule, "warmup_steps", 0, int64_t{1} << 40, &c.warmup_steps));
    }
    REEL_RETURN_IF_ERROR(ReadDouble(*schedule, "min_lr", 0.0, c.optimizer.lr, &c.min_lr));
  }

  REEL_ASSIGN_OR_RETURN(auto train, Section(root, "train"));
  if (train) REEL_RETURN_IF_ERROR(ParseTrain(*train, &c));

  REEL_ASSIGN_OR_RETURN(auto checkpoint, Section(root, "checkpoint"));
  if (checkpoint) {
    REEL_RETURN_IF_ERROR(checkpoint->CheckKeys({"uri", "every_steps", "keep"}));
    REEL_RETURN_IF_ERROR(ReadString(*checkpoint, "uri", &c.checkpoint_uri));
    REEL_RETURN_IF_ERROR(
        ReadInt(*checkpoint, "every_steps", 0, int64_t{1} << 40, &c.checkpoint_every_steps));
    REEL_RETURN_IF_ERROR(ReadInt(*checkpoint, "keep", 1, 1000000, &c.checkpoint_keep));
  }
  if (c.checkpoint_uri.empty()) c.checkpoint_uri = c.run_dir + "/checkpoints";

  REEL_ASSIGN_OR_RETURN(auto dist, Section(root, "dist"));
  if (dist) REEL_RETURN_IF_ERROR(ParseDist(*dist, &c.dist));
  if (root.Has("parallel")) {  // a map, or the word auto
    REEL_ASSIGN_OR_RETURN(ConfigNode parallel, root.Child("parallel"));
    REEL_RETURN_IF_ERROR(ParseParallel(parallel, c.data.batch_size, &c.parallel));
  }
  REEL_ASSIGN_OR_RETURN(auto registry, Section(root, "registry"));
  if (registry) REEL_RETURN_IF_ERROR(ParseRegistry(*registry, &c.registry));
  return c;
}

Result<TrainConfig> ParseTrainConfigText(const std::string& text, const std::string& source_name) {
  REEL_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::LoadString(text, source_name));
  REEL_ASSIGN_OR_RETURN(TrainConfig c, ParseTrainConfig(root));
  c.source_text = text;
  return c;
}

Result<TrainConfig> LoadTrainConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("training config '" + path + "' cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  return ParseTrainConfigText(text.str(), path);
}

Result<std::string> ApplyConfigOverrides(const std::string& text,
                                         const std::vector<std::string>& overrides) {
  if (overrides.empty()) return text;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(std::string("config: ") + e.what());
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  for (const std::string& o : overrides) {
    size_t eq = o.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgumentError("override '" + PrintableForMessage(o) +
                                  "': expected key.path=value");
    }
    std::string path = o.substr(0, eq);
    YAML::Node value;
    try {
      value = YAML::Load(o.substr(eq + 1));
    } catch (const YAML::Exception& e) {
      return InvalidArgumentError("override '" + PrintableForMessage(o) + "': " + e.what());
    }
    // Walk with node copies: yaml-cpp nodes are handles, so assignment through them edits root.
    std::vector<std::string> parts;
    std::stringstream split(path);
    for (std::string part; std::getline(split, part, '.');) {
      if (part.empty())
        return InvalidArgumentError("override '" + PrintableForMessage(o) + "': empty key segment");
      parts.push_back(part);
    }
    std::vector<YAML::Node> chain{root};
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      YAML::Node parent = chain.back();
      if (!parent.IsMap() && !parent.IsNull()) {
        return InvalidArgumentError("override '" + PrintableForMessage(o) + "': '" + parts[i] +
                                    "' is not inside a map");
      }
      YAML::Node child = parent[parts[i]];
      if (!child.IsDefined() || child.IsNull()) {
        parent[parts[i]] = YAML::Node(YAML::NodeType::Map);
        child = parent[parts[i]];
      }
      chain.push_back(child);
    }
    YAML::Node parent = chain.back();
    if (!parent.IsMap()) {
      return InvalidArgumentError("override '" + PrintableForMessage(o) + "': the parent of '" +
                                  parts.back() + "' is not a map");
    }
    parent[parts.back()] = value;
  }
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

loader::LoaderOptions TrainConfig::TrainLoaderOptions(int world_size, int rank) const {
  loader::LoaderOptions o;
  o.split = data.train_split;
  o.batch_size = data.batch_size;
  o.plan.world_size = world_size;
  o.plan.rank = rank;
  o.plan.seed = seed;
  o.plan.remainder = loader::Remainder::kDrop;
  o.clip.frames = data.clip_frames;
  o.clip.stride = data.frame_stride;
  o.clip.sampling = loader::ClipSampling::kRandom;
  o.transform.train = true;
  o.transform.size = data.size;
  o.transform.min_scale = data.min_scale;
  o.transform.flip = data.flip;
  o.transform.reverse = data.reverse;
  o.flip_pairs = data.flip_pairs;
  o.reverse_pairs = data.reverse_pairs;
  o.threads = data.workers;
  return o;
}

loader::LoaderOptions TrainConfig::EvalLoaderOptions(const std::string& split) const {
  loader::LoaderOptions o;
  o.split = split;
  o.batch_size = data.batch_size;
  o.plan.seed = seed;
  o.plan.shuffle = false;
  o.plan.remainder = loader::Remainder::kPad;  // the evaluator skips the repeats by key
  o.clip.frames = data.clip_frames;
  o.clip.stride = data.frame_stride;
  o.clip.sampling =
      data.eval_clips > 1 ? loader::ClipSampling::kUniform : loader::ClipSampling::kCenter;
  o.clip.clips_per_video = data.eval_clips;
  o.transform.train = false;
  o.transform.size = data.size;
  o.transform.flip = false;
  o.threads = data.workers;
  return o;
}

}  // namespace reel::train
