// The bodies of POST /api/simulate and /api/diagnose, and of GET /api/catalog
// (the names they take), free of any HTTP library: a JSON object of optional
// fields in, the simulator's or the diagnosis's JSON report out. Throws ApiException for a body that is not a
// JSON object or a field of the wrong type, kvlab::Error for a value out of
// range or an unknown name (both 400 at the handler).
#pragma once
#include <string>

namespace kvlab::server {

// Fields: model (a catalog id), hw, prompt, gen, batch, weights, kv,
// compute, no_kv_cache, tp, pp, link (a link id; the hardware's own if
// absent); with serve (an object: rate or concurrency, requests,
// prompt_len, output_len, prefix_share, prefix_len, seed, parallel,
// ctx_size, prefill_chunk, max_queue, kv_blocks) the serving simulation's
// report instead (kvlab simulate --serve -o json), on that layout.
std::string simulate_request(const std::string& body);
// Fields: ttft_ms, decode_tok_s, prompt_tokens, gen_tokens, no_kv_cache,
// model, weights, kv, hw, target_ttft_ms, target_tok_s, answer (grades it).
std::string diagnose_request(const std::string& body);
// GET /api/catalog: the model, hardware and link ids the page offers.
std::string catalog_response();

}  // namespace kvlab::server
