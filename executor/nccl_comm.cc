#include "executor/nccl_comm.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "executor/comm_wait.h"
#include "executor/cuda/cuda_backend.h"

namespace ditune::exec {
namespace {

// The one place NCCL and CUDA error codes become a Status in this file.
Status NcclStatus(ncclResult_t r, const char* stmt, int line) {
  if (r == ncclSuccess) return Status::Ok();
  return Status::Unavailable(fmt::format("{} failed (nccl_comm.cc:{}): {}", stmt, line, ncclGetErrorString(r)));
}
Status CudaStatus(cudaError_t e, const char* stmt, int line) {
  if (e == cudaSuccess) return Status::Ok();
  return Status::Unavailable(fmt::format("{} failed (nccl_comm.cc:{}): {}", stmt, line, cudaGetErrorString(e)));
}
#define NCCL_OK(stmt) DITUNE_RETURN_IF_ERROR(NcclStatus((stmt), #stmt, __LINE__))
#define CUDA_OK(stmt) DITUNE_RETURN_IF_ERROR(CudaStatus((stmt), #stmt, __LINE__))

class NcclComm;

// A transfer on the communicator's stream, complete when its event is.
class NcclRequest : public Request {
 public:
  NcclRequest(NcclComm* comm, cudaEvent_t e, const char* what) : comm_(comm), e_(e), what_(what) {}
  ~NcclRequest() override { cudaEventDestroy(e_); }
  Status Wait() override;

