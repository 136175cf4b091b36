// Reel's HTTP layer, the one every service shares: include this header.
//
//   message.h  Request, Response, the Status <-> HTTP error mapping (both ways)
//   router.h   method + path patterns ("/v2/models/{model}/infer") to handlers; 404 and 405
//   server.h   the Beast/Asio server: keep-alive, limits, timeouts, auth hook, graceful stop
//   client.h   the keep-alive client for the CLI and tests; JsonCall returns the server's Status
//   auth.h     bearer tokens, stored hashed, compared in constant time
//
// No Boost header is included from here: Beast stays inside server.cc, session.cc and client.cc.
#pragma once

#include "http/auth.h"     // IWYU pragma: export
#include "http/client.h"   // IWYU pragma: export
#include "http/message.h"  // IWYU pragma: export
#include "http/router.h"   // IWYU pragma: export
#include "http/server.h"   // IWYU pragma: export
