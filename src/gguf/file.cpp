#include "gguf/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "common/error.h"

namespace kvlab::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint64_t kMaxKeyBytes = 1 << 16;
constexpr uint64_t kMaxDims = 4;              // GGML_MAX_DIMS
constexpr uint64_t kMaxElements = 1ull << 42;  // far above any real tensor; stops overflow games
constexpr int kMaxArrayDepth = 4;

// Bounds-checked little-endian reader over the file image. Every read that
// would pass the end reports what was being read and where.
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size, const std::string& path)
      : base_(base), size_(size), path_(path) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  const uint8_t* here() const { return base_ + pos_; }

  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const char* what, uint64_t max_len) {
    const uint64_t len = read<uint64_t>(what);
    if (len > max_len) fail(std::string(what) + " has absurd length " + std::to_string(len));
    need(len, what);
    std::string s(reinterpret_cast<const char*>(base_ + pos_), len);
    pos_ += len;
    return s;
  }
  void skip(uint64_t n, const char* what) {
    need(n, what);
    pos_ += n;
  }
  // A count read from the file is checked against the bytes left (at least
  // min_bytes per item) before anything is sized or looped from it. A true
  // count in a cut-off download fails here too, so the message says so.
  // The message is built only on failure: arrays are checked on every parse.
  void need_each(uint64_t count, uint64_t min_bytes, const char* what, const char* elem_type = nullptr) const {
    if (count > left() / min_bytes)
      fail((elem_type ? std::string(elem_type) + " " : std::string()) + what + " " + std::to_string(count) +
           " needs at least " + std::to_string(min_bytes) + " bytes each, only " + std::to_string(left()) +
           " left (truncated or corrupt file)");
  }
  void need(uint64_t n, const char* what) const {
    if (n > left())
      fail("truncated file: " + std::string(what) + " needs " + std::to_string(n) + " bytes at offset " +
           std::to_string(pos_) + ", only " + std::to_string(left()) + " left");
  }
  [[noreturn]] void fail(const std::string& what) const { throw Error(path_ + ": " + what); }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

uint64_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::Bool: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    case ValueType::String: case ValueType::Array: return 0;
  }
  return 0;
}

bool known_type(uint32_t t) { return t <= uint32_t(ValueType::F64); }

Value read_scalar(Cursor& c, ValueType t) {
  Value v;
  v.type = t;
  switch (t) {
    case ValueType::U8: v.v = uint64_t(c.read<uint8_t>("u8 value")); break;
    case ValueType::I8: v.v = int64_t(c.read<int8_t>("i8 value")); break;
    case ValueType::U16: v.v = uint64_t(c.read<uint16_t>("u16 value")); break;
    case ValueType::I16: v.v = int64_t(c.read<int16_t>("i16 value")); break;
    case ValueType::U32: v.v = uint64_t(c.read<uint32_t>("u32 value")); break;
    case ValueType::I32: v.v = int64_t(c.read<int32_t>("i32 value")); break;
    case ValueType::U64: v.v = c.read<uint64_t>("u64 value"); break;
    case ValueType::I64: v.v = c.read<int64_t>("i64 value"); break;
    case ValueType::F32: v.v = double(c.read<float>("f32 value")); break;
    case ValueType::F64: v.v = c.read<double>("f64 value"); break;
    case ValueType::Bool: {
      const uint8_t b = c.read<uint8_t>("bool value");
      if (b > 1) c.fail("bool value " + std::to_string(b) + " is neither 0 nor 1");
      v.v = b == 1;
      break;
    }
    case ValueType::String: v.v = c.read_string("string value", c.left()); break;
    case ValueType::Array: break;  // handled by read_value
  }
  return v;
}

// Walks an array's elements (recursively for nested arrays) to validate it and
// find its end, without materialising anything.
ArrayView read_array(Cursor& c, int depth) {
  if (depth > kMaxArrayDepth) c.fail("arrays nested deeper than " + std::to_string(kMaxArrayDepth));
  const uint32_t elem = c.read<uint32_t>("array element type");
  if (!known_type(elem)) c.fail("unknown array element type " + std::to_string(elem));
  ArrayView a;
  a.elem = ValueType(elem);
  a.count = c.read<uint64_t>("array length");
  a.data = c.here();
  const uint64_t start = c.pos();
  const char* elem_type = value_type_name(a.elem);
  if (const uint64_t sz = scalar_size(a.elem); sz != 0) {
    c.need_each(a.count, sz, "array length", elem_type);
    c.skip(a.count * sz, "array data");
  } else {
    c.need_each(a.count, 8, "array length", elem_type);  // a string or nested array's length field
    for (uint64_t i = 0; i < a.count; ++i) {
      if (a.elem == ValueType::String) c.skip(c.read<uint64_t>("string length"), "string in array");
      else read_array(c, depth + 1);
    }
  }
  a.n_bytes = c.pos() - start;
  return a;
}

