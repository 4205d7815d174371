// Communication between the executor's ranks. One interface, several backends (the
// registry in backend_registry.cc is the only place that names them): `local` (one rank)
// and `mpi` (CPU ranks, or host-staged). Counts are in floats.
#ifndef DITUNE_EXECUTOR_COMM_H_
#define DITUNE_EXECUTOR_COMM_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "executor/comm_wait.h"
#include "executor/device.h"

namespace ditune::exec {

// A pending nonblocking transfer.
class Request {
 public:
  virtual ~Request() = default;
  virtual Status Wait() = 0;
};

// Several pending transfers completed together. The first that fails ends the wait: the
// others are abandoned (their destructors cancel or release them), so a group whose peer
// stalled fails within one timeout, not one per request.
class RequestGroup : public Request {
 public:
  void Add(std::unique_ptr<Request> r) { requests_.push_back(std::move(r)); }
  Status Wait() override {
    for (auto& r : requests_) {
      Status s = r->Wait();
      if (!s.ok()) {
        requests_.clear();
        return s;
      }
    }
    requests_.clear();
    return Status::Ok();
  }

 private:
  std::vector<std::unique_ptr<Request>> requests_;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string_view backend() const = 0;
  // How many of this communicator's ranks share this process's host (and its memory).
  virtual int local_ranks() const { return size(); }
  // Whether the transfers' buffers are device memory (NCCL) rather than host memory.
  virtual bool device_memory() const { return false; }
  // A communicator over the same ranks for small host-memory messages (timings, flags): this
  // one for host backends, the MPI world NCCL was bootstrapped on for NCCL's world.
  virtual Comm* host() { return this; }
  // For device-memory communicators: transfers issued after this call start only once what
  // is already queued on `device`'s stream has finished, so what a kernel wrote is complete
  // before it moves and what a kernel reads is not yet overwritten. The default waits for the
  // stream on the host; NCCL orders its stream after the device's with an event instead.
  virtual Status OrderAfter(Device* device) { return device->stream()->Synchronize(); }

  // Rank i sends send[j * count .. (j + 1) * count) to rank j and receives rank j's chunk
  // into recv[j * count ..).
  virtual Status AllToAll(const float* send, float* recv, size_t count) = 0;
  // recv = the `count` floats of every rank, in rank order.
  virtual Status AllGather(const float* send, float* recv, size_t count) = 0;
  // data = elementwise sum over ranks.
  virtual Status AllReduceSum(float* data, size_t count) = 0;
  // data = elementwise sum over ranks of `count` bfloat16 values (fp32 accumulation where the
  // backend has it). Only communicators on device memory (NCCL) take bf16; the others leave
  // it NotSupported and their callers stage through fp32.
  virtual Status AllReduceSumBf16(void* /*data*/, size_t /*count*/) {
    return Status::NotSupported(std::string(backend()) + " communicators reduce fp32 only");
  }
  virtual StatusOr<std::unique_ptr<Request>> Isend(const float* data, size_t count, int peer, int tag) = 0;
  virtual StatusOr<std::unique_ptr<Request>> Irecv(float* data, size_t count, int peer, int tag) = 0;
  // A ring shift: sends `send` to `to` and receives `recv` from `from`, nonblocking, both
  // complete at Wait(). NCCL posts the pair as one group (a lone send and receive on one
  // stream would wait on each other around a ring); host backends post both.
  virtual StatusOr<std::unique_ptr<Request>> SendRecv(const float* send, size_t send_count, int to, float* recv,
                                                      size_t recv_count, int from, int tag) {
    auto group = std::make_unique<RequestGroup>();
    DITUNE_ASSIGN_OR_RETURN(auto s, Isend(send, send_count, to, tag));
    group->Add(std::move(s));
    DITUNE_ASSIGN_OR_RETURN(auto r, Irecv(recv, recv_count, from, tag));
    group->Add(std::move(r));
    return std::unique_ptr<Request>(std::move(group));
  }
  // A nonblocking all-gather in place: `data` holds size() chunks of `count` floats with this
  // rank's own at rank() * count; once Wait() returns every chunk holds its rank's. `data`
  // must stay untouched until then. The default runs the blocking AllGather (through a copy
  // of this rank's chunk) and returns a completed request.
  virtual StatusOr<std::unique_ptr<Request>> IAllGatherInPlace(float* data, size_t count);
  virtual Status Barrier() = 0;
  // The sub-communicator of `ranks` (this communicator's ranks, in the order given), which
  // must contain this rank. Collective: every rank calls it, each with its own group, and
  // the groups partition the ranks.
  virtual StatusOr<std::unique_ptr<Comm>> Split(const std::vector<int>& ranks) = 0;
  // Seconds since some fixed point, the same clock on every rank as far as the backend can
  // tell (MPI_Wtime); for timing only.
  virtual double Now() const = 0;
  // After a fatal error on this rank, so that no peer waits forever: says `why` on stderr and,
  // where other processes take part (mpi, nccl), aborts the whole job (MPI_Abort, which ends
  // this process too). In one process (local, emulated) it returns, and the caller ends the
  // command with its error; the library itself never calls exit.
  virtual void Abort(const std::string& why) = 0;

  // Seconds a blocking transfer or Wait() waits on the peers before it fails with Unavailable
  // (0: forever). The `mpi` and `nccl` worlds take it from DITUNE_COMM_TIMEOUT_S, their
  // sub-communicators from their parent; a request keeps the one in force when it was posted.
  // See comm_wait.h.
  double timeout_s() const { return timeout_s_; }
  void set_timeout_s(double seconds) { timeout_s_ = seconds; }
  // Seconds a wait on a transfer of at most kCommSpinMaxBytes polls without yielding the core
  // before it polls yielding (comm_wait.h's tight phase; 0: yields from the first poll). The
  // `mpi` world takes it from CommSpinFromEnv, its sub-communicators from their parent; a
  // request keeps the one in force when it was posted. Backends that poll nothing ignore it.
  double spin_s() const { return spin_s_; }
  void set_spin_s(double seconds) { spin_s_ = seconds; }

 private:
  double timeout_s_ = kDefaultCommTimeoutS;
  double spin_s_ = 0;
};

inline StatusOr<std::unique_ptr<Request>> Comm::IAllGatherInPlace(float* data, size_t count) {
  const std::vector<float> mine(data + static_cast<size_t>(rank()) * count,
                                data + static_cast<size_t>(rank() + 1) * count);
  DITUNE_RETURN_IF_ERROR(AllGather(mine.data(), data, count));
  return std::unique_ptr<Request>(new RequestGroup());  // nothing left to wait for
}

// The registry: "local", and "mpi" when built with MPI. `argc`/`argv` go to the backend's
// initialisation. InvalidArgument naming the built backends for an unknown name.
StatusOr<std::unique_ptr<Comm>> CreateComm(std::string_view backend, int* argc, char*** argv);
std::vector<std::string> CommBackends();
// "mpi" when running under mpirun (OMPI/PMI environment) and MPI is built, else "local".
std::string DefaultCommBackend();

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_COMM_H_