 private:
  NcclComm* comm_;
  cudaEvent_t e_;
  const char* what_;
};

// Nonblocking NCCL (ncclConfig_t::blocking = 0): no NCCL call blocks the host. A call that
// returns ncclInProgress is settled by polling ncclCommGetAsyncError, a transfer by polling its
// stream or event, both under the communicator's timeout (comm_wait.h) and watching NCCL's
// asynchronous errors. On any error or timeout the communicator is aborted (its kernels stop,
// so no peer's GPU waits forever) and every later call fails at once.
class NcclComm : public Comm {
 public:
  // `host`: the MPI world under the NCCL world; null for sub-communicators.
  NcclComm(ncclComm_t comm, cudaStream_t stream, int rank, int size, int device, Comm* host, double timeout_s)
      : comm_(comm), stream_(stream), rank_(rank), size_(size), device_(device), host_(host) {
    set_timeout_s(timeout_s);
  }
  ~NcclComm() override {
    cudaSetDevice(device_);
    if (comm_ != nullptr) ncclCommDestroy(comm_);
    if (order_ != nullptr) cudaEventDestroy(order_);
    cudaStreamDestroy(stream_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view backend() const override { return "nccl"; }
  bool device_memory() const override { return true; }
  Comm* host() override { return host_; }
  // The communicator's stream waits for an event recorded on the device's stream: the host
  // issues the transfer at once and the GPU keeps the kernels queued after it running.
  Status OrderAfter(Device* device) override {
    DITUNE_RETURN_IF_ERROR(Usable());
    auto raw = cuda::RawStream(device);
    if (!raw.ok()) return device->stream()->Synchronize();  // not a CUDA device: order on the host
    if (order_ == nullptr) CUDA_OK(cudaEventCreateWithFlags(&order_, cudaEventDisableTiming));
    CUDA_OK(cudaEventRecord(order_, static_cast<cudaStream_t>(*raw)));
    CUDA_OK(cudaStreamWaitEvent(stream_, order_, 0));
    return Status::Ok();
  }

  Status AllToAll(const float* send, float* recv, size_t count) override {
    // Grouped point-to-point, as the collective's building blocks.
    return Blocking("all-to-all", [&] {
      return Grouped([&]() -> ncclResult_t {
        for (int peer = 0; peer < size_; ++peer) {
          ncclResult_t r = ncclSend(send + peer * count, count, ncclFloat32, peer, comm_, stream_);
          if (!Failed(r)) r = ncclRecv(recv + peer * count, count, ncclFloat32, peer, comm_, stream_);
          if (Failed(r)) return r;
        }
        return ncclSuccess;
      });
    });
  }
  Status AllGather(const float* send, float* recv, size_t count) override {
    return Blocking("all-gather", [&] { return ncclAllGather(send, recv, count, ncclFloat32, comm_, stream_); });
  }
  Status AllReduceSum(float* data, size_t count) override {
    return Blocking("all-reduce",
                    [&] { return ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream_); });
  }
  Status AllReduceSumBf16(void* data, size_t count) override {
    return Blocking("all-reduce",
                    [&] { return ncclAllReduce(data, data, count, ncclBfloat16, ncclSum, comm_, stream_); });
  }
  StatusOr<std::unique_ptr<Request>> Isend(const float* data, size_t count, int peer, int) override {
    return Nonblocking("send", [&] { return ncclSend(data, count, ncclFloat32, peer, comm_, stream_); });
  }
  StatusOr<std::unique_ptr<Request>> Irecv(float* data, size_t count, int peer, int) override {
    return Nonblocking("receive", [&] { return ncclRecv(data, count, ncclFloat32, peer, comm_, stream_); });
  }
  StatusOr<std::unique_ptr<Request>> SendRecv(const float* send, size_t send_count, int to, float* recv,
                                              size_t recv_count, int from, int) override {
    return Nonblocking("ring shift", [&] {
      return Grouped([&]() -> ncclResult_t {
        if (ncclResult_t r = ncclSend(send, send_count, ncclFloat32, to, comm_, stream_); Failed(r)) return r;
        return ncclRecv(recv, recv_count, ncclFloat32, from, comm_, stream_);
      });
    });
  }
  StatusOr<std::unique_ptr<Request>> IAllGatherInPlace(float* data, size_t count) override {
    // In place: NCCL takes the send buffer at this rank's offset of the receive buffer.
    return Nonblocking("all-gather",
                       [&] { return ncclAllGather(data + rank_ * count, data, count, ncclFloat32, comm_, stream_); });
  }
  Status Barrier() override {
    DITUNE_RETURN_IF_ERROR(Usable());
    float* one = nullptr;
    CUDA_OK(cudaMallocAsync(&one, sizeof(float), stream_));
    Status st = AllReduceSum(one, 1);
    cudaFreeAsync(one, stream_);
    return st;
  }
  StatusOr<std::unique_ptr<Comm>> Split(const std::vector<int>& ranks) override {
    DITUNE_RETURN_IF_ERROR(Usable());
    int pos = -1, color = ranks.front();
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] == rank_) pos = static_cast<int>(i);
      color = std::min(color, ranks[i]);
    }
    if (pos < 0) return Status::Internal(fmt::format("rank {} is not in its own split group", rank_));
    ncclComm_t sub = nullptr;
    // The child inherits the nonblocking configuration; both it and the parent may be in
    // progress when the call returns.
    const ncclResult_t r = ncclCommSplit(comm_, color, pos, &sub, nullptr);
    DITUNE_RETURN_IF_ERROR(Settle(r, "split"));
    if (sub == nullptr) return Status::Unavailable("ncclCommSplit returned no communicator");
    cudaStream_t s;
    if (cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); e != cudaSuccess) {
      ncclCommAbort(sub);
      return CudaStatus(e, "cudaStreamCreateWithFlags", __LINE__);
    }
    auto child = std::make_unique<NcclComm>(sub, s, pos, static_cast<int>(ranks.size()), device_, nullptr, timeout_s());
    DITUNE_RETURN_IF_ERROR(child->Settle(ncclInProgress, "split (the new communicator)"));
    return std::unique_ptr<Comm>(std::move(child));
  }
  double Now() const override { return MPI_Wtime(); }
  void Abort(const std::string& why) override {
    std::fprintf(stderr, "ditune rank %d (nccl): %s\n", rank_, why.c_str());
    AbortComm();
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  // Settles a call's result: ncclInProgress is polled until the communicator leaves that
  // state. Aborts the communicator on an error or a timeout.
  Status Settle(ncclResult_t r, const char* what) {
    if (r == ncclSuccess) return Status::Ok();
    Status st = Failed(r) ? NcclStatus(r, what, __LINE__) : Status::Ok();
    if (st.ok()) {
      PollOps ops;
      ops.test = [&]() -> StatusOr<bool> {
        ncclResult_t state = ncclSuccess;
        if (ncclResult_t q = ncclCommGetAsyncError(comm_, &state); q != ncclSuccess) {
          return NcclStatus(q, "ncclCommGetAsyncError", __LINE__);
        }
        if (state == ncclInProgress) return false;
        if (state != ncclSuccess) return NcclStatus(state, what, __LINE__);
        return true;
      };
      st = PollUntilDone(fmt::format("NCCL {}", what), timeout_s(), ops);
    }
    if (!st.ok()) AbortComm();
    return st;
  }
  // Waits until `done` reports the work complete (cudaSuccess; cudaErrorNotReady while
  // pending), watching NCCL's asynchronous errors. Aborts the communicator on a failure.
  template <typename Query>
  Status WaitDevice(Query done, const char* what) {
    DITUNE_RETURN_IF_ERROR(Usable());
    PollOps ops;
    ops.test = [&]() -> StatusOr<bool> {
      const cudaError_t e = done();
      if (e == cudaErrorNotReady) return false;
      if (e != cudaSuccess) return CudaStatus(e, what, __LINE__);
      return true;
    };
    ops.health = [&]() -> Status {
      ncclResult_t state = ncclSuccess;
      if (ncclResult_t q = ncclCommGetAsyncError(comm_, &state); q != ncclSuccess) {
        return NcclStatus(q, "ncclCommGetAsyncError", __LINE__);
      }
      return Failed(state) ? NcclStatus(state, what, __LINE__) : Status::Ok();
    };
    Status st = PollUntilDone(fmt::format("NCCL {}", what), timeout_s(), ops);
    if (!st.ok()) AbortComm();
    return st;
  }

 private:
  static bool Failed(ncclResult_t r) { return r != ncclSuccess && r != ncclInProgress; }
  Status Usable() const {
    if (comm_ == nullptr) {
      return Status::Unavailable(
          fmt::format("rank {}: the NCCL communicator was aborted after an earlier error", rank_));
    }
    CUDA_OK(cudaSetDevice(device_));
    return Status::Ok();
  }
  void AbortComm() {
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  // Runs ncclGroupStart, `body`, ncclGroupEnd (always, so the group closes): the first failure.
  template <typename F>
  static ncclResult_t Grouped(F&& body) {
    if (ncclResult_t r = ncclGroupStart(); r != ncclSuccess) return r;
    const ncclResult_t r = body();
    const ncclResult_t end = ncclGroupEnd();
    return Failed(r) ? r : end;
  }
  // A collective: issued, settled, and complete on the device when this returns.
  template <typename F>
  Status Blocking(const char* what, F&& launch) {
    DITUNE_RETURN_IF_ERROR(Usable());
    DITUNE_RETURN_IF_ERROR(Settle(launch(), what));
    return WaitDevice([this] { return cudaStreamQuery(stream_); }, what);
  }
  // A transfer left in flight: issued and settled, its completion an event on the stream.
  template <typename F>
  StatusOr<std::unique_ptr<Request>> Nonblocking(const char* what, F&& launch) {
    DITUNE_RETURN_IF_ERROR(Usable());
    DITUNE_RETURN_IF_ERROR(Settle(launch(), what));
    cudaEvent_t e;
    CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    if (cudaError_t err = cudaEventRecord(e, stream_); err != cudaSuccess) {
      cudaEventDestroy(e);
      return CudaStatus(err, "cudaEventRecord", __LINE__);
    }
    return std::unique_ptr<Request>(new NcclRequest(this, e, what));
  }

  ncclComm_t comm_;
  cudaStream_t stream_;
  cudaEvent_t order_ = nullptr;  // re-recorded by each OrderAfter; a wait takes its state then
  int rank_, size_, device_;
  Comm* host_;
};

Status NcclRequest::Wait() {
  cudaEvent_t e = e_;
  return comm_->WaitDevice([e] { return cudaEventQuery(e); }, what_);
}

}  // namespace

