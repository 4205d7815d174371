#include "executor/comm_wait.h"

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include <fmt/format.h>

namespace ditune::exec {

StatusOr<double> CommTimeoutFromEnv() {
  const char* env = std::getenv(kCommTimeoutEnv);
  if (env == nullptr || *env == '\0') return kDefaultCommTimeoutS;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  if (end == env || *end != '\0' || !(v >= 0) || v > 1e9) {
    return Status::InvalidArgument(
        fmt::format("{}='{}': give the seconds a rank waits on its peers before it ends the job, a "
                    "number >= 0 (0 waits "
                    "forever; default {:g})",
                    kCommTimeoutEnv, env, kDefaultCommTimeoutS));
  }
  return v;
}

Status PollUntilDone(std::string_view what, double timeout_s, const PollOps& ops) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  for (;;) {
    DITUNE_ASSIGN_OR_RETURN(const bool done, ops.test());
    if (done) return Status::Ok();
    if (ops.health) DITUNE_RETURN_IF_ERROR(ops.health());
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (timeout_s > 0 && waited >= timeout_s) {
      return Status::Unavailable(
          fmt::format("{} did not complete within {:g} s: a peer rank stalled or died ({} sets the "
                      "limit; 0 waits forever)",
                      what, timeout_s, kCommTimeoutEnv));
    }
    // Short waits are the common case and their latency counts; long ones are imbalance or a
    // stall, where a millisecond does not matter and a spinning core would.
    if (waited < 1.0) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

}  // namespace ditune::exec
