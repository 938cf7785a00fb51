#include "gguf/writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "common/error.h"

namespace kvlab::gguf {
namespace {

// Grown by resize and filled by memcpy: GCC 12 warns (-Wstringop-overflow,
// a false positive) on a range insert into the still-empty vector.
template <class T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}
void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}
void put_key(std::vector<uint8_t>& out, const std::string& key, ValueType t) {
  put_string(out, key);
  put<uint32_t>(out, uint32_t(t));
}

}  // namespace

void Writer::set_u32(const std::string& k, uint32_t v) { put_key(kv_, k, ValueType::U32), put(kv_, v), ++n_kv_; }
void Writer::set_i32(const std::string& k, int32_t v) { put_key(kv_, k, ValueType::I32), put(kv_, v), ++n_kv_; }
void Writer::set_u64(const std::string& k, uint64_t v) { put_key(kv_, k, ValueType::U64), put(kv_, v), ++n_kv_; }
void Writer::set_f32(const std::string& k, float v) { put_key(kv_, k, ValueType::F32), put(kv_, v), ++n_kv_; }
void Writer::set_bool(const std::string& k, bool v) { put_key(kv_, k, ValueType::Bool), put<uint8_t>(kv_, v), ++n_kv_; }
void Writer::set_string(const std::string& k, const std::string& v) {
  put_key(kv_, k, ValueType::String), put_string(kv_, v), ++n_kv_;
}
void Writer::set_string_array(const std::string& k, const std::vector<std::string>& v) {
  put_key(kv_, k, ValueType::Array);
  put<uint32_t>(kv_, uint32_t(ValueType::String));
  put<uint64_t>(kv_, v.size());
  for (const auto& s : v) put_string(kv_, s);
  ++n_kv_;
}
void Writer::set_f32_array(const std::string& k, const std::vector<float>& v) {
  put_key(kv_, k, ValueType::Array);
  put<uint32_t>(kv_, uint32_t(ValueType::F32));
  put<uint64_t>(kv_, v.size());
  for (float f : v) put(kv_, f);
  ++n_kv_;
}
void Writer::set_i32_array(const std::string& k, const std::vector<int32_t>& v) {
  put_key(kv_, k, ValueType::Array);
  put<uint32_t>(kv_, uint32_t(ValueType::I32));
  put<uint64_t>(kv_, v.size());
  for (int32_t i : v) put(kv_, i);
  ++n_kv_;
}

void Writer::copy_value(const std::string& key, const Value& v) {
  put_key(kv_, key, v.type);
  if (const ArrayView* a = v.as_array()) {
    // The element bytes are the file's own encoding: copy them verbatim.
    put<uint32_t>(kv_, uint32_t(a->elem));
    put<uint64_t>(kv_, a->count);
    kv_.insert(kv_.end(), a->data, a->data + a->n_bytes);
  } else if (const std::string* s = v.as_string()) {
    put_string(kv_, *s);
  } else {
    switch (v.type) {
      case ValueType::U8: put<uint8_t>(kv_, uint8_t(std::get<uint64_t>(v.v))); break;
      case ValueType::I8: put<int8_t>(kv_, int8_t(std::get<int64_t>(v.v))); break;
      case ValueType::U16: put<uint16_t>(kv_, uint16_t(std::get<uint64_t>(v.v))); break;
      case ValueType::I16: put<int16_t>(kv_, int16_t(std::get<int64_t>(v.v))); break;
      case ValueType::U32: put<uint32_t>(kv_, uint32_t(std::get<uint64_t>(v.v))); break;
      case ValueType::I32: put<int32_t>(kv_, int32_t(std::get<int64_t>(v.v))); break;
      case ValueType::U64: put<uint64_t>(kv_, std::get<uint64_t>(v.v)); break;
      case ValueType::I64: put<int64_t>(kv_, std::get<int64_t>(v.v)); break;
      case ValueType::F32: put<float>(kv_, float(std::get<double>(v.v))); break;
      case ValueType::F64: put<double>(kv_, std::get<double>(v.v)); break;
      case ValueType::Bool: put<uint8_t>(kv_, std::get<bool>(v.v) ? 1 : 0); break;
      case ValueType::String: case ValueType::Array: break;
    }
  }
  ++n_kv_;
}

void Writer::add_tensor(const std::string& name, std::vector<uint64_t> dims, tensor::DType type,
                        std::span<const uint8_t> data) {
  uint64_t rows = 1;
  for (size_t i = 1; i < dims.size(); ++i) rows *= dims[i];
  const auto row = tensor::row_bytes(type, dims.at(0));
  if (!row || *row * rows != data.size())
    throw Error("tensor '" + name + "': " + std::to_string(data.size()) + " bytes do not match its shape and dtype");
  tensors_.push_back({name, std::move(dims), type, std::vector<uint8_t>(data.begin(), data.end())});
}

std::vector<uint8_t> Writer::serialize() const {
  std::vector<uint8_t> out;
  put<uint32_t>(out, 0x46554747);  // "GGUF"
  put<uint32_t>(out, version_);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, n_kv_);
  out.insert(out.end(), kv_.begin(), kv_.end());
  uint64_t offset = 0;
  auto align = [&](uint64_t x) { return (x + alignment_ - 1) / alignment_ * alignment_; };
  for (const auto& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, uint32_t(t.dims.size()));
    for (uint64_t d : t.dims) put<uint64_t>(out, d);
    put<uint32_t>(out, uint32_t(t.type));
    put<uint64_t>(out, offset);
    offset = align(offset + t.data.size());
  }
  out.resize(align(out.size()), 0);
  for (const auto& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    out.resize(align(out.size()), 0);
  }
  return out;
}

void Writer::write(const std::string& path) const {
  const std::vector<uint8_t> bytes = serialize();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw Error(tmp + ": cannot create: " + std::strerror(errno));
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    if (!f.flush()) {
      std::remove(tmp.c_str());
      throw Error(tmp + ": write failed (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw Error(path + ": cannot rename the finished file into place: " + std::strerror(err));
  }
}

}  // namespace kvlab::gguf
