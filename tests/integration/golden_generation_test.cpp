// Greedy continuations against llama.cpp (tests/golden/*.generate.json, made
// by tests/golden/gen_golden.py through llama-cpp-python; see its README).
// kvlab is fed llama.cpp's prompt ids and must pick every one of the 64
// following ids; its tokenizer must also produce those prompt ids itself.
#include <gtest/gtest.h>

#include <cmath>

#include "common/models.h"
#include "engine/session.h"
#include "sample/sampler.h"

namespace kvlab {
namespace {

using Ids = std::vector<int32_t>;

void check_fixture(const std::string& fixture, const std::string& model_path) {
  const nlohmann::json j = test::read_json(test::kGoldenDir + "/" + fixture);
  const auto& lm = test::load_model(model_path);
  ASSERT_GE(j["cases"].size(), 5u);
  int matched = 0;
  for (const auto& c : j["cases"]) {
    const std::string name = c["name"];
    const Ids prompt = c["prompt_ids"].get<Ids>(), want = c["ids"].get<Ids>();
    EXPECT_EQ(lm.tok->encode(c["prompt"].get<std::string>(), c["add_bos"], c["parse_special"]), prompt) << name;

    engine::SessionOptions o;
    o.n_ctx = 512;
    o.n_threads = 2;
    engine::Session s(*lm.model, o);
    std::span<const float> logits = s.prefill(prompt);
    Ids got;
    for (size_t step = 0; step < want.size(); ++step) {
      // The first steps' top-5 logits: agreement to ~1e-2 absolute on logits
      // of magnitude ~10-20 (both use q8 activations against q4/q8 weights; the
      // float accumulation order differs).
      if (step < c["top5"].size())
        for (const auto& pair : c["top5"][step]) {
          const int id = pair[0];
          EXPECT_NEAR(logits[size_t(id)], pair[1].get<double>(), 2e-2) << name << " step " << step << " id " << id;
        }
      got.push_back(sample::argmax(logits));
      if (got.back() != want[step]) {
        ADD_FAILURE() << fixture << " case '" << name << "' diverges at step " << step << ": kvlab " << got.back()
                      << ", llama.cpp " << want[step] << " (llama.cpp top-2 margin there: "
                      << c["margins"][step].get<double>() << ")";
        break;
      }
      if (step + 1 < want.size()) logits = s.decode(want[step]);
    }
    if (got == want) ++matched;
  }
  std::printf("  %s: %d/%zu cases match all %zu ids\n", fixture.c_str(), matched, j["cases"].size(),
              j["cases"][0]["ids"].size());
}

TEST(GoldenGeneration, DefaultModelMatchesLlamaCpp) {
  check_fixture("SmolLM2-135M-Instruct.Q4_1.generate.json", test::kDefaultModel);
}

TEST(GoldenGeneration, StoriesModelMatchesLlamaCpp) { check_fixture("stories260K.generate.json", test::kStories); }

}  // namespace
}  // namespace kvlab
