// Waiting on peers without hanging. Every blocking transfer of the `mpi` and `nccl`
// communicators completes through PollUntilDone: it polls the transfer, checks the backend's
// health (NCCL's asynchronous errors) and gives up after the communicator's timeout, so a
// stalled or vanished peer ends the job with an error that names the transfer instead of a
// hang. The timeout is DITUNE_COMM_TIMEOUT_S seconds (0: wait forever).
#ifndef DITUNE_EXECUTOR_COMM_WAIT_H_
#define DITUNE_EXECUTOR_COMM_WAIT_H_

#include <functional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace ditune::exec {

// Ten minutes: far above any one transfer of a DiT step, short enough that a stalled job ends.
inline constexpr double kDefaultCommTimeoutS = 600;
inline constexpr const char* kCommTimeoutEnv = "DITUNE_COMM_TIMEOUT_S";

// The timeout from the environment, kDefaultCommTimeoutS when unset; InvalidArgument naming
// the variable for anything but a number >= 0.
StatusOr<double> CommTimeoutFromEnv();

// How a wait polls: `test` returns true once the transfer is complete (or an error);
// `health`, when set, returns an error the backend reported meanwhile. Both run on this thread.
struct PollOps {
  std::function<StatusOr<bool>()> test;
  std::function<Status()> health;
};

// Polls until `ops.test` is done. Spins (yielding the core to other ranks) for the first
// second, then sleeps a millisecond between polls. After `timeout_s` seconds (> 0) it returns
// Unavailable: "<what> did not complete within ... s", naming DITUNE_COMM_TIMEOUT_S.
Status PollUntilDone(std::string_view what, double timeout_s, const PollOps& ops);

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
