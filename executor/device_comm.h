// Transfers of the engine's bf16 device tensors over a Comm (counts in bf16 elements).
//
// A communicator on device memory (NCCL) moves the tensors where they are: bf16 pairs as
// 32-bit words for the data movements (every count even), sums in bf16. Any other
// communicator (MPI) is staged through host memory in fp32 — lossless for bf16 values; the
// sum is then taken in fp32 and rounded once — which is also how several ranks share one GPU.
// Every transfer starts after the kernels queued before its call (Comm::OrderAfter: an event
// on NCCL's stream, a drained stream for staging), so what a kernel wrote is complete before
// it moves; a receive is complete on the device when its call (or its Wait) returns.
#ifndef DITUNE_EXECUTOR_DEVICE_COMM_H_
#define DITUNE_EXECUTOR_DEVICE_COMM_H_

#include <cstdint>
#include <memory>

#include "executor/comm.h"
#include "executor/kernels.h"

namespace ditune::exec {

class DeviceComm {
 public:
  // Neither is owned; both must outlive this.
  DeviceComm(Comm* comm, Kernels* kernels) : comm_(comm), k_(kernels) {}

  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }
  Comm* comm() { return comm_; }

  // Rank i's send[j count ..) goes to rank j's recv[i count ..).
  Status AllToAll(const void* send, void* recv, int64_t count);
  // recv = every rank's `count` elements, in rank order.
  Status AllGather(const void* send, void* recv, int64_t count);
  // data = the elementwise sum over the ranks.
  Status AllReduceSum(void* data, int64_t count);
  // A ring shift (Comm::SendRecv): `recv` holds `from`'s data once Wait() returns.
  StatusOr<std::unique_ptr<Request>> SendRecv(const void* send, void* recv, int64_t count, int to, int from, int tag);

  // A nonblocking all-gather in place (DistriFusion's K/V): `data` holds size() chunks of
  // `count` elements, this rank's own at rank() * count; every chunk holds its rank's once
  // Wait() returns. Until then the transfer may read this rank's chunk and write the others.
  StatusOr<std::unique_ptr<Request>> IAllGatherInPlace(void* data, int64_t count);

  // Point to point (PipeFusion's stage hand-offs): `data` may be reused once Wait() returns;
  // a receive holds `peer`'s data then. Messages between two ranks arrive in order.
  StatusOr<std::unique_ptr<Request>> Isend(const void* data, int64_t count, int peer, int tag);
  StatusOr<std::unique_ptr<Request>> Irecv(void* data, int64_t count, int peer, int tag);

  // Host seconds spent in this communicator's calls and waits.
  double seconds() const { return seconds_; }

 private:
  // The communicator moves the kernels' buffers as they are: device memory over a device
  // communicator (bf16 pairs moved as 4-byte words), or float buffers in host memory over a
  // host one. Otherwise every transfer is staged through host floats.
  bool direct() const {
    return comm_->device_memory() ||
           (k_->element_bytes() == 4 && k_->device()->props().host_memory);
  }
  // The 4-byte words `count` act elements take.
  size_t Words(int64_t count) const {
    return static_cast<size_t>(k_->element_bytes() == 4 ? count : count / 2);
  }
  Status Even(const char* what, int64_t count) const;

  Comm* comm_;
  Kernels* k_;
  double seconds_ = 0;
};

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_DEVICE_COMM_H_
