#include "server/http/outbox.h"

#include <chrono>

namespace kvlab::server::http {

Outbox::Outbox(Deliver deliver, size_t unsent_limit, const std::atomic<bool>& stopping)
    : deliver_(std::move(deliver)), unsent_limit_(unsent_limit), stopping_(stopping) {}

bool Outbox::push(std::string bytes, Then then, bool wait_for_room) {
  {
    std::unique_lock lock(mu_);
    // In slices, since a stopping server does not notify each outbox.
    while (wait_for_room && unsent_ >= unsent_limit_ && !closed_ && !stopping_)
      room_.wait_for(lock, std::chrono::milliseconds(100));
    if (closed_ || (wait_for_room && unsent_ >= unsent_limit_)) return false;
    unsent_ += bytes.size();
  }
  deliver_(std::move(bytes), then);
  return true;
}

void Outbox::written(size_t n) {
  {
    std::lock_guard lock(mu_);
    unsent_ -= n;
  }
  room_.notify_all();
}

void Outbox::close() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  room_.notify_all();
}

}  // namespace kvlab::server::http
