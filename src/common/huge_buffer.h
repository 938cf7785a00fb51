// Anonymous memory aligned to 2 MiB and advised for transparent huge pages.
// Streaming reads of large data (the model weights and the KV cache, every
// decode step) take a TLB miss every 4 KiB with small pages, and under
// virtualisation each miss walks two page tables; huge pages cut the misses
// 512-fold. Where THP is off the advice is ignored and this is plain memory.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvlab {

class HugeBuffer {
 public:
  HugeBuffer() = default;
  // Throws kvlab::Error when the memory cannot be mapped.
  explicit HugeBuffer(size_t bytes);
  ~HugeBuffer();
  HugeBuffer(HugeBuffer&& o) noexcept;
  HugeBuffer& operator=(HugeBuffer&& o) noexcept;
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* map_ = nullptr;  // the whole mapping, map_len_ bytes
  size_t map_len_ = 0;
  uint8_t* data_ = nullptr;  // 2 MiB aligned, size_ bytes
  size_t size_ = 0;
};

}  // namespace kvlab
