#include "kernels/thread_pool.h"

#include "common/error.h"

namespace kvlab::kernels {
namespace {
constexpr int kSpinRounds = 20000;  // ~tens of microseconds before sleeping

inline void cpu_relax() { __builtin_ia32_pause(); }
}  // namespace

int ThreadPool::default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : int(n);
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads) {
  if (n_threads < 1 || n_threads > 1024) throw Error("thread count must be in 1..1024, got " + std::to_string(n_threads));
  for (int t = 1; t < n_threads; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lk(mu_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  job_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::work(uint32_t gen, int thread) {
  uint64_t c = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (uint32_t(c >> 32) != gen) return;  // a newer job: not ours to touch
    const uint32_t i = uint32_t(c);
    if (i >= n_tasks_.load(std::memory_order_acquire)) return;
    if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) continue;
    (*job_)(i, thread);
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_tasks_.load(std::memory_order_relaxed)) {
      std::lock_guard lk(mu_);  // the caller checks done_ under mu_ before sleeping
      done_cv_.notify_one();
    }
    c = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop(int thread) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t g = generation_.load(std::memory_order_acquire);
    for (int i = 0; g == seen && i < kSpinRounds; ++i) {
      cpu_relax();
      g = generation_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      std::unique_lock lk(mu_);
      job_cv_.wait(lk, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      continue;
    }
    seen = g;
    if (stop_.load()) return;
    work(g, thread);
  }
}

void ThreadPool::run(size_t n_tasks, const Task& fn) {
  if (n_tasks == 0) return;
  if (workers_.empty() || n_tasks == 1) {
    for (size_t i = 0; i < n_tasks; ++i) fn(i, 0);
    return;
  }
  if (n_tasks > UINT32_MAX) throw Error("too many tasks for one job");
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  // Retire the previous job's claim word first: a worker still looping in the
  // previous job may hold a stale copy of it, and its CAS must fail before it
  // can see the new task count (or it would claim a phantom task of the old
  // job and run it with the new job's function).
  claim_.store(uint64_t(gen) << 32, std::memory_order_seq_cst);
  job_ = &fn;
  done_.store(0, std::memory_order_relaxed);
  n_tasks_.store(uint32_t(n_tasks), std::memory_order_release);
  {
    std::lock_guard lk(mu_);  // a worker checks generation_ under mu_ before sleeping
    generation_.store(gen, std::memory_order_release);
  }
  job_cv_.notify_all();
  work(gen, 0);
  for (int i = 0; i < kSpinRounds; ++i) {
    if (done_.load(std::memory_order_acquire) == n_tasks) return;
    cpu_relax();
  }
  std::unique_lock lk(mu_);
  done_cv_.wait(lk, [&] { return done_.load(std::memory_order_acquire) == n_tasks; });
}

}  // namespace kvlab::kernels
