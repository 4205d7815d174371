#include "executor/mpi_comm.h"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

namespace ditune::exec {
namespace {

// The one place MPI error codes become a Status.
Status MpiStatus(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status::Unavailable(fmt::format("MPI {} failed: {}", what, std::string(text, len)));
}

// A pending MPI transfer, completed by polling (comm_wait.h) so that a stalled peer ends in an
// error rather than a hang; `spin_s` is the wait's tight phase.
class MpiRequest : public Request {
 public:
  enum class Kind { kSend, kReceive, kCollective };
  MpiRequest(MPI_Request r, const char* what, double timeout_s, double spin_s, Kind kind)
      : request_(r), what_(what), timeout_s_(timeout_s), spin_s_(spin_s), kind_(kind) {}
  ~MpiRequest() override {
    // Only a transfer abandoned after an error is still pending here. A send may be released
    // (it completes on its own); a receive is cancelled first, so that nothing lands in its
    // buffer later; releasing a pending collective is erroneous in MPI, so one is left to the
    // job's end.
    if (request_ == MPI_REQUEST_NULL || kind_ == Kind::kCollective) return;
    if (kind_ == Kind::kReceive) MPI_Cancel(&request_);
    MPI_Request_free(&request_);
  }
  Status Wait() override {
    PollOps ops;
    ops.test = [this]() -> StatusOr<bool> {
      int done = 0;
      DITUNE_RETURN_IF_ERROR(MpiStatus(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), what_));
      return done != 0;
    };
    ops.spin_s = spin_s_;
    return PollUntilDone(fmt::format("MPI {}", what_), timeout_s_, ops);
  }

 private:
  MPI_Request request_;
  const char* what_;
  double timeout_s_;
  double spin_s_;
  Kind kind_;
};

// The ranks sharing this host and the cores they may run on together (the union of their
// affinity masks; 0 when unknown): binding or `taskset` that leaves ranks sharing cores shows
// here even where the launcher does not flag oversubscription. Collective over the world.
Status LocalRanksAndCores(int* ranks, int* cores) {
  MPI_Comm host;
  DITUNE_RETURN_IF_ERROR(
      MpiStatus(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host), "split by host"));
  MPI_Comm_size(host, ranks);
  cpu_set_t mine;
  CPU_ZERO(&mine);
  const bool known = sched_getaffinity(0, sizeof(mine), &mine) == 0;
  if (!known) CPU_ZERO(&mine);  // an empty mask: unknown, whatever the others report
  std::vector<cpu_set_t> all(static_cast<size_t>(*ranks));
  Status st = MpiStatus(MPI_Allgather(&mine, sizeof(mine), MPI_BYTE, all.data(), sizeof(mine), MPI_BYTE, host),
                        "core count exchange");
  MPI_Comm_free(&host);
  DITUNE_RETURN_IF_ERROR(st);
  cpu_set_t any;
  CPU_ZERO(&any);
  *cores = 0;
  for (cpu_set_t& m : all) {
    if (CPU_COUNT(&m) == 0) return Status::Ok();
    CPU_OR(&any, &any, &m);
  }
  *cores = CPU_COUNT(&any);
  return Status::Ok();
}