StatusOr<std::unique_ptr<Comm>> NewNcclWorld(Comm* mpi_world) {
  if (mpi_world == nullptr || mpi_world->backend() != "mpi") {
    return Status::InvalidArgument("NCCL is bootstrapped over an MPI world (run under mpirun)");
  }
  int gpus = 0;
  CUDA_OK(cudaGetDeviceCount(&gpus));
  if (gpus == 0) return Status::Unavailable("no CUDA device for NCCL");
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const int device = (local != nullptr ? std::atoi(local) : mpi_world->rank()) % gpus;
  CUDA_OK(cudaSetDevice(device));
  ncclUniqueId id;
  if (mpi_world->rank() == 0) NCCL_OK(ncclGetUniqueId(&id));
  {
    // A blocking MPI call every rank must join: a stalled peer must not hang this one.
    const StartupWatchdog watchdog("broadcasting NCCL's unique id (MPI_Bcast)", mpi_world->timeout_s());
    if (MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
      return Status::Unavailable("broadcasting the NCCL unique id over MPI failed");
    }
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, mpi_world->size(), id, mpi_world->rank(), &config);
  if (comm == nullptr) return NcclStatus(r == ncclSuccess ? ncclInternalError : r, "ncclCommInitRankConfig", __LINE__);
  cudaStream_t stream;
  if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess) {
    ncclCommAbort(comm);
    return CudaStatus(e, "cudaStreamCreateWithFlags", __LINE__);
  }
  auto world = std::make_unique<NcclComm>(comm, stream, mpi_world->rank(), mpi_world->size(), device, mpi_world,
                                          mpi_world->timeout_s());
  // Every rank connects to the others here: a peer that never arrives ends in the timeout.
  DITUNE_RETURN_IF_ERROR(world->Settle(r == ncclSuccess ? ncclInProgress : r, "initialisation"));
  return std::unique_ptr<Comm>(std::move(world));
}

}  // namespace ditune::exec
