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

namespace ditune::exec {

// A pending nonblocking transfer.
class Request {
 public:
  virtual ~Request() = default;
  virtual Status Wait() = 0;
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

  // Rank i sends send[j * count .. (j + 1) * count) to rank j and receives rank j's chunk
  // into recv[j * count ..).
  virtual Status AllToAll(const float* send, float* recv, size_t count) = 0;
  // recv = the `count` floats of every rank, in rank order.
  virtual Status AllGather(const float* send, float* recv, size_t count) = 0;
  // data = elementwise sum over ranks.
  virtual Status AllReduceSum(float* data, size_t count) = 0;
  virtual StatusOr<std::unique_ptr<Request>> Isend(const float* data, size_t count, int peer, int tag) = 0;
  virtual StatusOr<std::unique_ptr<Request>> Irecv(float* data, size_t count, int peer, int tag) = 0;
  virtual Status Barrier() = 0;
  // The sub-communicator of `ranks` (this communicator's ranks, in the order given), which
  // must contain this rank. Collective: every rank calls it, each with its own group, and
  // the groups partition the ranks.
  virtual StatusOr<std::unique_ptr<Comm>> Split(const std::vector<int>& ranks) = 0;
  // Seconds since some fixed point, the same clock on every rank as far as the backend can
  // tell (MPI_Wtime); for timing only.
  virtual double Now() const = 0;
  // Ends the whole job after a fatal error on this rank, so that no peer waits forever.
  [[noreturn]] virtual void Abort(const std::string& why) = 0;
};

// The registry: "local", and "mpi" when built with MPI. `argc`/`argv` go to the backend's
// initialisation. InvalidArgument naming the built backends for an unknown name.
StatusOr<std::unique_ptr<Comm>> CreateComm(std::string_view backend, int* argc, char*** argv);
std::vector<std::string> CommBackends();
// "mpi" when running under mpirun (OMPI/PMI environment) and MPI is built, else "local".
std::string DefaultCommBackend();

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_COMM_H_
