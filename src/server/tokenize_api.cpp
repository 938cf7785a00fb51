#include "server/tokenize_api.h"

#include <nlohmann/json.hpp>

#include "server/openai_api.h"

namespace kvlab::server {
namespace {

using nlohmann::json;

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
  const bool add_special = boolean(j, "add_special").value_or(false);
  const bool parse_special = boolean(j, "parse_special").value_or(true);
  const bool with_pieces = boolean(j, "with_pieces").value_or(false);
  json tokens = json::array();
  for (int32_t id : tok.encode(content->get<std::string>(), add_special, parse_special)) {
    if (!with_pieces) {
      tokens.push_back(id);
      continue;
    }
    const std::string piece = tok.piece(id, true);
    json shown = piece;
    if (!valid_utf8(piece)) {
      shown = json::array();
      for (unsigned char c : piece) shown.push_back(int(c));
    }
    tokens.push_back({{"id", id}, {"piece", shown}});
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
