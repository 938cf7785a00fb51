// A persistent pool of worker threads for the forward pass. One `run` hands
// out `n_tasks` task indices (dynamic scheduling); the calling thread works
// too, and `run` returns as soon as every task is done: it never waits for a
// worker that has not woken up yet, so a descheduled worker (an oversubscribed
// machine) costs nothing but its share of the tasks.
//
// Task claims are a CAS on one 64-bit word, (job generation << 32 | next
// index), so a worker that wakes late cannot claim a task of a newer job with
// a stale view of it. Workers spin briefly between jobs, because a decode step
// issues a few hundred short jobs back to back, then sleep on a condition
// variable (checked under its mutex, so no wake-up is lost) so an idle pool
// costs no CPU.
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvlab::kernels {

class ThreadPool {
 public:
  // Task body: (task index, index of the thread running it in [0, n_threads)).
  using Task = std::function<void(size_t task, int thread)>;

  explicit ThreadPool(int n_threads);  // n_threads >= 1, includes the caller
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Runs fn(i, thread) for i in [0, n_tasks); returns when all are done.
  void run(size_t n_tasks, const Task& fn);
  // The same for items too short to be a task each (a token's norm, RoPE or
  // activation conversion: ~0.1-0.6 us), in contiguous runs, a few per
  // thread: every task costs a claim on a cache line the threads share, about
  // as much as such an item's work. A prefill has ~10 such ops per layer; with
  // a task per token the claim loop (work) was 2.2% of pp128's samples, with
  // runs 1.2% (perf of kvlab bench -p 128 -r 20).
  template <class F>
  void for_each(size_t n, const F& fn) {
    const size_t tasks = std::min(n, kRunsPerThread * size_t(n_threads_));
    if (tasks <= 1 || n_threads_ == 1) {  // e.g. a decode step's one token: no job, no std::function
      for (size_t i = 0; i < n; ++i) fn(i, 0);
      return;
    }
    run(tasks, [&](size_t task, int thread) {
      for (size_t i = n * task / tasks, end = n * (task + 1) / tasks; i < end; ++i) fn(i, thread);
    });
  }

  static int default_threads();  // hardware concurrency, at least 1

 private:
  // Runs per thread in for_each: more than one, so a thread that was
  // descheduled (a shared VM) leaves the others something to take.
  static constexpr size_t kRunsPerThread = 4;

  void worker_loop(int thread);
  // Claims and runs tasks of job `gen` until none are left.
  void work(uint32_t gen, int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  const Task* job_ = nullptr;             // stable while any task of the job is unfinished
  std::atomic<uint32_t> n_tasks_{0};
  std::atomic<uint64_t> claim_{0};        // (generation << 32) | next task index
  std::atomic<uint32_t> generation_{0};   // bumped once per job
  std::atomic<uint32_t> done_{0};         // tasks finished in the current job
  std::atomic<bool> stop_{false};
  // Sleeping, after the spin: workers wait for a new generation, the caller
  // for the last task. Conditions are re-checked under the mutex.
  std::mutex mu_;
  std::condition_variable job_cv_, done_cv_;
};

}  // namespace kvlab::kernels
