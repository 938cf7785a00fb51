#include "server/tokenize_api.h"

#include <nlohmann/json.hpp>

#include "server/openai_api.h"

namespace kvlab::server {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& message, const std::string& param, const std::string& code) {
  ApiError e;
  e.status = 400;
  e.message = message;
  e.param = param;
  e.code = code;
  throw ApiException{e};
}

bool flag(const json& j, const char* name, bool fallback) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail(std::string("'") + name + "' must be a boolean", name, "invalid_type");
  return it->get<bool>();
}

bool valid_utf8(const std::string& s) {
  try {
    (void)json(s).dump();  // the strict handler throws on invalid UTF-8
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

}  // namespace

std::string tokenize_request(const std::string& body, const tokenizer::Tokenizer& tok) {
  const json j = parse_body(body);
  auto content = j.find("content");
  if (content == j.end() || !content->is_string()) fail("'content' must be a string", "content", "invalid_type");
  const bool add_special = flag(j, "add_special", false), parse_special = flag(j, "parse_special", true);
  const bool with_pieces = flag(j, "with_pieces", false);
  json tokens = json::array();
  for (int32_t id : tok.encode(content->get<std::string>(), add_special, parse_special)) {
    if (!with_pieces) {
      tokens.push_back(id);
      continue;
    }
    const std::string piece = tok.piece(id, true);
    json bytes = json::array();
    for (unsigned char c : piece) bytes.push_back(int(c));
    tokens.push_back({{"id", id}, {"piece", valid_utf8(piece) ? json(piece) : bytes}});
  }
  return dump(json{{"tokens", tokens}});
}

std::string detokenize_request(const std::string& body, const tokenizer::Tokenizer& tok) {
  const json j = parse_body(body);
  auto tokens = j.find("tokens");
  if (tokens == j.end() || !tokens->is_array()) fail("'tokens' must be an array of token ids", "tokens", "invalid_type");
  std::vector<int32_t> ids;
  for (const json& t : *tokens) {
    if (!t.is_number_integer()) fail("'tokens' must be an array of token ids", "tokens", "invalid_type");
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= tok.n_vocab())
      fail("token id " + std::to_string(id) + " is out of range (0.." + std::to_string(tok.n_vocab() - 1) + ")",
           "tokens", "invalid_value");
    ids.push_back(int32_t(id));
  }
  return dump(json{{"content", tok.decode(ids, true)}});
}

}  // namespace kvlab::server
