#include "lab/diagnose/grade.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <initializer_list>
#include <vector>

#include "lab/report/units.h"

namespace kvlab::perf {

namespace {

using Words = std::vector<std::string>;

// What a phrase in the answer is about. The order is the matching priority:
// a span claimed by an earlier concept ("memory bandwidth") is not matched
// again by a later one ("memory").
enum class Concept { Residency, Bandwidth, Capacity, Compute, Decode, Prefill, Memory };

struct Pattern {
  Concept topic;
  Words words;
  bool immune = false;  // carries its own negation ("no offloading"): not negated again
};

struct PhraseGroup {
  Concept topic;
  std::vector<const char*> phrases;  // words separated by single spaces
  bool immune = false;
};

const std::vector<PhraseGroup> kPhraseGroups = {
    {Concept::Residency, {"no offload", "no offloading", "without offloading", "avoid offloading", "stop offloading",
                          "not offloaded", "not offload"}, true},
    {Concept::Residency, {"in vram", "into vram", "fully in", "entirely in", "fit in", "fits in", "all layers on",
                          "in device memory", "on the gpu", "onto the gpu", "resident"}},
    {Concept::Bandwidth, {"memory bandwidth", "vram bandwidth", "hbm bandwidth", "bandwidth", "memory bound",
                          "bandwidth bound", "bandwidth limited", "memory limited", "memory speed", "faster memory",
                          "faster vram", "vram throughput", "vram speed", "memory throughput", "memory transfer",
                          "memory traffic", "memory access", "memory wall", "data movement", "moving data",
                          "moving weights", "waiting for data", "waiting on memory", "waiting for memory",
                          "waiting for weights", "reading weights", "read the weights", "reading the weights",
                          "load the weights", "loading weights", "loading the weights", "weights from memory",
                          "from vram", "hbm", "hbm2e", "hbm3", "hbm3e", "gddr", "gddr6", "gddr6x", "gddr7",
                          "io bound", "mbu", "gb s", "tb s"}},
    {Concept::Capacity, {"more vram", "more memory", "more ram", "bigger vram", "larger vram", "vram capacity",
                         "memory capacity", "more gpu memory", "larger memory", "bigger memory"}},
    {Concept::Compute, {"compute bound", "compute limited", "compute", "computation", "flops", "tflops", "flop",
                        "gflops", "teraflops", "arithmetic", "math", "cores", "core", "tensor cores", "cuda cores",
                        "clock", "clocks", "clock speed", "processing power", "calculations", "calculation", "alu",
                        "alus", "mfu", "shader"}},
    {Concept::Decode, {"decode", "decoding", "decode phase", "generation", "generating", "token generation",
                       "autoregressive", "tg", "tok s", "tokens per second", "tokens s", "per token", "each token",
                       "every token", "next token", "one token at a time", "output tokens", "inter token", "tpot"}},
    {Concept::Prefill, {"prefill", "pre fill", "prefilling", "ttft", "time to first token", "first token",
                        "prompt processing", "prompt phase", "prompt eval", "prompt evaluation", "prompt ingestion",
                        "processing the prompt", "prompt stage", "pp"}},
    {Concept::Memory, {"memory", "vram", "ram", "dram", "offload", "offloaded", "offloading", "system ram", "pcie"}},
};

Words split_words(const char* phrase) {
  Words w(1);
  for (const char* s = phrase; *s; ++s) {
    if (*s == ' ')
      w.emplace_back();
    else
      w.back() += *s;
  }
  return w;
}

std::vector<Pattern> build_patterns() {
  std::vector<Pattern> p;
  for (const PhraseGroup& g : kPhraseGroups)
    for (const char* phrase : g.phrases) p.push_back({g.topic, split_words(phrase), g.immune});
  // Longer phrases first within a concept, so "tensor cores" beats "cores".
  std::stable_sort(p.begin(), p.end(), [](const Pattern& a, const Pattern& b) {
    if (a.topic != b.topic) return a.topic < b.topic;
    return a.words.size() > b.words.size();
  });
  return p;
}

const std::vector<Pattern>& patterns() {
  static const std::vector<Pattern> p = build_patterns();
  return p;
}

bool is_one_of(const std::string& w, std::initializer_list<const char*> set) {
  for (const char* s : set)
    if (w == s) return true;
  return false;
}

bool negation_word(const std::string& w) {
  return is_one_of(w, {"not", "no", "never", "without", "neither", "nor", "cannot", "isnt", "wont", "dont", "doesnt",
                       "wouldnt", "arent", "cant"}) ||
         (w.size() > 3 && w.compare(w.size() - 3, 3, "n't") == 0);
}

// "won't help", "doesn't matter", "isn't the problem", or a negation that ends
// the clause: it applies to what came before it.
bool post_negation_at(const Words& w, size_t i) {
  if (!negation_word(w[i])) return false;
  if (i + 1 == w.size()) return i > 0;  // "... extra FLOPS wouldn't."

  const std::string& next = w[i + 1];
  if (is_one_of(next, {"help", "matter", "fix", "improve", "change", "make", "do", "speed", "solve", "work", "benefit",
                       "needed", "necessary"}))
    return true;
  return next == "the" && i + 2 < w.size() &&
         is_one_of(w[i + 2], {"problem", "issue", "bottleneck", "culprit", "cause", "limit"});
}

// Phase-only: "prefill is fine", "TTFT is great".
bool sentiment_word(const std::string& w) {
  return is_one_of(w, {"fine", "good", "great", "ok", "okay", "acceptable", "healthy", "excellent", "fast", "quick",
                       "snappy", "irrelevant", "useless", "pointless"});
}

bool upgrade_word(const std::string& w) {
  return is_one_of(w, {"upgrade",   "upgrading", "buy",    "get",      "getting",    "need",     "needs",     "want",
                       "more",      "faster",    "higher", "increase", "increasing", "improve",  "improving", "better",
                       "switch",    "move",      "use",    "using",    "add",        "adding",   "boost",     "invest",
                       "recommend", "should",    "help",   "helps",    "fix",        "keep",     "put",       "bigger",
                       "larger",    "extra",     "choose", "pick",     "require",    "requires", "go"});
}

struct Mention {
  Concept topic;
  bool positive;
  bool upgrade;  // in a clause that asks for something
};

// Lower-case words of a clause part; apostrophes kept ("isn't"), the curly one
// folded into the straight one.
Words words_of(std::string_view s) {
  Words out;
  std::string cur;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
        static_cast<unsigned char>(s[i + 2]) == 0x99) {
      cur += '\'';
      i += 2;
      continue;
    }
    if (std::isalnum(c) || c == '\'') {
      cur += char(std::tolower(c));
    } else if (!cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

void scan_part(const Words& w, bool forced_negative, std::vector<Mention>& out) {
  bool upgrade = false;
  for (const std::string& x : w) upgrade = upgrade || upgrade_word(x);
  std::vector<bool> taken(w.size(), false);
  for (const Pattern& p : patterns()) {
    const size_t n = p.words.size();
    for (size_t i = 0; i + n <= w.size(); ++i) {
      if (!std::equal(p.words.begin(), p.words.end(), w.begin() + long(i))) continue;
      if (std::any_of(taken.begin() + long(i), taken.begin() + long(i + n), [](bool t) { return t; })) continue;
      std::fill(taken.begin() + long(i), taken.begin() + long(i + n), true);
      bool negated = forced_negative;
      if (!p.immune) {
        for (size_t j = 0; j < w.size(); ++j) {
          if (j < i && negation_word(w[j]) && !post_negation_at(w, j)) negated = true;  // "not compute"
          if (j >= i + n && post_negation_at(w, j)) negated = true;                     // "FLOPS won't help"
          const bool phase = p.topic == Concept::Decode || p.topic == Concept::Prefill;
          if (phase && j >= i + n && j > 0 && sentiment_word(w[j]) &&
              is_one_of(w[j - 1], {"is", "are", "was", "looks", "seems", "feels", "quite", "very", "pretty", "really",
                                   "already", "perfectly"}))
            negated = true;  // "prefill is fine"
          if (p.topic == Concept::Compute &&
              is_one_of(w[j], {"idle", "underutilized", "underused", "starved", "waiting"}))
            negated = true;  // "the cores sit idle"
        }
      }
      out.push_back({p.topic, !negated, upgrade});
    }
  }
}

// Splits on sentence and clause boundaries, then on "rather than" /
// "instead of", whose right side is negated.
std::vector<Mention> read_answer(std::string_view text) {
  std::vector<std::string> clauses(1);
  for (char c : text) {
    if (std::string_view(".!?;:,()\n").find(c) != std::string_view::npos)
      clauses.emplace_back();
    else
      clauses.back() += c;
  }
  static const std::array<const char*, 12> joints = {"but", "however", "whereas", "while", "although", "though",
                                                     "yet", "so",      "because", "since", "and",      "then"};
  std::vector<Mention> out;
  for (const std::string& clause : clauses) {
    const Words all = words_of(clause);
    std::vector<Words> parts(1);
    for (const std::string& w : all) {
      if (std::find(joints.begin(), joints.end(), w) != joints.end()) {
        parts.emplace_back();
        continue;
      }
      parts.back().push_back(w);
    }
    for (const Words& part : parts) {
      size_t cut = part.size();
      for (size_t i = 0; i + 1 < part.size(); ++i)
        if ((part[i] == "rather" && part[i + 1] == "than") || (part[i] == "instead" && part[i + 1] == "of")) {
          cut = i;
          break;
        }
      scan_part(Words(part.begin(), part.begin() + long(cut)), false, out);
      if (cut < part.size()) scan_part(Words(part.begin() + long(cut) + 2, part.end()), true, out);
    }
  }
  return out;
}

bool said(const std::vector<Mention>& ms, std::initializer_list<Concept> cs, bool upgrade_only = false) {
  for (const Mention& m : ms)
    if (m.positive && (!upgrade_only || m.upgrade) && std::find(cs.begin(), cs.end(), m.topic) != cs.end()) return true;
  return false;
}

GradePoint grade_phase(const std::vector<Mention>& ms, const Expected& e) {
  const bool dec = said(ms, {Concept::Decode}), pre = said(ms, {Concept::Prefill});
  const bool right = e.phase == Phase::Decode ? dec : pre, wrong = e.phase == Phase::Decode ? pre : dec;
  const std::string want(phase_name(e.phase)),
      other(phase_name(e.phase == Phase::Decode ? Phase::Prefill : Phase::Decode));
  if (right && !wrong) return {Mark::Right, "Right: " + want + " is the struggling phase (" + e.phase_evidence + ")."};
  if (right && wrong)
    return {Mark::Partial, "You blame both phases; only " + want + " is struggling (" + e.phase_evidence + ")."};
  if (wrong)
    return {Mark::Wrong, "Not " + other + ": the struggling phase is " + want + " (" + e.phase_evidence + ")."};
  return {Mark::Missing, "Say which phase struggles: " + want + " (" + e.phase_evidence + ")."};
}

GradePoint grade_resource(const std::vector<Mention>& ms, const Expected& e) {
  const bool mem = said(ms, {Concept::Bandwidth, Concept::Residency, Concept::Capacity, Concept::Memory});
  const bool cmp = said(ms, {Concept::Compute});
  const bool want_mem = e.resource == Resource::MemoryBandwidth;
  const bool right = want_mem ? mem : cmp, wrong = want_mem ? cmp : mem;
  const std::string want(resource_name(e.resource));
  if (right && !wrong) return {Mark::Right, "Right: the limit is " + want + " (" + e.resource_evidence + ")."};
  if (right && wrong)
    return {Mark::Partial,
            "You name both compute and memory; only " + want + " limits it (" + e.resource_evidence + ")."};
  if (wrong)
    return {Mark::Wrong, "The limit is " + want + ", not " +
                             std::string(resource_name(want_mem ? Resource::Compute : Resource::MemoryBandwidth)) +
                             " (" + e.resource_evidence + ")."};
  return {Mark::Missing, "Name the limiting resource: " + want + " (" + e.resource_evidence + ")."};
}

GradePoint grade_upgrade(const std::vector<Mention>& ms, const Expected& e) {
  const bool bw = said(ms, {Concept::Bandwidth, Concept::Residency, Concept::Memory}, true);
  const bool cap = said(ms, {Concept::Capacity}, true);
  const bool cmp = said(ms, {Concept::Compute}, true);
  const std::string fix = e.resource == Resource::MemoryBandwidth
                              ? "faster memory (more HBM/VRAM bandwidth, all weights resident), not more TFLOPS"
                              : "more TFLOPS (or lower-precision math), not more bandwidth";
  if (e.resource == Resource::MemoryBandwidth) {
    if ((bw || cap) && cmp)
      return {Mark::Partial,
              "You ask for both memory and compute; only memory helps: " + fix + " (" + e.upgrade_evidence + ")."};
    if (bw) return {Mark::Right, "Right: " + fix + " (" + e.upgrade_evidence + ")."};
    if (cap)
      return {Mark::Partial, "More memory capacity only helps if the weights do not fit now; the lever is bandwidth: " +
                                 fix + " (" + e.upgrade_evidence + ")."};
    if (cmp) return {Mark::Wrong, "More compute would not help: " + fix + " (" + e.upgrade_evidence + ")."};
  } else {
    if (cmp && (bw || cap))
      return {Mark::Partial,
              "You ask for both compute and memory; only compute helps: " + fix + " (" + e.upgrade_evidence + ")."};
    if (cmp) return {Mark::Right, "Right: " + fix + " (" + e.upgrade_evidence + ")."};
    if (bw || cap) return {Mark::Wrong, "More memory would not help: " + fix + " (" + e.upgrade_evidence + ")."};
  }
  return {Mark::Missing, "Say which upgrade helps: " + fix + " (" + e.upgrade_evidence + ")."};
}

double points(Mark m) { return m == Mark::Right ? 1.0 : m == Mark::Partial ? 0.5 : 0.0; }

}  // namespace

std::string_view mark_name(Mark m) {
  switch (m) {
    case Mark::Right:
      return "right";
    case Mark::Partial:
      return "partial";
    case Mark::Wrong:
      return "wrong";
    case Mark::Missing:
      return "missing";
  }
  return "?";
}

double Grade::score() const { return points(phase.mark) + points(resource.mark) + points(upgrade.mark); }

Expected expected_from(const Diagnosis& d) {
  Expected e;
  e.phase = d.struggling;
  e.resource = d.limiting;
  const Observation& o = d.in.obs;
  e.phase_evidence = "TTFT " + fmt_seconds(o.ttft_s) + " against a " + fmt_seconds(d.in.target_ttft_s) +
                     " target, decode " + fmt_num(o.decode_tok_s) + " tok/s against " + fmt_num(d.in.target_tok_s);
  const PhaseReport& p = d.struggling == Phase::Decode ? d.decode : d.prefill;
  e.resource_evidence = fmt_num(p.intensity) + " FLOP/byte, " + p.bound_basis + "; it runs at " +
                        fmt_bandwidth(p.achieved_bw) + " and " + fmt_flops(p.achieved_flops);
  e.upgrade_evidence =
      "2x FLOP/s gives " + fmt_factor(d.gain_2x_flops) + ", 2x bandwidth gives " + fmt_factor(d.gain_2x_bandwidth);
  return e;
}

Grade grade_answer(std::string_view answer, const Expected& e) {
  const std::vector<Mention> ms = read_answer(answer);
  Grade g;
  g.answer = std::string(answer);
  g.phase = grade_phase(ms, e);
  g.resource = grade_resource(ms, e);
  g.upgrade = grade_upgrade(ms, e);
  return g;
}

}  // namespace kvlab::perf
