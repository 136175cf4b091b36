// A Registry that is a client of `reel registry serve` (service.h): every call is one HTTP
// request, so the CLI, `reel train` and `reel serve` work the same against a team's server as on
// an embedded registry. Weights travel as safetensors bytes; the server chunks, deltas and
// verifies them. The server decides who the caller is from the token: the Actor a caller passes
// is not sent; every request names the local user (Actor::Local) as `Reel-User`, which only a
// server without auth records in its audit trail.
//
// Errors: the server's Status, message and code as it answered; Unavailable when it cannot be
// reached. Thread-safety: one connection; one thread at a time, as every Registry.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "registry/registry.h"

namespace reel::registry {

// `url`: http://host:port (a path prefix before /api/v1 is allowed). `token`: the bearer token,
// "" for a server started with --no-auth.
Result<std::unique_ptr<Registry>> OpenRemoteRegistry(const std::string& url,
                                                     const std::string& token);

}  // namespace reel::registry
