// The registry's HTTP JSON API, served by `reel registry serve` on the shared HTTP layer and
// spoken by the registry's HTTP client (remote.h). All routes are under /api/v1:
//
//   GET    /health                                     public: {"status": "ok"}
//   GET    /whoami                                     the caller and their grants
//   GET    /models                                     models the caller may read
//   GET    /models/{m}/versions                        newest first, without manifests
//   POST   /models/{m}/versions                        register (body below; writer)
//   GET    /models/{m}/chunks                          {"chunk_bytes"}: how the store cuts tensors
//   POST   /models/{m}/chunks/missing                  {"chunks": [sha256...]} -> {"missing":
//   [...]}
//                                                        (writer)
//   GET    /models/{m}/resolve?version=N|alias=A|branch=B   {"model", "version"}
//   GET    /models/{m}/versions/{v}                    with manifests
//   GET    /models/{m}/versions/{v}/parents            ["models:/m/1", ...]
//   GET    /models/{m}/versions/{v}/weights|optimizer  safetensors bytes
//   DELETE /models/{m}/versions/{v}[?force=true]       admin
//   PUT    /models/{m}/versions/{v}/tags/{key}         {"value": "..."} (writer); DELETE removes
//   GET    /models/{m}/branches                        POST {"name", "from"} creates (writer)
//   DELETE /models/{m}/branches/{b}                    writer
//   GET    /models/{m}/branches/{b}/log
//   GET    /models/{m}/aliases                         PUT .../aliases/{a} {"version",
//   DELETE /models/{m}/aliases/{a}                       "protected"?} moves one (writer;
//   GET    /models/{m}/alias-history                     admin for a protected alias)
//   POST   /gc                                         {"grace_ms", "dry_run"}: registry admins
//
// A registration's body (Content-Type application/vnd.reel.registration): an 8-byte little-endian
// length N, N bytes of JSON (views.h's NewVersionJson plus "weights_bytes" and
// "optimizer_bytes"), then the weights, then the optimiser's safetensors bytes. The weights are
// a safetensors file, or, when the JSON has "weights_manifest" (weight_store.h's manifest as
// DescribeChunks makes it) and "weights_sent" (addresses), only the raw bytes of the sent
// chunks in that order: a client asks /chunks/missing first and sends only what the store
// lacks; the server takes the rest from the store. It answers {"version": <VersionJson with
// manifests>, "stats": <PushStats>, "reused": bool}.
//
// Callers present `Authorization: Bearer <token>` (access.h); a missing or unknown token is 401,
// a role too low 403. With `no_auth` every caller is an admin named by its `Reel-User` header
// (for the audit trail), "anonymous" without one: for one person's local use only.
// Errors are http::Response::Error bodies, so a client gets the registry's own Status back.
//
// Thread-safety: the handlers run on the server's io threads, each borrowing one of `pool` open
// registries (a Registry is one database connection, for one thread at a time).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "http/router.h"

namespace reel::registry {

struct ServiceOptions {
  std::string registry_uri;  // a folder, or postgresql://... (with `chunks`)
  std::string chunks;        // the weights' store for a PostgreSQL registry
  bool no_auth = false;
  int pool = 2;  // registries open at once: one per io thread serves them all without waiting
};

inline constexpr char kRegistrationContentType[] = "application/vnd.reel.registration";

class RegistryService {
 public:
  // Opens `pool` connections to the registry. Errors: the registry's.
  static Result<std::unique_ptr<RegistryService>> Open(const ServiceOptions& options);
  ~RegistryService();

  // Adds the routes above. The service must outlive the server that runs them.
  Status AddRoutes(http::Router* router);

  struct State;

 private:
  explicit RegistryService(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace reel::registry