Value read_value(Cursor& c, ValueType t) {
  if (t != ValueType::Array) return read_scalar(c, t);
  Value v;
  v.type = ValueType::Array;
  v.v = read_array(c, 1);
  return v;
}

// Decodes the elements of a validated array of scalars or strings.
template <class Fn>
void for_each_element(const ArrayView& a, const std::string& path, Fn&& fn) {
  Cursor c(a.data, a.n_bytes, path);
  for (uint64_t i = 0; i < a.count; ++i) fn(read_scalar(c, a.elem));
}

}  // namespace

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::Bool: return "bool";
    case ValueType::String: return "string";
    case ValueType::Array: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "?";
}

// ---- Value -------------------------------------------------------------------

std::optional<int64_t> Value::as_int() const {
  if (auto* u = std::get_if<uint64_t>(&v)) {
    if (*u > uint64_t(INT64_MAX)) return std::nullopt;
    return int64_t(*u);
  }
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  return std::nullopt;
}
std::optional<double> Value::as_float() const {
  if (auto* d = std::get_if<double>(&v)) return *d;
  return std::nullopt;
}
const std::string* Value::as_string() const { return std::get_if<std::string>(&v); }
const ArrayView* Value::as_array() const { return std::get_if<ArrayView>(&v); }

std::string Value::to_display() const {
  std::ostringstream os;
  if (auto* u = std::get_if<uint64_t>(&v)) os << *u;
  else if (auto* i = std::get_if<int64_t>(&v)) os << *i;
  else if (auto* d = std::get_if<double>(&v)) os << *d;
  else if (auto* b = std::get_if<bool>(&v)) os << (*b ? "true" : "false");
  else if (auto* s = std::get_if<std::string>(&v)) {
    std::string t = s->substr(0, 60);
    std::replace(t.begin(), t.end(), '\n', ' ');
    os << '"' << t << (s->size() > 60 ? "...\"" : "\"");
  } else if (auto* a = std::get_if<ArrayView>(&v)) {
    os << "[" << value_type_name(a->elem) << " x " << a->count << "]";
  }
  return os.str();
}

// ---- File --------------------------------------------------------------------

File::File(File&& o) noexcept { *this = std::move(o); }
File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    if (map_) munmap(map_, size_);
    path_ = std::move(o.path_);
    version_ = o.version_;
    size_ = o.size_;
    alignment_ = o.alignment_;
    base_ = o.base_;
    map_ = o.map_;
    resident_ = std::move(o.resident_);
    data_start_ = o.data_start_;
    kv_ = std::move(o.kv_);
    tensors_ = std::move(o.tensors_);
    o.map_ = nullptr;
    o.base_ = nullptr;
  }
  return *this;
}
File::~File() {
  if (map_) munmap(map_, size_);
}

void File::fail(const std::string& what) const { throw Error(path_ + ": " + what); }

namespace {
// Reads all `n` bytes of `fd` into `dst`; false on an I/O error or early EOF.
bool read_all(int fd, uint8_t* dst, uint64_t n) {
  for (uint64_t done = 0; done < n;) {
    const ssize_t r = ::pread(fd, dst + done, size_t(std::min<uint64_t>(n - done, uint64_t(1) << 30)), off_t(done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    done += uint64_t(r);
  }
  return true;
}
// One entry of the tensor table: name, shape, dtype and offset, each checked
// before anything is sized from it.
TensorInfo read_tensor_info(Cursor& c, uint64_t alignment) {
  TensorInfo t;
  t.name = c.read_string("tensor name", kMaxKeyBytes);
  const uint32_t n_dims = c.read<uint32_t>("tensor dims");
  if (n_dims == 0 || n_dims > kMaxDims)
    c.fail("tensor '" + t.name + "' has " + std::to_string(n_dims) + " dims (expected 1.." +
           std::to_string(kMaxDims) + ")");
  uint64_t n_el = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t dim = c.read<uint64_t>("tensor dim");
    if (dim == 0 || dim > kMaxElements || n_el > kMaxElements / dim)
      c.fail("tensor '" + t.name + "' has an absurd shape (dim " + std::to_string(dim) + ")");
    n_el *= dim;
    t.dims.push_back(dim);
  }
  const uint32_t type = c.read<uint32_t>("tensor dtype");
  const tensor::DTypeInfo* info = tensor::find_dtype(type);
  if (!info) c.fail("tensor '" + t.name + "' has unknown or unsupported dtype " + std::to_string(type));
  t.dtype = info->type;
  const auto row = tensor::row_bytes(t.dtype, t.dims[0]);
  if (!row)
    c.fail("tensor '" + t.name + "' row length " + std::to_string(t.dims[0]) + " is not a multiple of the " +
           std::string(info->name) + " block size " + std::to_string(info->block_size));
  t.n_bytes = *row * (n_el / t.dims[0]);
  t.offset = c.read<uint64_t>("tensor offset");
  if (t.offset % alignment != 0)
    c.fail("tensor '" + t.name + "' offset " + std::to_string(t.offset) + " is not aligned to " +
           std::to_string(alignment));
  return t;
}

void check_no_overlap(const std::vector<TensorInfo>& tensors, const Cursor& c) {
  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : tensors) by_offset.push_back(&t);
  std::stable_sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& a = *by_offset[i - 1];
    const TensorInfo& b = *by_offset[i];
    if (a.offset + a.n_bytes > b.offset) c.fail("tensors '" + a.name + "' and '" + b.name + "' overlap");
  }
}

