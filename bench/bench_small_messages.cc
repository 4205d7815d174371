// Small-message latency of ditune's MPI communicator against plain blocking MPI (issue #22):
// a ping-pong between ranks 0 and 1 at 8 B, 1 KB, 64 KB, 256 KB and 1 MB, every way of
// completing a transfer interleaved in one run (each round runs every mode once per size, the
// order rotating from round to round) so that the ratios hold on a noisy machine. Then the cost of
// each thing one poll of a wait does, and of one whole poll of PollUntilDone.
//
//   mpirun -np 2 bench_small_messages [ROUNDS [shared-core]]   (bench_small_messages.sh runs it)
//
// `shared-core` leaves out the modes that never yield (blocking, isend+wait, test-spin): for
// ranks pinned to one core (taskset -c 0 mpirun --bind-to none ...), where a rank that waits
// without yielding holds the core its peer needs until the scheduler's time slice ends.
//
// Modes, each a full ping-pong (rank 0 sends, rank 1 answers; one-way = round trip / 2):
//   blocking      MPI_Send / MPI_Recv, what OSU's osu_latency measures
//   isend+wait    MPI_Isend / MPI_Irecv completed by MPI_Wait
//   test-spin     ... completed by MPI_Test in a tight loop
//   test+yield    ... MPI_Test, then sched_yield, per poll
//   test+clk+yld  ... MPI_Test, a steady_clock read and sched_yield per poll (the work of the
//                 wait's yielding phase, without ditune's objects)
//   ditune-yield  ditune's Comm::Isend / Irecv + Request::Wait with the tight spin off
//                 (set_spin_s(0)): the wait as it was before the spin, polling and yielding
//   ditune        the same with the communicator's own spin setting (what a user gets)
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "executor/comm.h"
#include "executor/comm_wait.h"
#include "core/stats.h"

namespace {

using ditune::Median;
using ditune::Status;
using ditune::StatusOr;
using ditune::exec::Comm;
using Clock = std::chrono::steady_clock;

// In kModes' order: a mode's value is its index there.
enum class Mode {
  kBlocking,
  kIsendWait,
  kTestSpin,
  kTestYield,
  kTestClockYield,
  kDituneYield,
  kDitune
};
constexpr Mode kModes[] = {Mode::kBlocking,  Mode::kIsendWait,      Mode::kTestSpin,
                           Mode::kTestYield, Mode::kTestClockYield, Mode::kDituneYield,
                           Mode::kDitune};
constexpr int kNumModes = sizeof(kModes) / sizeof(kModes[0]);
const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kBlocking:
      return "blocking";
    case Mode::kIsendWait:
      return "isend+wait";
    case Mode::kTestSpin:
      return "test-spin";
    case Mode::kTestYield:
      return "test+yield";
    case Mode::kTestClockYield:
      return "test+clk+yld";
    case Mode::kDituneYield:
      return "ditune-yield";
    case Mode::kDitune:
      return "ditune";
  }
  return "?";
}

