// GGUF writer: the inverse of File, for `kvlab quantize` and for tests that
// need well-formed (and deliberately broken) files. Keys and tensors are
// written in insertion order; tensor data is aligned to `alignment`.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gguf/file.h"

namespace kvlab::gguf {

class Writer {
 public:
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
  // Copies one metadata value (any type, arrays included) from a parsed file.
  void copy_value(const std::string& key, const Value& v);

  // `data` must hold exactly the bytes the dtype and dims imply.
  void add_tensor(const std::string& name, std::vector<uint64_t> dims, tensor::DType type,
                  std::span<const uint8_t> data);

  void set_version(uint32_t v) { version_ = v; }
  void set_alignment(uint32_t a) { alignment_ = a; }

  std::vector<uint8_t> serialize() const;
  // Writes to `path` through a temporary file and rename, so a failure never
  // leaves a half-written model behind. Throws kvlab::Error.
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    tensor::DType type;
    std::vector<uint8_t> data;
  };
  std::vector<uint8_t> kv_;  // encoded key/value pairs
  uint64_t n_kv_ = 0;
  std::vector<Tensor> tensors_;
  uint32_t version_ = 3;
  uint32_t alignment_ = 32;
};

}  // namespace kvlab::gguf
