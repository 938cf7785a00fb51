#include "lab/quality/logits_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "common/error.h"

namespace kvlab::engine {
namespace {

constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
constexpr size_t kHeaderBytes = sizeof kMagic + 3 * sizeof(int32_t);
// Bounds that keep a corrupt header from asking for unbounded memory, and
// expected_bytes() under 2^63 (2^20 chunks * 2^19 rows * 2^23 bytes).
constexpr int32_t kMaxCtx = 1 << 20, kMaxVocab = 1 << 22, kMaxChunks = 1 << 20;
// Log-probabilities more than this many nats under the top one are stored
// as the floor (llama.cpp's clamp).
constexpr float kRangeNats = 16.f;

uint64_t expected_bytes(const LogitsFileHeader& h) {
  const uint64_t tokens = uint64_t(h.n_ctx) * uint64_t(h.n_chunk);
  return kHeaderBytes + tokens * sizeof(int32_t) +
         uint64_t(h.n_chunk) * h.scored_per_chunk() * row_words(h.n_vocab) * sizeof(uint16_t);
}

}  // namespace

size_t row_words(int32_t n_vocab) { return 2 * ((size_t(n_vocab) + 1) / 2) + 4; }

void quantize_log_probs(std::span<const float> logits, std::span<uint16_t> row) {
  const auto [lo, hi] = std::minmax_element(logits.begin(), logits.end());
  const float max_logit = *hi, min_logit = std::max(*lo, max_logit - kRangeNats);
  double sum_exp = 0;
  for (const float l : logits) sum_exp += std::exp(l - max_logit);
  const float log_sum_exp = float(std::log(sum_exp));
  const float header[2] = {(max_logit - min_logit) / 65535.f, min_logit - max_logit - log_sum_exp};
  std::memcpy(row.data(), header, sizeof header);
  uint16_t* q = row.data() + 4;
  std::fill(q, row.data() + row.size(), uint16_t(0));
  if (header[0] == 0) return;  // every logit equal: all at the floor
  const float inv_scale = 1 / header[0];
  for (size_t i = 0; i < logits.size(); ++i)
    if (logits[i] > min_logit) q[i] = uint16_t(std::min(65535L, std::lrint(inv_scale * (logits[i] - min_logit))));
}

float row_log_prob(std::span<const uint16_t> row, size_t i) {
  float header[2];
  std::memcpy(header, row.data(), sizeof header);
  return header[0] * float(row[4 + i]) + header[1];
}

LogitsFileWriter::LogitsFileWriter(const std::string& path, const LogitsFileHeader& header,
                                   std::span<const int32_t> tokens)
    : path_(path), out_(path, std::ios::binary | std::ios::trunc), words_(row_words(header.n_vocab)),
      rows_(header.scored_per_chunk() * words_) {
  if (!out_) throw Error("cannot write " + path);
  out_.write(kMagic, sizeof kMagic);
  out_.write(reinterpret_cast<const char*>(&header.n_ctx), sizeof header.n_ctx);
  out_.write(reinterpret_cast<const char*>(&header.n_vocab), sizeof header.n_vocab);
  out_.write(reinterpret_cast<const char*>(&header.n_chunk), sizeof header.n_chunk);
  out_.write(reinterpret_cast<const char*>(tokens.data()),
             std::streamsize(size_t(header.n_ctx) * size_t(header.n_chunk) * sizeof(int32_t)));
  if (!out_) throw Error("cannot write " + path);
}

std::span<uint16_t> LogitsFileWriter::row(size_t j) { return std::span(rows_).subspan(j * words_, words_); }

void LogitsFileWriter::write_chunk() {
  out_.write(reinterpret_cast<const char*>(rows_.data()), std::streamsize(rows_.size() * sizeof(uint16_t)));
  out_.flush();
  if (!out_) throw Error("cannot write " + path_ + " (disk full?)");
}

LogitsFileReader::LogitsFileReader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
  if (!in_) throw Error("cannot open the KL-divergence base " + path);
  char magic[sizeof kMagic];
  in_.read(magic, sizeof magic);
  in_.read(reinterpret_cast<char*>(&header_.n_ctx), sizeof header_.n_ctx);
  in_.read(reinterpret_cast<char*>(&header_.n_vocab), sizeof header_.n_vocab);
  in_.read(reinterpret_cast<char*>(&header_.n_chunk), sizeof header_.n_chunk);
  if (!in_ || std::memcmp(magic, kMagic, sizeof kMagic) != 0)
    throw Error(path + " is not a llama-perplexity logits file (no \"_logits_\" header)");
  const LogitsFileHeader& h = header_;
  if (h.n_ctx < 4 || h.n_ctx > kMaxCtx || h.n_vocab < 1 || h.n_vocab > kMaxVocab || h.n_chunk < 1 ||
      h.n_chunk > kMaxChunks)
    throw Error(path + ": header out of range (n_ctx " + std::to_string(h.n_ctx) + ", n_vocab " +
                std::to_string(h.n_vocab) + ", n_chunk " + std::to_string(h.n_chunk) + ")");
  const uint64_t want = expected_bytes(h), have = std::filesystem::file_size(path);
  if (have != want)
    throw Error(path + " has " + std::to_string(have) + " bytes; its header (n_ctx " + std::to_string(h.n_ctx) +
                ", n_vocab " + std::to_string(h.n_vocab) + ", " + std::to_string(h.n_chunk) + " chunks) needs " +
                std::to_string(want) + (have < want ? " (truncated)" : ""));
  tokens_.resize(size_t(h.n_ctx) * size_t(h.n_chunk));
  in_.read(reinterpret_cast<char*>(tokens_.data()), std::streamsize(tokens_.size() * sizeof(int32_t)));
  if (!in_) throw Error("cannot read " + path);
  for (const int32_t t : tokens_)
    if (t < 0 || t >= h.n_vocab)
      throw Error(path + ": token " + std::to_string(t) + " outside its vocabulary of " + std::to_string(h.n_vocab));
  rows_.resize(h.scored_per_chunk() * row_words(h.n_vocab));
}

std::span<const uint16_t> LogitsFileReader::next_chunk() {
  in_.read(reinterpret_cast<char*>(rows_.data()), std::streamsize(rows_.size() * sizeof(uint16_t)));
  if (!in_) throw Error("cannot read " + path_ + " (past its last chunk?)");
  return rows_;
}

}  // namespace kvlab::engine
