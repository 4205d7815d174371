#include "executor/comm_wait.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <fmt/format.h>

namespace ditune::exec {

StatusOr<double> CommTimeoutFromEnv() {
  const char* env = std::getenv(kCommTimeoutEnv);
  if (env == nullptr || *env == '\0') return kDefaultCommTimeoutS;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  if (end == env || *end != '\0' || !(v >= 0) || v > kMaxCommTimeoutS) {
    return Status::InvalidArgument(
        fmt::format("{}='{}': give the seconds a rank waits on its peers before it ends the job, a "
                    "number >= 0 and at most {:g} (0 waits forever; default {:g})",
                    kCommTimeoutEnv, env, kMaxCommTimeoutS, kDefaultCommTimeoutS));
  }
  return v;
}

namespace {

Status TimedOut(std::string_view what, double timeout_s) {
  return Status::Unavailable(
      fmt::format("{} did not complete within {:g} s: a peer rank stalled or died ({} sets the "
                  "limit; 0 waits forever)",
                  what, timeout_s, kCommTimeoutEnv));
}

}  // namespace

Status PollUntilDone(std::string_view what, double timeout_s, const PollOps& ops) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  if (ops.spin_s > 0) {
    // A blocking MPI call's latency: no yield between polls, no clock read per poll. A peer
    // that answers within microseconds is seen within a poll or two of its answer.
    for (;;) {
      for (int i = 0; i < kTightPollsPerClockRead; ++i) {
        DITUNE_ASSIGN_OR_RETURN(const bool done, ops.test());
        if (done) return Status::Ok();
      }
      if (ops.health) DITUNE_RETURN_IF_ERROR(ops.health());
      const double waited = std::chrono::duration<double>(Clock::now() - start).count();
      if (timeout_s > 0 && waited >= timeout_s) return TimedOut(what, timeout_s);
      if (waited >= ops.spin_s) break;
    }
  }
  for (;;) {
    DITUNE_ASSIGN_OR_RETURN(const bool done, ops.test());
    if (done) return Status::Ok();
    if (ops.health) DITUNE_RETURN_IF_ERROR(ops.health());
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (timeout_s > 0 && waited >= timeout_s) return TimedOut(what, timeout_s);
    // Short waits are the common case and their latency counts; long ones are imbalance or a
    // stall, where a millisecond does not matter and a spinning core would.
    if (waited < 1.0) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

bool RanksOversubscribed(int local_ranks, int local_cores) {
  const char* ompi = std::getenv("OMPI_MCA_mpi_oversubscribe");
  if (ompi != nullptr && std::strcmp(ompi, "1") == 0) return true;
  const int cores = local_cores > 0 ? local_cores : static_cast<int>(std::thread::hardware_concurrency());
  return cores > 0 && local_ranks > cores;
}

StatusOr<double> CommSpinFromEnv(bool oversubscribed) {
  const char* env = std::getenv(kCommSpinEnv);
  if (env == nullptr || *env == '\0') return oversubscribed ? 0.0 : kDefaultCommSpinS;
  char* end = nullptr;
  const double us = std::strtod(env, &end);
  if (end == env || *end != '\0' || !(us >= 0) || us > 1e9) {
    return Status::InvalidArgument(
        fmt::format("{}='{}': give the microseconds a wait on a small transfer polls without yielding the "
                    "core, a number >= 0 (0 yields from the first poll; default {:g}, 0 when the host runs "
                    "more ranks than cores)",
                    kCommSpinEnv, env, kDefaultCommSpinS * 1e6));
  }
  return us * 1e-6;
}

int LauncherRank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    const char* v = std::getenv(var);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    const long r = std::strtol(v, &end, 10);
    if (*end == '\0' && r >= 0 && r < (1L << 30)) return static_cast<int>(r);
  }
  return -1;
}

struct StartupWatchdog::State {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int owners = 2;  // the watchdog and its thread
};

StartupWatchdog::StartupWatchdog(std::string what, double timeout_s) {
  if (!(timeout_s > 0)) return;
  state_ = new State;
  State* st = state_;
  std::thread([st, what = std::move(what), timeout_s] {
    std::unique_lock<std::mutex> lock(st->mu);
    const bool finished = st->cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [st] { return st->done; });
    if (!finished) {
      const int rank = LauncherRank();
      const std::string who = rank >= 0 ? fmt::format("rank {}", rank) : std::string("this rank");
      std::fprintf(stderr,
                   "ditune: %s: %s did not complete within %g s: a peer rank stalled or died during start-up (%s "
                   "sets the limit; 0 waits forever)\n",
                   who.c_str(), what.c_str(), timeout_s, kCommTimeoutEnv);
      std::fflush(stderr);
      std::_Exit(1);
    }
    if (--st->owners == 0) {
      lock.unlock();
      delete st;
    }
  }).detach();
}

StartupWatchdog::~StartupWatchdog() {
  if (state_ == nullptr) return;
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->done = true;
  state_->cv.notify_all();
  if (--state_->owners == 0) {
    lock.unlock();
    delete state_;
  }
}

}  // namespace ditune::exec