void Check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  std::fprintf(stderr, "bench_small_messages: %s failed (%d)\n", what, rc);
  MPI_Abort(MPI_COMM_WORLD, 1);
}
void Check(const Status& s) {
  if (s.ok()) return;
  std::fprintf(stderr, "bench_small_messages: %s\n", s.ToString().c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

// Completes a raw request the way `mode` does.
void Finish(MPI_Request* r, Mode mode) {
  int done = 0;
  switch (mode) {
    case Mode::kIsendWait:
      Check(MPI_Wait(r, MPI_STATUS_IGNORE), "MPI_Wait");
      return;
    case Mode::kTestSpin:
      while (!done) Check(MPI_Test(r, &done, MPI_STATUS_IGNORE), "MPI_Test");
      return;
    case Mode::kTestYield:
      for (;;) {
        Check(MPI_Test(r, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (done) return;
        sched_yield();
      }
    case Mode::kTestClockYield: {
      const auto start = Clock::now();
      for (;;) {
        Check(MPI_Test(r, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (done) return;
        volatile double waited = std::chrono::duration<double>(Clock::now() - start).count();
        (void)waited;
        sched_yield();
      }
    }
    default:
      return;
  }
}

// One round trip between ranks 0 and 1 of `bytes` bytes each way.
void PingPong(Comm* comm, Mode mode, float* buf, int bytes) {
  const int me = comm->rank(), peer = 1 - me;
  constexpr int kTag = 3;
  const size_t count = static_cast<size_t>(bytes) / sizeof(float);
  for (int leg = 0; leg < 2; ++leg) {
    const bool sending = (leg == 0) == (me == 0);
    if (mode == Mode::kBlocking) {
      if (sending) {
        Check(MPI_Send(buf, bytes, MPI_BYTE, peer, kTag, MPI_COMM_WORLD), "MPI_Send");
      } else {
        Check(MPI_Recv(buf, bytes, MPI_BYTE, peer, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "MPI_Recv");
      }
    } else if (mode == Mode::kDitune || mode == Mode::kDituneYield) {
      StatusOr<std::unique_ptr<ditune::exec::Request>> r =
          sending ? comm->Isend(buf, count, peer, kTag) : comm->Irecv(buf, count, peer, kTag);
      Check(r.status());
      Check((*r)->Wait());
    } else {
      MPI_Request r;
      if (sending) {
        Check(MPI_Isend(buf, bytes, MPI_BYTE, peer, kTag, MPI_COMM_WORLD, &r), "MPI_Isend");
      } else {
        Check(MPI_Irecv(buf, bytes, MPI_BYTE, peer, kTag, MPI_COMM_WORLD, &r), "MPI_Irecv");
      }
      Finish(&r, mode);
    }
  }
}

template <typename F>
double NanosEach(int n, F&& f) {
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i) f();
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / n;
}

// What one poll costs, piece by piece, on this rank (rank 1 waits in a barrier meanwhile).
void PollCosts() {
  float dummy[4] = {};
  MPI_Request pending;  // a receive nobody sends: MPI_Test never completes it
  Check(MPI_Irecv(dummy, 1, MPI_FLOAT, 1, 999, MPI_COMM_WORLD, &pending), "MPI_Irecv");
  int done = 0;
  const double test_ns = NanosEach(200000, [&] { MPI_Test(&pending, &done, MPI_STATUS_IGNORE); });
  Check(MPI_Cancel(&pending), "MPI_Cancel");
  Check(MPI_Wait(&pending, MPI_STATUS_IGNORE), "MPI_Wait");
  volatile int64_t sink = 0;
  const double clock_ns =
      NanosEach(1000000, [&] { sink = sink + Clock::now().time_since_epoch().count(); });
  const double yield_ns = NanosEach(200000, [] { sched_yield(); });
  std::function<StatusOr<bool>()> fn = [&]() -> StatusOr<bool> { return sink < 0; };
  const double function_ns = NanosEach(1000000, [&] {
    StatusOr<bool> r = fn();
    sink = sink + (r.ok() && *r);
  });
  // PollUntilDone around a test that completes on its 2000th poll: its cost per poll with the
  // tight spin off and on (the test itself is the std::function call above).
  auto per_poll = [&](double spin_s) {
    std::vector<double> t;
    for (int rep = 0; rep < 21; ++rep) {
      int polls = 0;
      ditune::exec::PollOps ops;
      ops.test = [&]() -> StatusOr<bool> { return ++polls == 2000; };
      ops.spin_s = spin_s;
      const auto start = Clock::now();
      Check(ditune::exec::PollUntilDone("bench", 10, ops));
      t.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() / polls);
    }
    return Median(t);
  };
  const double poll_yield_ns = per_poll(0);
  const double poll_spin_ns = per_poll(1.0);
  std::printf("\none poll's parts on rank 0, ns each:\n");
  std::printf("  MPI_Test (pending receive)     %8.1f\n", test_ns);
  std::printf("  steady_clock::now              %8.1f\n", clock_ns);
  std::printf("  sched_yield                    %8.1f\n", yield_ns);
  std::printf("  std::function -> StatusOr<bool> %7.1f\n", function_ns);
  std::printf("  PollUntilDone per poll, yielding phase %8.1f\n", poll_yield_ns);
  std::printf("  PollUntilDone per poll, tight spin     %8.1f\n", poll_spin_ns);
}

}  // namespace

int main(int argc, char** argv) {
  auto world = ditune::exec::CreateComm("mpi", &argc, &argv);
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", world.status().ToString().c_str());
    return 2;
  }
  Comm* comm = world->get();
  if (comm->size() != 2) {
    if (comm->rank() == 0)
      std::fprintf(stderr, "run with exactly 2 ranks: mpirun -np 2 %s\n", argv[0]);
    return 2;
  }
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 9;
  const bool shared_core = argc > 2 && std::string(argv[2]) == "shared-core";
  auto skipped = [&](Mode m) {
    return shared_core && (m == Mode::kBlocking || m == Mode::kIsendWait || m == Mode::kTestSpin);
  };
  const double own_spin_s = comm->spin_s();
  // 64 KB: the largest transfer that takes the tight phase (kCommSpinMaxBytes); 256 KB: the
  // next size up, which polls yielding from the start.
  const std::vector<int> sizes = {8, 1024, 64 * 1024, 256 * 1024, 1024 * 1024};
  std::vector<float> buf(1024 * 1024 / sizeof(float), 1.0f);
  // samples[size][mode]: one-way seconds of every timed round trip.
  std::vector<std::vector<std::vector<double>>> samples(
      sizes.size(), std::vector<std::vector<double>>(kNumModes));
  for (int round = 0; round < rounds; ++round) {
    for (size_t s = 0; s < sizes.size(); ++s) {
      const int iters = sizes[s] <= 1024 ? 2000 : sizes[s] <= 64 * 1024 ? 500 : 200;
      for (int k = 0; k < kNumModes; ++k) {
        const int m = (k + round) % kNumModes;
        const Mode mode = kModes[m];
        if (skipped(mode)) continue;
        comm->set_spin_s(mode == Mode::kDituneYield ? 0 : own_spin_s);
        Check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        for (int i = 0; i < 20; ++i) PingPong(comm, mode, buf.data(), sizes[s]);  // warm-up
        for (int i = 0; i < iters; ++i) {
          const double t0 = MPI_Wtime();
          PingPong(comm, mode, buf.data(), sizes[s]);
          samples[s][m].push_back((MPI_Wtime() - t0) / 2);
        }
      }
    }
  }
  comm->set_spin_s(own_spin_s);
  if (comm->rank() == 0) {
    std::printf(
        "one-way latency, us: median over %d rounds (modes interleaved); spin %g us, "
        "%d local ranks\n",
        rounds, own_spin_s * 1e6, comm->local_ranks());
    std::printf("%-8s", "bytes");
    for (Mode m : kModes) std::printf(" %12s", ModeName(m));
    std::printf("\n");
    for (size_t s = 0; s < sizes.size(); ++s) {
      std::printf("%-8d", sizes[s]);
      for (int m = 0; m < kNumModes; ++m) {
        if (skipped(kModes[m])) {
          std::printf(" %12s", "-");
        } else {
          std::printf(" %12.2f", Median(samples[s][m]) * 1e6);
        }
      }
      std::printf("\n");
    }
    std::printf("\nratios (medians):\n%-8s %12s %12s %12s %15s %15s %15s\n", "bytes", "blocking us",
                "before us", "after us", "before/blocking", "after/blocking", "after/before");
    for (size_t s = 0; s < sizes.size(); ++s) {
      const double before = Median(samples[s][static_cast<int>(Mode::kDituneYield)]);
      const double after = Median(samples[s][static_cast<int>(Mode::kDitune)]);
      if (shared_core) {
        std::printf("%-8d %12s %12.2f %12.2f %15s %15s %15.2f\n", sizes[s], "-", before * 1e6,
                    after * 1e6, "-", "-", after / before);
        continue;
      }
      const double blocking = Median(samples[s][static_cast<int>(Mode::kBlocking)]);
      std::printf("%-8d %12.2f %12.2f %12.2f %15.2f %15.2f %15.2f\n", sizes[s], blocking * 1e6,
                  before * 1e6, after * 1e6, before / blocking, after / blocking, after / before);
    }
    // On a shared core the peer spins in the barrier below: timing yields there measures it.
    if (!shared_core) PollCosts();
  }
  Check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  std::fflush(stdout);
  return 0;
}
