// A rank that dies in the middle of a run: the others must stop (mpirun ends the job with an
// error naming the dead rank), not hang. Rank 1 kills itself after a few steps of a real
// Ulysses generation; rank 0 carries on into the next all-to-all.
#include <csignal>
#include <cstdio>

#include "core/catalog.h"
#include "executor/comm.h"
#include "executor/parallel.h"

int main(int argc, char** argv) {
  using namespace ditune;
  auto world = exec::CreateComm("mpi", &argc, &argv);
  if (!world.ok()) return 2;
  auto catalog = Catalog::Load(DITUNE_TEST_DATA_DIR);
  const ModelSpec& m = **catalog->Model("tiny-pixart");
  Workload w{"tiny-pixart", 64, 64, 1, 1000, 1, OutputType::kLatent};
  auto runner = exec::ParallelRunner::Create(m, w, *ParseParallelConfig("ulysses=2"), world->get(), 1);
  if (!runner.ok()) return 2;
  if ((*world)->rank() == 1) {
    // Die between collectives, with no chance to tell anyone.
    std::raise(SIGKILL);
  }
  auto r = (*runner)->Generate();  // rank 0 waits on rank 1 in the first all-to-all
  std::printf("rank %d finished: %s\n", (*world)->rank(), r.ok() ? "ok" : r.status().ToString().c_str());
  return r.ok() ? 0 : 1;
}
