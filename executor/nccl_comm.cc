#include "executor/nccl_comm.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

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

class NcclRequest : public Request {
 public:
  explicit NcclRequest(cudaEvent_t e) : e_(e) {}
  ~NcclRequest() override { cudaEventDestroy(e_); }
  Status Wait() override {
    CUDA_OK(cudaEventSynchronize(e_));
    return Status::Ok();
  }

 private:
  cudaEvent_t e_;
};

class NcclComm : public Comm {
 public:
  // `host`: the MPI world under the NCCL world; null for sub-communicators.
  NcclComm(ncclComm_t comm, cudaStream_t stream, int rank, int size, int device, Comm* host)
      : comm_(comm), stream_(stream), rank_(rank), size_(size), device_(device), host_(host) {}
  ~NcclComm() override {
    cudaSetDevice(device_);
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view backend() const override { return "nccl"; }
  bool device_memory() const override { return true; }
  Comm* host() override { return host_; }

  Status AllToAll(const float* send, float* recv, size_t count) override {
    // Grouped point-to-point, as NCCL has no all-to-all primitive.
    return Checked([&]() -> Status {
      NCCL_OK(ncclGroupStart());
      for (int peer = 0; peer < size_; ++peer) {
        NCCL_OK(ncclSend(send + peer * count, count, ncclFloat32, peer, comm_, stream_));
        NCCL_OK(ncclRecv(recv + peer * count, count, ncclFloat32, peer, comm_, stream_));
      }
      NCCL_OK(ncclGroupEnd());
      return Sync();
    });
  }
  Status AllGather(const float* send, float* recv, size_t count) override {
    return Checked([&]() -> Status {
      NCCL_OK(ncclAllGather(send, recv, count, ncclFloat32, comm_, stream_));
      return Sync();
    });
  }
  Status AllReduceSum(float* data, size_t count) override {
    return Checked([&]() -> Status {
      NCCL_OK(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream_));
      return Sync();
    });
  }
  Status AllReduceSumBf16(void* data, size_t count) override {
    return Checked([&]() -> Status {
      NCCL_OK(ncclAllReduce(data, data, count, ncclBfloat16, ncclSum, comm_, stream_));
      return Sync();
    });
  }
  StatusOr<std::unique_ptr<Request>> Isend(const float* data, size_t count, int peer, int) override {
    return P2p([&] { return ncclSend(data, count, ncclFloat32, peer, comm_, stream_); });
  }
  StatusOr<std::unique_ptr<Request>> Irecv(float* data, size_t count, int peer, int) override {
    return P2p([&] { return ncclRecv(data, count, ncclFloat32, peer, comm_, stream_); });
  }
  StatusOr<std::unique_ptr<Request>> SendRecv(const float* send, size_t send_count, int to, float* recv,
                                              size_t recv_count, int from, int) override {
    return P2p([&] {
      ncclResult_t r = ncclGroupStart();
      if (r == ncclSuccess) r = ncclSend(send, send_count, ncclFloat32, to, comm_, stream_);
      if (r == ncclSuccess) r = ncclRecv(recv, recv_count, ncclFloat32, from, comm_, stream_);
      const ncclResult_t end = ncclGroupEnd();
      return r != ncclSuccess ? r : end;
    });
  }
  StatusOr<std::unique_ptr<Request>> IAllGatherInPlace(float* data, size_t count) override {
    // In place: NCCL takes the send buffer at this rank's offset of the receive buffer.
    return P2p([&] { return ncclAllGather(data + rank_ * count, data, count, ncclFloat32, comm_, stream_); });
  }
  Status Barrier() override {
    float* one = nullptr;
    CUDA_OK(cudaMallocAsync(&one, sizeof(float), stream_));
    Status st = AllReduceSum(one, 1);
    cudaFreeAsync(one, stream_);
    return st;
  }
  StatusOr<std::unique_ptr<Comm>> Split(const std::vector<int>& ranks) override {
    int pos = -1, color = ranks.front();
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] == rank_) pos = static_cast<int>(i);
      color = std::min(color, ranks[i]);
    }
    if (pos < 0) return Status::Internal(fmt::format("rank {} is not in its own split group", rank_));
    ncclComm_t sub;
    NCCL_OK(ncclCommSplit(comm_, color, pos, &sub, nullptr));
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return std::unique_ptr<Comm>(new NcclComm(sub, s, pos, static_cast<int>(ranks.size()), device_, nullptr));
  }
  double Now() const override { return MPI_Wtime(); }
  [[noreturn]] void Abort(const std::string& why) override {
    std::fprintf(stderr, "ditune rank %d (nccl): %s\n", rank_, why.c_str());
    ncclCommAbort(comm_);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::exit(1);
  }

 private:
  Status Sync() {
    CUDA_OK(cudaStreamSynchronize(stream_));
    return Status::Ok();
  }
  // Runs `f`; on failure aborts the communicator so that peers stop waiting.
  template <typename F>
  Status Checked(F&& f) {
    CUDA_OK(cudaSetDevice(device_));
    Status st = f();
    if (!st.ok()) ncclCommAbort(comm_);
    return st;
  }
  template <typename F>
  StatusOr<std::unique_ptr<Request>> P2p(F&& launch) {
    CUDA_OK(cudaSetDevice(device_));
    if (ncclResult_t r = launch(); r != ncclSuccess) {
      ncclCommAbort(comm_);
      return NcclStatus(r, "nonblocking NCCL transfer", __LINE__);
    }
    cudaEvent_t e;
    CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CUDA_OK(cudaEventRecord(e, stream_));
    return std::unique_ptr<Request>(new NcclRequest(e));
  }

  ncclComm_t comm_;
  cudaStream_t stream_;
  int rank_, size_, device_;
  Comm* host_;
};

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
  if (MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
    return Status::Unavailable("broadcasting the NCCL unique id over MPI failed");
  }
  ncclComm_t comm;
  NCCL_OK(ncclCommInitRank(&comm, mpi_world->size(), id, mpi_world->rank()));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return std::unique_ptr<Comm>(new NcclComm(comm, stream, mpi_world->rank(), mpi_world->size(), device, mpi_world));
}

}  // namespace ditune::exec
