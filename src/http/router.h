// Routes requests to handlers by method and path pattern.
//
// A pattern is a path of segments: literals ("models"), captures ("{model}", one whole segment)
// and, last only, a catch-all ("{rest...}", the remaining segments joined by '/', possibly
// empty). Captures are percent-decoded into Request::params, so "%2F" inside a segment stays
// inside that capture. A trailing '/' on the request path is ignored.
//
//   router.Add("POST", "/v2/models/{model}/versions/{version}/infer", Infer);
//
// When several patterns match, the most specific wins: compared segment by segment, a literal
// beats a capture, which beats a catch-all (so "/v2/models/ready" shadows "/v2/models/{model}").
// No match: 404. A matching path without the method: 405 with `Allow`. HEAD falls back to the
// GET route (the server sends the headers only).
//
// Handlers return errors as Responses (Response::Error) and should not throw; the server turns
// an escaping exception into a 500 and logs it. Handlers run on the server's io threads.
//
// Thread-safety: Add before the server starts; Dispatch is const and may run concurrently.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "http/message.h"

namespace reel::http {

using Handler = std::function<Response(const Request&)>;

class Router {
 public:
  // Errors: InvalidArgument for a malformed pattern (no leading '/', an empty or unclosed
  // capture, a catch-all before the end, the same capture twice) or a method and pattern
  // already added.
  Status Add(std::string method, std::string_view pattern, Handler handler);

  // Fills `request->params` and calls the chosen handler, or answers 404/405. Does not catch.
  Response Dispatch(Request* request) const;

 private:
  struct Segment {
    enum class Kind { kLiteral, kCapture, kRest } kind;
    std::string text;  // the literal, or the capture's name
  };
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<Segment> segments;
    Handler handler;
  };

  // True when `route` matches `segments`; `params` gets the captures and `rank` one number
  // per segment (2 literal, 1 capture, 0 catch-all) to compare specificity.
  static bool Match(const Route& route, const std::vector<std::string_view>& segments,
                    std::map<std::string, std::string>* params, std::vector<int>* rank);

  std::vector<Route> routes_;
};

}  // namespace reel::http
