// llama.cpp server's /tokenize and /detokenize, so a client can map text to
// this model's ids (for logit_bias, say) and back without a tokenizer of its
// own:
//   POST /tokenize   {"content": TEXT, "add_special": false, "parse_special": true, "with_pieces": false}
//                    -> {"tokens": [ids]} or, with pieces, {"tokens": [{"id": ID, "piece": TEXT or [bytes]}]}
//   POST /detokenize {"tokens": [ids]} -> {"content": TEXT}
// A piece that is not valid UTF-8 on its own (part of a character) is given
// as its bytes, as llama.cpp does. Bad bodies throw ApiException (400).
#pragma once
#include <string>

#include "tokenizer/tokenizer.h"

namespace kvlab::server {

std::string tokenize_request(const std::string& body, const tokenizer::Tokenizer& tok);
std::string detokenize_request(const std::string& body, const tokenizer::Tokenizer& tok);

}  // namespace kvlab::server