void check_unique_names(const std::vector<TensorInfo>& tensors, const Cursor& c) {
  std::vector<std::string_view> names;
  for (const auto& t : tensors) names.push_back(t.name);
  std::sort(names.begin(), names.end());
  if (auto dup = std::adjacent_find(names.begin(), names.end()); dup != names.end())
    c.fail("duplicate tensor name '" + std::string(*dup) + "'");
}
}  // namespace

File File::open(const std::string& path, Residency residency) {
  File f;
  f.path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) f.fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    f.fail("not a regular file");
  }
  f.size_ = uint64_t(st.st_size);
  if (f.size_ == 0) {
    ::close(fd);
    f.fail("truncated file: empty, expected a GGUF header");
  }
  if (residency == Residency::Mapped) {
    void* m = mmap(nullptr, size_t(f.size_), PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      f.fail(std::string("mmap failed: ") + std::strerror(err));
    }
    f.map_ = m;
    f.base_ = static_cast<const uint8_t*>(m);
  } else {
    try {
      f.resident_ = HugeBuffer(size_t(f.size_));
    } catch (const Error& e) {
      ::close(fd);
      f.fail(e.what());
    }
    errno = 0;
    if (!read_all(fd, f.resident_.data(), f.size_)) {
      const int err = errno;
      ::close(fd);
      f.fail(std::string("read failed: ") + (err ? std::strerror(err) : "file shrank while reading"));
    }
    f.base_ = f.resident_.data();
  }
  ::close(fd);
  f.parse_all();
  return f;
}

File File::parse(std::span<const uint8_t> bytes, const std::string& name) {
  File f;
  f.path_ = name;
  f.base_ = bytes.data();
  f.size_ = bytes.size();
  f.parse_all();
  return f;
}

void File::parse_all() {
  Cursor c(base_, size_, path_);
  const uint32_t magic = c.read<uint32_t>("magic");
  if (magic != kMagic) fail("bad magic: not a GGUF file");
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    fail("unsupported GGUF version " + std::to_string(version_) + " (supported: 2, 3)");
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // A key/value takes at least 13 bytes (key length, type, 1-byte value) and a
  // tensor entry at least 24.
  c.need_each(n_kv, 13, "metadata count");
  c.need_each(n_tensors, 24, "tensor count");

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("metadata key", kMaxKeyBytes);
    const uint32_t type = c.read<uint32_t>("metadata value type");
    if (!known_type(type)) fail("key '" + key + "' has unknown value type " + std::to_string(type));
    Value v = read_value(c, ValueType(type));
    if (!kv_.emplace(key, std::move(v)).second) fail("duplicate metadata key '" + key + "'");
  }

  if (const Value* a = find("general.alignment")) {
    const auto n = a->as_int();
    if (a->type != ValueType::U32 || !n || *n == 0 || (*n & (*n - 1)) != 0)
      fail("general.alignment must be a power-of-two u32, got " + a->to_display());
    alignment_ = uint64_t(*n);
  }

  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) tensors_.push_back(read_tensor_info(c, alignment_));

  // Tensor data starts at the next alignment boundary after the table.
  data_start_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (n_tensors > 0 && data_start_ > size_) fail("truncated file: tensor data section starts past the end");

  for (auto& t : tensors_) {
    const uint64_t avail = size_ - data_start_;  // >= 0: checked above
    if (t.offset > avail || t.n_bytes > avail - t.offset)
      fail("tensor '" + t.name + "' data [" + std::to_string(t.offset) + ", +" + std::to_string(t.n_bytes) +
           ") lies outside the file (truncated?)");
    t.data = base_ + data_start_ + t.offset;
  }
  check_no_overlap(tensors_, c);
  check_unique_names(tensors_, c);
}

