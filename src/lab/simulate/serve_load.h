// The load a serving simulation replays (lab/simulate/serve_sim.h): how
// many requests, when they arrive, and how long their prompts and answers
// are. Deterministic for a seed: the draws use their own arithmetic on a
// std::mt19937_64 stream (whose output the standard fixes), not the
// standard distributions (whose output it leaves to each library).
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace kvlab::perf {

// Most requests one simulation replays (its per-request records stay small),
// and most output tokens (at most one pass each: about a minute at worst).
inline constexpr int64_t kMaxServeRequests = 100000;
inline constexpr int64_t kMaxServeTokens = int64_t(1) << 25;

// A length in tokens: fixed ("512") or uniform over [lo, hi] ("128:1024").
struct LengthSpec {
  int lo = 1, hi = 1;
};
// Throws kvlab::Error naming `flag` for anything but N or LO:HI with
// 1 <= LO <= HI <= 1 << 20.
LengthSpec parse_length(std::string_view spec, std::string_view flag);

struct ServeLoad {
  int64_t requests = 200;
  // Open loop: Poisson arrivals at `rate` requests/s. Closed loop (rate 0):
  // `concurrency` clients, each sending its next request when its previous
  // one ends.
  double rate = 0;
  int concurrency = 0;
  // Closed loop: client c sends its first request at c * ramp_s /
  // concurrency (load tools' ramp-up) instead of all at once. Started
  // together, clients of fixed lengths stay in step for the whole run: their
  // requests are prefilled in one pass, end in one pass, and their
  // successors again share a prefill pass. Real clients drift apart
  // (varied lengths, network and client delays); a ramp of about one
  // request's duration models clients that are out of step.
  double ramp_s = 0;
  LengthSpec prompt{512, 512};
  LengthSpec output{128, 128};
  // The fraction of requests whose prompt starts with one shared prefix of
  // prefix_tokens (a system prompt), which the prefix cache can serve.
  double prefix_share = 0;
  int prefix_tokens = 0;
  // With speculative decoding (the engine's --draft), two figures of the
  // text, not of the engine. draft_found: the chance that prompt lookup
  // finds drafts for a decode row (none when the last tokens have not
  // occurred before). draft_accept: the chance that a draft is kept once
  // those before it were, the same for each (Leviathan et al. 2023, "Fast
  // Inference from Transformers via Speculative Decoding", section 3.4): a
  // row with d drafts yields (1 - a^(d+1)) / (1 - a) tokens on average.
  double draft_found = 1;
  double draft_accept = 0;
  uint64_t seed = 1;
};
// Throws kvlab::Error for a load that is not one of the two loops, a ramp
// outside [0, 1e6] s or with an open loop, a fraction or a draft chance
// outside [0, 1], a request count outside [1, kMaxServeRequests], or more
// than kMaxServeTokens output tokens at the longest.
void check_load(const ServeLoad& l);

struct LoadRequest {
  double arrival_s = 0;  // open loop; closed loop: set when its client sends it
  int prompt = 0, output = 0;
  int shared_prefix = 0;  // leading prompt tokens that are the shared prefix
};

// The requests of `l`, in arrival order.
std::vector<LoadRequest> make_requests(const ServeLoad& l);

// A double in [0, 1) from the top 53 bits of one draw (the same on every
// standard library, unlike std::uniform_real_distribution).
double unit_draw(std::mt19937_64& rng);

}  // namespace kvlab::perf
