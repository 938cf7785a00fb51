// The base log-probabilities file of llama.cpp's `llama-perplexity
// --kl-divergence-base`, written and read byte for byte as llama.cpp does,
// so that a base from either engine can be compared against by the other:
//
//   "_logits_"                      8 bytes, no terminator
//   n_ctx, n_vocab, n_chunk         int32 each (tokens per chunk, logits per row, chunks)
//   tokens[n_chunk * n_ctx]         int32, the text's tokens as tokenized (no BOS substituted)
//   per chunk, per scored prediction (the n_ctx - 1 - n_ctx/2 after chunk
//   positions n_ctx/2 .. n_ctx-2, lab/quality/perplexity.h), one row of
//   row_words(n_vocab) uint16:
//     float scale, float min_log_prob   (the first four uint16)
//     q[n_vocab]                        log p(i) = scale * q[i] + min_log_prob
//     padding to an even count
//   Encoding (llama.cpp's): logits are clamped below at max - 16, and
//   q[i] = round((logit[i] - clamped min) / scale), scale = (max - min) / 65535:
//   16 nats over 65535 steps, a resolution of 2.4e-4 nats.
// Every number is in the host's byte order (little-endian on every machine
// either engine runs on).
#pragma once
#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace kvlab::engine {

struct LogitsFileHeader {
  int32_t n_ctx = 0, n_vocab = 0, n_chunk = 0;
  size_t scored_per_chunk() const { return size_t(n_ctx) - 1 - size_t(n_ctx) / 2; }
};

// uint16 words per row: the two floats, then n_vocab values padded to even.
size_t row_words(int32_t n_vocab);

// Encodes one row of raw logits (logits.size() = n_vocab) into `row`
// (row_words(n_vocab) words).
void quantize_log_probs(std::span<const float> logits, std::span<uint16_t> row);
// log p(i) of an encoded row.
float row_log_prob(std::span<const uint16_t> row, size_t i);

// Writes a base: the header and tokens at construction, then one chunk's
// rows at a time. Throws kvlab::Error when the file cannot be written.
class LogitsFileWriter {
 public:
  LogitsFileWriter(const std::string& path, const LogitsFileHeader& header, std::span<const int32_t> tokens);
  // Row j of the chunk under way, to be filled by quantize_log_probs.
  std::span<uint16_t> row(size_t j);
  void write_chunk();  // appends the chunk's rows

 private:
  std::string path_;
  std::ofstream out_;
  size_t words_;
  std::vector<uint16_t> rows_;
};

// Reads a base, checking it whole before anything is computed from it:
// throws kvlab::Error (one line, naming the file) on a wrong magic, a
// header out of range, a size that is not the header's, or a token outside
// the vocabulary.
class LogitsFileReader {
 public:
  explicit LogitsFileReader(const std::string& path);
  const LogitsFileHeader& header() const { return header_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // The next chunk's rows: scored_per_chunk() rows of row_words(n_vocab).
  std::span<const uint16_t> next_chunk();

 private:
  std::string path_;
  std::ifstream in_;
  LogitsFileHeader header_;
  std::vector<int32_t> tokens_;
  std::vector<uint16_t> rows_;
};

}  // namespace kvlab::engine