const Value* File::find(std::string_view key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

namespace {
[[noreturn]] void wrong_type(const std::string& path, std::string_view key, const Value& v, const char* expected) {
  throw Error(path + ": key '" + std::string(key) + "' has type " + value_type_name(v.type) + ", expected " + expected);
}
}  // namespace

std::optional<int64_t> File::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (auto i = v->as_int()) return i;
  wrong_type(path_, key, *v, "an integer");
}
int64_t File::require_int(std::string_view key) const {
  if (auto v = get_int(key)) return *v;
  fail("missing required key '" + std::string(key) + "'");
}
std::optional<double> File::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (auto d = v->as_float()) return d;
  if (auto i = v->as_int()) return double(*i);
  wrong_type(path_, key, *v, "a number");
}
double File::require_float(std::string_view key) const {
  if (auto v = get_float(key)) return *v;
  fail("missing required key '" + std::string(key) + "'");
}
std::optional<std::string> File::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (auto* s = v->as_string()) return *s;
  wrong_type(path_, key, *v, "a string");
}
std::string File::require_string(std::string_view key) const {
  if (auto v = get_string(key)) return *v;
  fail("missing required key '" + std::string(key) + "'");
}
std::optional<bool> File::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (auto* b = std::get_if<bool>(&v->v)) return *b;
  wrong_type(path_, key, *v, "a bool");
}

namespace {
const ArrayView* array_of(const File& f, std::string_view key, bool (*ok)(ValueType), const char* expected) {
  const Value* v = f.find(key);
  if (!v) return nullptr;
  const ArrayView* a = v->as_array();
  if (!a || !ok(a->elem)) {
    const std::string got = a ? std::string("an array of ") + value_type_name(a->elem) : value_type_name(v->type);
    throw Error(f.path() + ": key '" + std::string(key) + "' is " + got + ", expected an array of " + expected);
  }
  return a;
}
bool is_string(ValueType t) { return t == ValueType::String; }
bool is_float(ValueType t) { return t == ValueType::F32 || t == ValueType::F64; }
bool is_integer(ValueType t) { return scalar_size(t) != 0 && !is_float(t) && t != ValueType::Bool; }
}  // namespace

std::optional<std::vector<std::string>> File::get_string_array(std::string_view key) const {
  const ArrayView* a = array_of(*this, key, is_string, "strings");
  if (!a) return std::nullopt;
  std::vector<std::string> out;
  out.reserve(a->count);
  for_each_element(*a, path_, [&](Value v) { out.push_back(std::move(*std::get_if<std::string>(&v.v))); });
  return out;
}
std::optional<std::vector<float>> File::get_float_array(std::string_view key) const {
  const ArrayView* a = array_of(*this, key, is_float, "floats");
  if (!a) return std::nullopt;
  std::vector<float> out;
  out.reserve(a->count);
  for_each_element(*a, path_, [&](Value v) { out.push_back(float(*v.as_float())); });
  return out;
}
std::optional<std::vector<int64_t>> File::get_int_array(std::string_view key) const {
  const ArrayView* a = array_of(*this, key, is_integer, "integers");
  if (!a) return std::nullopt;
  std::vector<int64_t> out;
  out.reserve(a->count);
  for_each_element(*a, path_, [&](Value v) {
    auto i = v.as_int();
    if (!i) fail("key '" + std::string(key) + "' holds an integer that does not fit 64 bits");
    out.push_back(*i);
  });
  return out;
}

uint64_t TensorInfo::n_elements() const {
  uint64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}
uint64_t TensorInfo::rows() const { return n_elements() / dims[0]; }

const TensorInfo* File::find_tensor(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

uint8_t* File::resident_bytes(const uint8_t* p) {
  if (resident_.data() == nullptr || p < base_ || p >= base_ + size_) return nullptr;
  return resident_.data() + (p - base_);
}

const TensorInfo& File::require_tensor(std::string_view name, std::vector<uint64_t> dims) const {
  const TensorInfo* t = find_tensor(name);
  if (!t) fail("missing required tensor '" + std::string(name) + "'");
  auto shape = [](const std::vector<uint64_t>& d) {
    std::string s = "[";
    for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
    return s + "]";
  };
  if (t->dims != dims) fail("tensor '" + std::string(name) + "' has shape " + shape(t->dims) + ", expected " + shape(dims));
  return *t;
}

}  // namespace kvlab::gguf
