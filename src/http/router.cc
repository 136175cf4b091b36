#include "http/router.h"

#include <set>
#include <utility>

#include "base/strings.h"

namespace reel::http {
namespace {

// "/a/b/" -> {"a", "b"}; "/" -> {}. The leading '/' is the caller's to check.
std::vector<std::string_view> SplitPath(std::string_view path) {
  if (!path.empty() && path.front() == '/') path.remove_prefix(1);
  if (!path.empty() && path.back() == '/') path.remove_suffix(1);
  std::vector<std::string_view> segments;
  if (path.empty()) return segments;
  while (true) {
    size_t slash = path.find('/');
    segments.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) return segments;
    path.remove_prefix(slash + 1);
  }
}

std::string Join(const std::set<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

}  // namespace

Status Router::Add(std::string method, std::string_view pattern, Handler handler) {
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("route " + method + " " + std::string(pattern) + ": " + why);
  };
  if (method.empty()) return bad("no method");
  if (pattern.empty() || pattern.front() != '/') return bad("the pattern must start with '/'");
  if (!handler) return bad("no handler");
  Route route{method, std::string(pattern), {}, std::move(handler)};
  std::set<std::string> names;
  for (std::string_view text : SplitPath(pattern)) {
    if (!route.segments.empty() && route.segments.back().kind == Segment::Kind::kRest) {
      return bad("a catch-all {name...} must be the last segment");
    }
    if (text.empty()) return bad("an empty segment");
    if (text.front() != '{') {
      if (text.find_first_of("{}") != std::string_view::npos) return bad("a stray brace");
      route.segments.push_back({Segment::Kind::kLiteral, std::string(text)});
      continue;
    }
    if (text.back() != '}') return bad("an unclosed capture");
    std::string_view name = text.substr(1, text.size() - 2);
    Segment::Kind kind = Segment::Kind::kCapture;
    if (name.size() >= 3 && name.substr(name.size() - 3) == "...") {
      kind = Segment::Kind::kRest;
      name.remove_suffix(3);
    }
    if (name.empty() || name.find_first_of("{}/.") != std::string_view::npos) {
      return bad("a capture needs a plain name");
    }
    if (!names.insert(std::string(name)).second)
      return bad("capture {" + std::string(name) + "} twice");
    route.segments.push_back({kind, std::string(name)});
  }
  for (const Route& other : routes_) {
    if (other.method != route.method || other.segments.size() != route.segments.size()) continue;
    bool same = true;
    for (size_t i = 0; i < route.segments.size() && same; ++i) {
      const Segment& a = route.segments[i];
      const Segment& b = other.segments[i];
      same = a.kind == b.kind && (a.kind != Segment::Kind::kLiteral || a.text == b.text);
    }
    if (same) return bad("the same as " + other.method + " " + other.pattern);
  }
  routes_.push_back(std::move(route));
  return Status::Ok();
}

bool Router::Match(const Route& route, const std::vector<std::string_view>& segments,
                   std::map<std::string, std::string>* params, std::vector<int>* rank) {
  params->clear();
  rank->clear();
  size_t i = 0;
  for (const Segment& segment : route.segments) {
    if (segment.kind == Segment::Kind::kRest) {
      std::string rest;
      for (size_t j = i; j < segments.size(); ++j) {
        rest += (j == i ? "" : "/") + PercentDecode(segments[j], false);
      }
      (*params)[segment.text] = std::move(rest);
      rank->push_back(0);
      return true;
    }
    if (i >= segments.size()) return false;
    if (segment.kind == Segment::Kind::kLiteral) {
      if (segments[i] != segment.text) return false;
      rank->push_back(2);
    } else {
      if (segments[i].empty()) return false;
      (*params)[segment.text] = PercentDecode(segments[i], false);
      rank->push_back(1);
    }
    ++i;
  }
  return i == segments.size();
}

Response Router::Dispatch(Request* request) const {
  if (request->path.empty() || request->path.front() != '/') {
    return Response::Error(InvalidArgumentError("the request target must start with '/': " +
                                                PrintableForMessage(request->target)));
  }
  const std::vector<std::string_view> segments = SplitPath(request->path);
  std::set<std::string> allowed;
  // HEAD is answered by the GET route unless one is added for HEAD itself.
  for (const std::string& method : {request->method, std::string("GET")}) {
    const Route* best = nullptr;
    std::vector<int> best_rank, rank;
    std::map<std::string, std::string> best_params, params;
    for (const Route& route : routes_) {
      if (!Match(route, segments, &params, &rank)) continue;
      allowed.insert(route.method);
      if (route.method != method || (best != nullptr && rank <= best_rank)) continue;
      best = &route;
      best_rank = rank;
      best_params = params;
    }
    if (best != nullptr) {
      request->params = std::move(best_params);
      return best->handler(*request);
    }
    if (request->method != "HEAD") break;
  }
  const std::string where = request->method + " " + PrintableForMessage(request->path);
  if (allowed.empty()) return Response::Error(NotFoundError("no route for " + where));
  if (allowed.count("GET") != 0) allowed.insert("HEAD");
  Response r = Response::Error(405, UnimplementedError("method not allowed: " + where +
                                                       " (allowed: " + Join(allowed) + ")"));
  r.headers["Allow"] = Join(allowed);
  return r;
}

}  // namespace reel::http