class MpiComm : public Comm {
 public:
  MpiComm(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiComm() override {
    if (owned_) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view backend() const override { return "mpi"; }
  int local_ranks() const override {
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    return local != nullptr ? std::max(1, std::min(size_, std::atoi(local))) : size_;
  }

  // Collectives are posted nonblocking and completed by polling, like every other transfer.
  Status AllToAll(const float* send, float* recv, size_t count) override {
    MPI_Request r;
    DITUNE_RETURN_IF_ERROR(MpiStatus(MPI_Ialltoall(send, static_cast<int>(count), MPI_FLOAT, recv,
                                                   static_cast<int>(count), MPI_FLOAT, comm_, &r),
                                     "all-to-all"));
    return Complete(r, "all-to-all", count);
  }
  Status AllGather(const float* send, float* recv, size_t count) override {
    MPI_Request r;
    DITUNE_RETURN_IF_ERROR(MpiStatus(MPI_Iallgather(send, static_cast<int>(count), MPI_FLOAT, recv,
                                                    static_cast<int>(count), MPI_FLOAT, comm_, &r),
                                     "all-gather"));
    return Complete(r, "all-gather", count);
  }
  Status AllReduceSum(float* data, size_t count) override {
    MPI_Request r;
    DITUNE_RETURN_IF_ERROR(MpiStatus(
        MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm_, &r), "all-reduce"));
    return Complete(r, "all-reduce", count);
  }
  StatusOr<std::unique_ptr<Request>> Isend(const float* data, size_t count, int peer, int tag) override {
    MPI_Request r;
    DITUNE_RETURN_IF_ERROR(
        MpiStatus(MPI_Isend(data, static_cast<int>(count), MPI_FLOAT, peer, tag, comm_, &r), "send"));
    return std::unique_ptr<Request>(new MpiRequest(r, "send", timeout_s(), SpinFor(count), MpiRequest::Kind::kSend));
  }
  StatusOr<std::unique_ptr<Request>> Irecv(float* data, size_t count, int peer, int tag) override {
    MPI_Request r;
    DITUNE_RETURN_IF_ERROR(
        MpiStatus(MPI_Irecv(data, static_cast<int>(count), MPI_FLOAT, peer, tag, comm_, &r), "receive"));
    return std::unique_ptr<Request>(
        new MpiRequest(r, "receive", timeout_s(), SpinFor(count), MpiRequest::Kind::kReceive));
  }
  StatusOr<std::unique_ptr<Request>> IAllGatherInPlace(float* data, size_t count) override {
    MPI_Request r;
    DITUNE_RETURN_IF_ERROR(MpiStatus(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, static_cast<int>(count),
                                                    MPI_FLOAT, comm_, &r),
                                     "nonblocking all-gather"));
    return std::unique_ptr<Request>(
        new MpiRequest(r, "nonblocking all-gather", timeout_s(), SpinFor(count), MpiRequest::Kind::kCollective));
  }
  Status Barrier() override {
    MPI_Request r;
    DITUNE_RETURN_IF_ERROR(MpiStatus(MPI_Ibarrier(comm_, &r), "barrier"));
    return Complete(r, "barrier", 0);
  }
  StatusOr<std::unique_ptr<Comm>> Split(const std::vector<int>& ranks) override {
    int pos = -1;
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] == rank_) pos = static_cast<int>(i);
    }
    if (pos < 0) return Status::Internal(fmt::format("rank {} is not in its own split group", rank_));
    int color = ranks.front();
    for (int r : ranks) color = std::min(color, r);
    MPI_Comm sub;
    DITUNE_RETURN_IF_ERROR(MpiStatus(MPI_Comm_split(comm_, color, pos, &sub), "split"));
    MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
    auto child = std::make_unique<MpiComm>(sub, true);
    child->set_timeout_s(timeout_s());
    child->set_spin_s(spin_s());
    return std::unique_ptr<Comm>(std::move(child));
  }
  double Now() const override { return MPI_Wtime(); }
  void Abort(const std::string& why) override {
    std::fprintf(stderr, "ditune rank %d: %s\n", rank_, why.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

 private:
  // The tight phase for a transfer of `count` floats (per peer, for a collective).
  double SpinFor(size_t count) const { return count * sizeof(float) <= kCommSpinMaxBytes ? spin_s() : 0; }
  Status Complete(MPI_Request r, const char* what, size_t count) {
    return MpiRequest(r, what, timeout_s(), SpinFor(count), MpiRequest::Kind::kCollective).Wait();
  }

  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

StatusOr<std::unique_ptr<Comm>> NewMpiWorld(int* argc, char*** argv) {
  DITUNE_ASSIGN_OR_RETURN(const double timeout_s, CommTimeoutFromEnv());
  DITUNE_RETURN_IF_ERROR(CommSpinFromEnv(false).status());  // a bad setting fails before MPI_Init
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    // MPI_Init waits for every rank: a peer that never starts must not hang this one.
    const StartupWatchdog watchdog("MPI start-up (MPI_Init)", timeout_s);
    DITUNE_RETURN_IF_ERROR(MpiStatus(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "init"));
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  auto world = std::make_unique<MpiComm>(MPI_COMM_WORLD, false);
  world->set_timeout_s(timeout_s);
  int local_ranks = 1, local_cores = 0;
  {
    const StartupWatchdog watchdog("MPI start-up (core count exchange)", timeout_s);
    DITUNE_RETURN_IF_ERROR(LocalRanksAndCores(&local_ranks, &local_cores));
  }
  DITUNE_ASSIGN_OR_RETURN(const double spin_s, CommSpinFromEnv(RanksOversubscribed(local_ranks, local_cores)));
  world->set_spin_s(spin_s);
  return std::unique_ptr<Comm>(std::move(world));
}

}  // namespace ditune::exec
