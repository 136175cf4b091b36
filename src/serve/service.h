// The inference service: KServe v2 over HTTP/REST (the Open Inference Protocol, as Triton and
// KServe clients speak it) on Reel's shared HTTP layer, in front of a repository of models,
// each version with its own dynamic batcher.
//
//   GET  /v2                                  server metadata (name, version, extensions)
//   GET  /v2/health/live | /v2/health/ready   200 while alive | while every model is ready
//   GET  /v2/models/{m}[/versions/{v}]        model metadata: inputs, outputs, versions
//   GET  /v2/models/{m}[/versions/{v}]/ready  200 when ready, else 503
//   POST /v2/models/{m}[/versions/{v}]/infer  inference (JSON or the binary tensor extension)
//   GET  /metrics                             Prometheus text, Triton's metric names
//
// A model takes one input, "input": FP32 [B, C, T, H, W] (normalised as in evaluation) or
// UINT8 [B, C, T, H, W] (raw pixels, normalised here with the training mean and std); B may be
// left out for one sample. Or BYTES [B]: encoded video files, decoded here (serve/video.h).
// Or, instead of "input", "uri": BYTES [B] of paths or store URIs (s3://...) the server reads,
// only under ServiceOptions::allowed_uri_prefixes. Outputs: "logits" and "probabilities" [B,
// classes] FP32; the classification extension (an output's parameters.classification = k) answers
// that output as BYTES [B, k] "score:index:label", best first.
//
// Versions change while serving: Swap puts a new version in a role (the primary one, or the
// canary that a percentage of the requests reach, chosen by request id) at once, then drains the
// version it replaces (its requests in flight finish) and unloads it, so no request fails.
//
// Errors: malformed or mis-shaped requests 400 naming the problem, unknown model or version 404,
// a full queue 503 with Retry-After, a passed timeout 504.
//
// Thread-safety: all members may be called from any thread; handlers run concurrently.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "http/router.h"
#include "http/server.h"
#include "serve/batcher.h"
#include "serve/model.h"

namespace reel::serve {

struct ServiceOptions {
  uint64_t max_request_bytes = 64ull << 20;  // a larger body is refused before parsing
  // The 'uri' input reads videos from these prefixes only (paths or store URIs); none: refused.
  std::vector<std::string> allowed_uri_prefixes;
};

class Service {
 public:
  explicit Service(ServiceOptions options = {});
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Serves `model` under `name` (its info().name when empty) as version info().version, with
  // its own batcher; it becomes the version a request without /versions/{v} reaches.
  // Errors: the batcher's (bad options); AlreadyExists for a name and version served already.
  Status AddModel(std::string name, std::shared_ptr<Model> model, BatcherOptions batching);

  // Which version a request that names none reaches: the primary, or the canary.
  enum class Role { kPrimary, kCanary };

  // Puts `model` (its info().version) in `role` for `name`: requests that arrive after the call
  // begins its swap reach it. The version that held the role (unless it still holds the other
  // one) then takes no new requests, finishes those in flight and is unloaded before Swap
  // returns. A version served already (the canary promoted to primary, say) keeps its batcher
  // and `model` is dropped; swapping in the version that holds the role does nothing. A model
  // needs a primary version before it can have a canary.
  // Errors: the batcher's (bad options); NotFound for a canary of a model not served.
  Status Swap(const std::string& name, std::shared_ptr<Model> model, BatcherOptions batching,
              Role role = Role::kPrimary);

  // Sends `percent` (0-100) of the requests that name no version to the canary, by request id:
  // the same id always reaches the same version; requests without an id are spread by order of
  // arrival. InvalidArgument for a percent outside 0-100; NotFound for an unknown model.
  Status SetCanaryPercent(const std::string& name, int percent);

  // Stops serving the canary of `name`: the primary takes all requests again; the canary drains
  // and is unloaded. NotFound when there is none.
  Status RemoveCanary(const std::string& name);

  // The version holding `role` for `name`; "" when none.
  std::string ServedVersion(const std::string& name, Role role = Role::kPrimary) const;

  // The routes above, bound to this service (which must outlive the server).
  Status AddRoutes(http::Router* router);

  // Prometheus text exposition of every model version's counters.
  std::string MetricsText() const;

  // Marks the service not ready (health/ready answers 503), then drains every batcher.
  void Shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The HTTP server settings an inference server runs with: an io thread per core (at least 2)
// reading and writing every connection, and `requests` handler threads, as many requests in
// flight at once, each blocked on its model's batcher. (With the handlers on the io threads, a
// request's body reads were handed among 64 threads, each waking for a 16-64 KiB piece.)
http::ServerOptions ServingHttpOptions(int requests);

}  // namespace reel::serve
