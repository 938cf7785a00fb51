#include "common/huge_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "common/error.h"

namespace kvlab {

namespace {
constexpr size_t kHugePage = size_t(2) << 20;
}

HugeBuffer::HugeBuffer(size_t bytes) : size_(bytes) {
  const size_t whole_pages = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // One extra huge page leaves room to align the start.
  map_len_ = whole_pages + kHugePage;
  map_ = ::mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map_ == MAP_FAILED) {
    const int err = errno;
    map_ = nullptr;
    throw Error("cannot map " + std::to_string(bytes) + " bytes: " + std::strerror(err));
  }
  const uintptr_t start = reinterpret_cast<uintptr_t>(map_);
  data_ = reinterpret_cast<uint8_t*>((start + kHugePage - 1) / kHugePage * kHugePage);
  // The whole huge pages the data spans (the mapping holds them): advising
  // only `bytes` would leave a last partial 2 MiB, or a buffer smaller than
  // that, on small pages. Failing (THP off) is fine.
  ::madvise(data_, whole_pages, MADV_HUGEPAGE);
}

HugeBuffer::~HugeBuffer() {
  if (map_) ::munmap(map_, map_len_);
}

HugeBuffer::HugeBuffer(HugeBuffer&& o) noexcept { *this = std::move(o); }

HugeBuffer& HugeBuffer::operator=(HugeBuffer&& o) noexcept {
  if (this != &o) {
    if (map_) ::munmap(map_, map_len_);
    map_ = std::exchange(o.map_, nullptr);
    map_len_ = std::exchange(o.map_len_, 0);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

}  // namespace kvlab
