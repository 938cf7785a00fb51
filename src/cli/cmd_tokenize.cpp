// kvlab tokenize: print the ids (and pieces) a text encodes to.
#include <cstdio>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/error.h"
#include "gguf/file.h"
#include "tokenizer/gguf_vocab.h"

namespace kvlab::cli {
namespace {

struct TokenizeOptions {
  std::string model, file;
  std::optional<std::string> prompt;  // set, even to "", when -p is given
  bool json = false, no_bos = false, no_special = false;
};

void tokenize(const TokenizeOptions& o) {
  if (o.prompt.has_value() == !o.file.empty()) throw Error("give exactly one of -p TEXT or -f FILE");
  const std::string text = o.prompt ? *o.prompt : read_file(o.file);
  // Only the vocabulary is needed: skip binding the weights.
  const gguf::File file = gguf::File::open(resolve_model_path(o.model));
  const auto tok = tokenizer::Tokenizer::create(tokenizer::vocab_from_gguf(file));
  const std::vector<int32_t> ids = tok->encode(text, !o.no_bos, !o.no_special);
  if (o.json) {
    nlohmann::json j;
    j["ids"] = ids;
    std::vector<std::string> pieces;
    for (int32_t id : ids) pieces.push_back(tok->piece(id, true));
    j["pieces"] = pieces;
    j["n_tokens"] = ids.size();
    // A piece can be part of a UTF-8 character (byte tokens): shown as U+FFFD.
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return;
  }
  for (int32_t id : ids) {
    std::string p = tok->piece(id, true);
    std::printf("%6d  '%s'\n", id, p.c_str());
  }
  std::fprintf(stderr, "%zu tokens\n", ids.size());
}

}  // namespace

void add_tokenize_command(CLI::App& root) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* app = root.add_subcommand("tokenize", "print the token ids of a text");
  app->add_option("-m,--model", o->model, "GGUF model file (default: the default model)");
  app->add_option("-p,--prompt", o->prompt, "text to tokenize");
  app->add_option("-f,--file", o->file, "read the text from a file");
  app->add_flag("--no-bos", o->no_bos, "do not add BOS/EOS even if the vocabulary asks for it");
  app->add_flag("--no-special", o->no_special, "treat special-token texts such as <|im_start|> as plain text");
  app->add_flag("--json", o->json, "print {\"ids\": [...], \"pieces\": [...]} on one line");
  app->callback([o] { tokenize(*o); });
}

}  // namespace kvlab::cli
