// Waiting on peers without hanging. Every blocking transfer of the `mpi` and `nccl`
// communicators completes through PollUntilDone: it polls the transfer, checks the backend's
// health (NCCL's asynchronous errors) and gives up after the communicator's timeout, so a
// stalled or vanished peer ends the job with an error that names the transfer instead of a
// hang. The timeout is DITUNE_COMM_TIMEOUT_S seconds (0: wait forever).
#ifndef DITUNE_EXECUTOR_COMM_WAIT_H_
#define DITUNE_EXECUTOR_COMM_WAIT_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace ditune::exec {

// Ten minutes: far above any one transfer of a DiT step, short enough that a stalled job ends.
inline constexpr double kDefaultCommTimeoutS = 600;
// The longest wait DITUNE_COMM_TIMEOUT_S may ask for (about 31 years): beyond it, 0 (forever).
inline constexpr double kMaxCommTimeoutS = 1e9;
inline constexpr const char* kCommTimeoutEnv = "DITUNE_COMM_TIMEOUT_S";

// The timeout from the environment, kDefaultCommTimeoutS when unset; InvalidArgument naming
// the variable for anything but a number from 0 to kMaxCommTimeoutS.
StatusOr<double> CommTimeoutFromEnv();

// How a wait polls: `test` returns true once the transfer is complete (or an error);
// `health`, when set, returns an error the backend reported meanwhile. Both run on this thread.
// `spin_s` is the tight phase that opens the wait: for that many seconds `test` runs back to
// back without yielding the core, the clock read (and `health` run) once every
// kTightPollsPerClockRead polls; 0 skips it.
struct PollOps {
  std::function<StatusOr<bool>()> test;
  std::function<Status()> health;
  double spin_s = 0;
};

// Polls until `ops.test` is done: the tight phase (ops.spin_s), then polls yielding the core
// to other ranks between them until one second has passed, then sleeps a millisecond between
// polls. After `timeout_s` seconds (> 0; checked in every phase) it returns Unavailable:
// "<what> did not complete within ... s", naming DITUNE_COMM_TIMEOUT_S.
Status PollUntilDone(std::string_view what, double timeout_s, const PollOps& ops);

// The tight phase's clock period, in polls. An MPI_Test that finds nothing costs 0.05-0.07 us
// here and a clock read 0.09-0.11 us (kvm-clock; bench/bench_small_messages.sh prints both), so
// the clock takes about a tenth of the phase, which overruns its budget by ~1 us at most.
inline constexpr int kTightPollsPerClockRead = 16;

// The tight phase of a wait on a small transfer: a blocking MPI call's latency without its
// unbounded spin. About twice the one-way time of the largest transfer that takes it (64 KB
// between two ranks here: 10-12 us), so that one completes within it; short, because a rank
// that shares its core with the peer it waits on (oversubscription that RanksOversubscribed
// misses, such as a CPU quota) holds that core for the whole phase: a small message then takes
// the phase plus ~6 us (docs/PERFORMANCE.md).
inline constexpr double kDefaultCommSpinS = 20e-6;
// Transfers larger than this skip the tight phase: the yield between polls costs them little
// (256 KB: 1-3% over blocking MPI, within noise; 1 MB: the same), and they outlast the phase,
// so spinning would hold the core only to yield anyway.
inline constexpr size_t kCommSpinMaxBytes = 64 * 1024;
inline constexpr const char* kCommSpinEnv = "DITUNE_COMM_SPIN_US";

// Whether this host runs more ranks than it has cores for them: `local_ranks` > `local_cores`
// (the cores this host's ranks may run on, together; 0 when unknown: the online cores), or
// Open MPI's launcher said so (OMPI_MCA_mpi_oversubscribe=1, as it does for --oversubscribe
// runs that need it). A tight spin there would hold the core the awaited peer needs.
bool RanksOversubscribed(int local_ranks, int local_cores);

// The tight phase in seconds: DITUNE_COMM_SPIN_US microseconds when set (0 turns it off);
// unset, kDefaultCommSpinS, or 0 when `oversubscribed`. InvalidArgument naming the variable
// for anything but a number >= 0.
StatusOr<double> CommSpinFromEnv(bool oversubscribed);

// Ends the process when a start-up step that cannot be polled (MPI_Init, communicator
// creation: every rank must take part) has not finished within `timeout_s` (> 0; 0 or less
// arms nothing): it prints "ditune: rank R: <what> did not complete within T s ..." naming
// the launcher's rank (OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK) and exits with status 1,
// so mpirun stops the other ranks. Disarmed by destruction. Thread-safe to destroy while it
// fires: the process is ending then.
class StartupWatchdog {
 public:
  StartupWatchdog(std::string what, double timeout_s);
  ~StartupWatchdog();
  StartupWatchdog(const StartupWatchdog&) = delete;
  StartupWatchdog& operator=(const StartupWatchdog&) = delete;

 private:
  struct State;
  State* state_ = nullptr;  // shared with the watching thread; freed by whichever ends last
};

// The rank the launcher gave this process, or -1 when none did.
int LauncherRank();

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_COMM_WAIT_H_
