#include "core/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace ditune {

int HostThreads() {
  if (const char* env = std::getenv("DITUNE_THREADS")) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v > 0) return static_cast<int>(std::min(v, 1024L));
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

namespace {
// True on a ParallelFor's worker threads (the caller's included while it works).
thread_local bool in_worker = false;
}  // namespace

void ParallelFor(size_t n, const std::function<void(size_t)>& fn, int threads) {
  if (threads <= 0) threads = HostThreads();
  // A ParallelFor inside another's fn runs in order on its thread: the outer one already
  // keeps the cores busy, and nesting would start threads x threads.
  const size_t workers = in_worker ? 1 : std::min(n, static_cast<size_t>(threads));
  if (workers <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  // Indices are handed out one at a time: the pieces of a suite differ in cost by orders of
  // magnitude (a "best" row searches every configuration), so fixed chunks would idle.
  std::atomic<size_t> next{0};
  auto work = [&] {
    const bool was = in_worker;
    in_worker = true;
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
    in_worker = was;
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (size_t t = 1; t < workers; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

}  // namespace ditune
