#include "lab/simulate/serve_load.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "common/error.h"

namespace kvlab::perf {
namespace {

constexpr int kMaxLength = 1 << 20;

int parse_tokens(std::string_view s, std::string_view spec, std::string_view flag) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 1 || v > kMaxLength)
    throw Error(std::string(flag) + " wants N or LO:HI tokens (1 to " + std::to_string(kMaxLength) + "), got '" +
                std::string(spec) + "'");
  return v;
}

int draw(const LengthSpec& s, std::mt19937_64& rng) {
  if (s.lo == s.hi) return s.lo;
  return s.lo + int(unit_draw(rng) * double(s.hi - s.lo + 1));
}

}  // namespace

double unit_draw(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

LengthSpec parse_length(std::string_view spec, std::string_view flag) {
  const size_t colon = spec.find(':');
  if (colon == std::string_view::npos) {
    const int v = parse_tokens(spec, spec, flag);
    return {v, v};
  }
  const LengthSpec s{parse_tokens(spec.substr(0, colon), spec, flag), parse_tokens(spec.substr(colon + 1), spec, flag)};
  if (s.lo > s.hi) throw Error(std::string(flag) + " range '" + std::string(spec) + "' has LO above HI");
  return s;
}

void check_load(const ServeLoad& l) {
  if (l.requests < 1 || l.requests > kMaxServeRequests)
    throw Error("--requests must be 1 to " + std::to_string(kMaxServeRequests));
  const bool open = l.rate > 0, closed = l.concurrency > 0;
  if (open == closed) throw Error("simulate --serve needs exactly one of --rate R (> 0 requests/s) or --concurrency C (>= 1)");
  if (!std::isfinite(l.rate) || l.rate > 1e6) throw Error("--rate must be a finite number of requests/s up to 1e6");
  if (!(l.ramp_s >= 0 && l.ramp_s <= 1e6)) throw Error("--ramp must be 0 to 1e6 seconds");
  if (open && l.ramp_s > 0) throw Error("--ramp spreads the closed loop's clients; Poisson arrivals (--rate) have none");
  if (!(l.prefix_share >= 0 && l.prefix_share <= 1)) throw Error("--prefix-share must be in [0, 1]");
  if (l.prefix_tokens < 0 || l.prefix_tokens > kMaxLength) throw Error("--prefix-len must be 0 to 1048576 tokens");
  if (!(l.draft_found >= 0 && l.draft_found <= 1)) throw Error("--draft-found must be in [0, 1]");
  if (!(l.draft_accept >= 0 && l.draft_accept <= 1)) throw Error("--draft-accept must be in [0, 1]");
  if (l.requests * l.output.hi > kMaxServeTokens)
    throw Error("--requests x the longest --output-len must be at most " + std::to_string(kMaxServeTokens) + " tokens");
}

std::vector<LoadRequest> make_requests(const ServeLoad& l) {
  check_load(l);
  std::mt19937_64 rng(l.seed);
  std::vector<LoadRequest> out(size_t(l.requests));
  double t = 0;
  for (LoadRequest& r : out) {
    // Poisson arrivals: exponential gaps of mean 1/rate (inverse CDF).
    if (l.rate > 0) t += -std::log1p(-unit_draw(rng)) / l.rate;
    r.arrival_s = t;
    r.prompt = draw(l.prompt, rng);
    r.output = draw(l.output, rng);
    if (unit_draw(rng) < l.prefix_share) r.shared_prefix = std::min(l.prefix_tokens, r.prompt);
  }
  return out;
}

}  // namespace kvlab::perf
