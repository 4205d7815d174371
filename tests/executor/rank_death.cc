// A rank that dies or stalls in the middle of a run: the others must stop, not hang.
// `rank_death kill`: rank 1 kills itself before a real Ulysses generation; mpirun ends the job
// with an error naming the dead rank. `rank_death stall`: rank 1 sleeps far past the
// communicator's timeout (DITUNE_COMM_TIMEOUT_S); rank 0's next transfer fails with an error
// naming it and the limit, and rank 0 ends the job as `ditune run` does. `rank_death
// startup`: rank 1 stalls before MPI_Init; rank 0's start-up watchdog ends the job.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/catalog.h"
#include "executor/comm.h"
#include "executor/comm_wait.h"
#include "executor/device.h"
#include "executor/engine.h"
#include "executor/kernels.h"

int main(int argc, char** argv) {
  using namespace ditune;
  const bool stall = argc > 1 && std::strcmp(argv[1], "stall") == 0;
  // `rank_death startup`: rank 1 stalls before MPI_Init; rank 0's start-up watchdog ends the job.
  if (argc > 1 && std::strcmp(argv[1], "startup") == 0 && exec::LauncherRank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(120));
  }
  auto world = exec::CreateComm("mpi", &argc, &argv);
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", world.status().ToString().c_str());
    return 2;
  }
  auto catalog = Catalog::Load(DITUNE_TEST_DATA_DIR);
  const ModelSpec& m = **catalog->Model("tiny-pixart");
  Workload w{"tiny-pixart", 64, 64, 1, 1000, 1, OutputType::kLatent};
  const ParallelConfig config = *ParseParallelConfig("ulysses=2");
  auto device = exec::CreateDevice("cpu");
  if (!device.ok()) return 2;
  auto kernels = exec::CreateKernels("cpu", device->get());
  if (!kernels.ok()) return 2;
  auto work = exec::EngineWorkFor(m, w, config, (*world)->rank());
  if (!work.ok()) return 2;
  auto runner = exec::DitEngine::Create(m, w, *work, kernels->get(), exec::EngineOptions{}, world->get());
  if (!runner.ok()) return 2;
  if ((*world)->rank() == 1) {
    if (!stall) std::raise(SIGKILL);  // die between collectives, with no chance to tell anyone
    std::this_thread::sleep_for(std::chrono::seconds(120));
  }
  auto r = (*runner)->Generate();  // rank 0 waits on rank 1 in its first transfer
  std::printf("rank %d finished: %s\n", (*world)->rank(), r.ok() ? "ok" : r.status().ToString().c_str());
  std::fflush(stdout);
  if (!r.ok()) {
    (*world)->Abort(r.status().ToString());
    return 1;
  }
  return 0;
}
