// Running independent pieces of work on the host's cores.
#ifndef DITUNE_CORE_PARALLEL_FOR_H_
#define DITUNE_CORE_PARALLEL_FOR_H_

#include <cstddef>
#include <functional>

namespace ditune {

// Worker threads for host-side searches: DITUNE_THREADS when it is a positive integer, else
// the host's hardware concurrency (at least 1).
int HostThreads();

// Calls fn(i) for every i in [0, n), on up to `threads` threads (HostThreads() when 0), and
// returns when all calls have. Each index is called exactly once; which thread runs it and
// in what order is unspecified, so fn must only write state owned by its index. With one
// thread (or n <= 1), or when called from inside another ParallelFor's fn, it runs in order
// on the caller's thread. fn must not throw.
void ParallelFor(size_t n, const std::function<void(size_t)>& fn, int threads = 0);

}  // namespace ditune

#endif  // DITUNE_CORE_PARALLEL_FOR_H_
