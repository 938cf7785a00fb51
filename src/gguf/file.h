// GGUF reader: mmap the file, parse and validate header, metadata and tensor
// table once; afterwards every accessor works on checked data.
//
// Layout (GGUF v2/v3, little-endian):
//   u32 magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv      x { string key | u32 value_type | value }
//   n_tensors x { string name | u32 n_dims | u64 dims[n_dims] | u32 dtype | u64 offset }
//   padding to general.alignment (default 32) | tensor data (offsets relative to here)
// string = u64 length + bytes (no terminator). array = u32 elem_type + u64 count + elems.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/huge_buffer.h"
#include "tensor/dtype.h"

namespace kvlab::gguf {

enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
  String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* value_type_name(ValueType t);

// An array is kept as a view into the mapping and decoded on request, so a
// file that declares a huge array costs no memory until someone asks for it.
struct ArrayView {
  ValueType elem = ValueType::U8;
  uint64_t count = 0;
  const uint8_t* data = nullptr;  // first element
  uint64_t n_bytes = 0;           // validated: lies inside the file
};

// A metadata value. Integers are widened to uint64_t/int64_t, floats to double.
struct Value {
  ValueType type = ValueType::U8;
  std::variant<uint64_t, int64_t, double, bool, std::string, ArrayView> v;

  std::optional<int64_t> as_int() const;   // integer types whose value fits int64
  std::optional<double> as_float() const;  // F32/F64 (integers are not floats)
  const std::string* as_string() const;
  const ArrayView* as_array() const;
  std::string to_display() const;  // for `kvlab info`
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> dims;    // ggml order: dims[0] is the contiguous (row) length
  tensor::DType dtype;
  uint64_t offset = 0;           // relative to data section start
  uint64_t n_bytes = 0;          // derived from dims and dtype, validated
  const uint8_t* data = nullptr; // points into the mapping
  uint64_t n_elements() const;
  uint64_t rows() const;         // product of dims[1..]
};

// Where a file's bytes live once opened.
//  Mapped:   mmap of the file; pages come in on first touch and are shared
//            with other processes through the page cache.
//  Resident: read into a HugeBuffer (common/huge_buffer.h). A decode step
//            streams every weight once per token, and huge pages spare it a
//            TLB miss every 4 KiB (decode about 1.2x as fast as mapped;
//            `kvlab bench` against `kvlab bench --mmap`). Costs a copy at
//            load time.
enum class Residency { Mapped, Resident };

class File {
 public:
  // Opens, reads or maps, and validates `path`. Throws
  // kvlab::Error("<path>: <what is wrong>").
  static File open(const std::string& path, Residency residency = Residency::Mapped);
  // Parses an in-memory image (for fuzzing and tests); `name` is used in errors.
  static File parse(std::span<const uint8_t> bytes, const std::string& name);

  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  File(const File&) = delete;
  ~File();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return size_; }
  uint64_t alignment() const { return alignment_; }

  const std::map<std::string, Value, std::less<>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;
  // Typed lookups. `require_*` throw "<path>: missing required key 'k'" or
  // "<path>: key 'k' has type X, expected Y".
  int64_t require_int(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  double require_float(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::string require_string(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  // Arrays, decoded. nullopt when the key is absent; throws when the key has
  // another type ("key 'k' is an array of u32, expected string").
  std::optional<std::vector<std::string>> get_string_array(std::string_view key) const;
  std::optional<std::vector<float>> get_float_array(std::string_view key) const;    // F32/F64 elems
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;    // integer elems

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  // Throws "<path>: missing required tensor 'name'" / shape mismatch errors.
  const TensorInfo& require_tensor(std::string_view name, std::vector<uint64_t> dims) const;
  // `p` (a tensor's data) as a writable pointer into a Resident file's copy,
  // where the model re-lays out its matrices for the kernels; nullptr for a
  // mapped file.
  uint8_t* resident_bytes(const uint8_t* p);

 private:
  File() = default;
  void parse_all();
  [[noreturn]] void fail(const std::string& what) const;

  std::string path_;
  uint32_t version_ = 0;
  uint64_t size_ = 0;
  uint64_t alignment_ = 32;
  const uint8_t* base_ = nullptr;  // the file's bytes (mapping, resident copy or caller's buffer)
  void* map_ = nullptr;            // non-null when we own an mmap of the file
  HugeBuffer resident_;            // the copy, for Residency::Resident
  uint64_t data_start_ = 0;        // file offset of the tensor data section
  std::map<std::string, Value, std::less<>> kv_;
  std::vector<TensorInfo> tensors_;
};

}  // namespace kvlab::gguf
