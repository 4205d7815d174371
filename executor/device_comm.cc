#include "executor/device_comm.h"

#include <chrono>
#include <vector>

#include <fmt/format.h>

namespace ditune::exec {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Adds the time from construction to destruction to a counter.
class Timed {
 public:
  explicit Timed(double* total) : total_(total), start_(Now()) {}
  ~Timed() { *total_ += Now() - start_; }
  Timed(const Timed&) = delete;
  Timed& operator=(const Timed&) = delete;

 private:
  double* total_;
  double start_;
};

// A staged transfer (ring shift, send or receive): the host buffers live until Wait(), which
// then uploads what arrived.
class StagedShift : public Request {
 public:
  StagedShift(Kernels* k, void* dst, std::vector<float> out, std::vector<float> in, double* seconds)
      : k_(k), dst_(dst), out_(std::move(out)), in_(std::move(in)), seconds_(seconds) {}
  void Start(std::unique_ptr<Request> r) { inner_ = std::move(r); }
  float* out() { return out_.data(); }
  float* in() { return in_.data(); }
  Status Wait() override {
    Timed t(seconds_);
    if (inner_ == nullptr) return Status::Ok();
    DITUNE_RETURN_IF_ERROR(inner_->Wait());
    inner_.reset();
    if (dst_ == nullptr || in_.empty()) return Status::Ok();  // a send
    return k_->Upload(in_.data(), dst_, static_cast<int64_t>(in_.size()));
  }

 private:
  Kernels* k_;
  void* dst_;
  std::vector<float> out_, in_;
  double* seconds_;
  std::unique_ptr<Request> inner_;
};

// A staged in-place all-gather: the host copy of every chunk lives until Wait(), which then
// uploads the other ranks' chunks.
class StagedGather : public Request {
 public:
  StagedGather(Kernels* k, void* dst, int64_t count, int rank, int ranks, double* seconds)
      : k_(k), dst_(dst), count_(count), rank_(rank), ranks_(ranks), host_(static_cast<size_t>(count * ranks)),
        seconds_(seconds) {}
  void Start(std::unique_ptr<Request> r) { inner_ = std::move(r); }
  float* host() { return host_.data(); }
  Status Wait() override {
    Timed t(seconds_);
    if (inner_ == nullptr) return Status::Ok();
    DITUNE_RETURN_IF_ERROR(inner_->Wait());
    inner_.reset();
    for (int j = 0; j < ranks_; ++j) {
      if (j == rank_) continue;
      DITUNE_RETURN_IF_ERROR(
          k_->Upload(host_.data() + j * count_, static_cast<char*>(dst_) + j * count_ * k_->element_bytes(), count_));
    }
    return Status::Ok();
  }

 private:
  Kernels* k_;
  void* dst_;
  int64_t count_;
  int rank_, ranks_;
  std::vector<float> host_;
  double* seconds_;
  std::unique_ptr<Request> inner_;
};

// A direct ring shift: completes the communicator's request under the timer.
class TimedRequest : public Request {
 public:
  TimedRequest(std::unique_ptr<Request> r, double* seconds) : inner_(std::move(r)), seconds_(seconds) {}
  Status Wait() override {
    Timed t(seconds_);
    return inner_->Wait();
  }

 private:
  std::unique_ptr<Request> inner_;
  double* seconds_;
};

}  // namespace

Status DeviceComm::Even(const char* what, int64_t count) const {
  if (count < 0) return Status::InvalidArgument(fmt::format("{} of {} elements", what, count));
  if (direct() && k_->element_bytes() == 2 && count % 2 != 0) {
    return Status::Internal(fmt::format("{} of {} bf16 elements over {}: device transfers move pairs", what, count,
                                        comm_->backend()));
  }
  return Status::Ok();
}

Status DeviceComm::AllToAll(const void* send, void* recv, int64_t count) {
  DITUNE_RETURN_IF_ERROR(Even("all-to-all", count));
  Timed t(&seconds_);
  const int64_t n = count * size();
  if (direct()) {
    DITUNE_RETURN_IF_ERROR(comm_->OrderAfter(k_->device()));
    return comm_->AllToAll(static_cast<const float*>(send), static_cast<float*>(recv), Words(count));
  }
  std::vector<float> out(static_cast<size_t>(n)), in(static_cast<size_t>(n));
  DITUNE_RETURN_IF_ERROR(k_->Download(send, out.data(), n));
  DITUNE_RETURN_IF_ERROR(comm_->AllToAll(out.data(), in.data(), static_cast<size_t>(count)));
  return k_->Upload(in.data(), recv, n);
}

Status DeviceComm::AllGather(const void* send, void* recv, int64_t count) {
  DITUNE_RETURN_IF_ERROR(Even("all-gather", count));
  Timed t(&seconds_);
  if (direct()) {
    DITUNE_RETURN_IF_ERROR(comm_->OrderAfter(k_->device()));
    return comm_->AllGather(static_cast<const float*>(send), static_cast<float*>(recv), Words(count));
  }
  std::vector<float> out(static_cast<size_t>(count)), in(static_cast<size_t>(count * size()));
  DITUNE_RETURN_IF_ERROR(k_->Download(send, out.data(), count));
  DITUNE_RETURN_IF_ERROR(comm_->AllGather(out.data(), in.data(), static_cast<size_t>(count)));
  return k_->Upload(in.data(), recv, count * size());
}

Status DeviceComm::AllReduceSum(void* data, int64_t count) {
  DITUNE_RETURN_IF_ERROR(Even("all-reduce", count));
  Timed t(&seconds_);
  if (direct()) {
    DITUNE_RETURN_IF_ERROR(comm_->OrderAfter(k_->device()));
    if (k_->element_bytes() == 4) return comm_->AllReduceSum(static_cast<float*>(data), static_cast<size_t>(count));
    return comm_->AllReduceSumBf16(data, static_cast<size_t>(count));
  }
  std::vector<float> v(static_cast<size_t>(count));
  DITUNE_RETURN_IF_ERROR(k_->Download(data, v.data(), count));
  DITUNE_RETURN_IF_ERROR(comm_->AllReduceSum(v.data(), v.size()));
  return k_->Upload(v.data(), data, count);
}

StatusOr<std::unique_ptr<Request>> DeviceComm::SendRecv(const void* send, void* recv, int64_t count, int to, int from,
                                                        int tag) {
  DITUNE_RETURN_IF_ERROR(Even("ring shift", count));
  Timed t(&seconds_);
  if (direct()) {
    DITUNE_RETURN_IF_ERROR(comm_->OrderAfter(k_->device()));
    DITUNE_ASSIGN_OR_RETURN(auto r, comm_->SendRecv(static_cast<const float*>(send), Words(count), to,
                                                    static_cast<float*>(recv), Words(count), from, tag));
    return std::unique_ptr<Request>(new TimedRequest(std::move(r), &seconds_));
  }
  auto shift = std::make_unique<StagedShift>(k_, recv, std::vector<float>(static_cast<size_t>(count)),
                                             std::vector<float>(static_cast<size_t>(count)), &seconds_);
  DITUNE_RETURN_IF_ERROR(k_->Download(send, shift->out(), count));
  DITUNE_ASSIGN_OR_RETURN(auto r, comm_->SendRecv(shift->out(), static_cast<size_t>(count), to, shift->in(),
                                                  static_cast<size_t>(count), from, tag));
  shift->Start(std::move(r));
  return std::unique_ptr<Request>(std::move(shift));
}

StatusOr<std::unique_ptr<Request>> DeviceComm::IAllGatherInPlace(void* data, int64_t count) {
  DITUNE_RETURN_IF_ERROR(Even("all-gather", count));
  Timed t(&seconds_);
  if (direct()) {
    // What the kernels wrote into this rank's chunk must be complete, and nothing queued may
    // still read the others'.
    DITUNE_RETURN_IF_ERROR(comm_->OrderAfter(k_->device()));
    DITUNE_ASSIGN_OR_RETURN(auto r, comm_->IAllGatherInPlace(static_cast<float*>(data), Words(count)));
    return std::unique_ptr<Request>(new TimedRequest(std::move(r), &seconds_));
  }
  auto gather = std::make_unique<StagedGather>(k_, data, count, rank(), size(), &seconds_);
  DITUNE_RETURN_IF_ERROR(
      k_->Download(static_cast<const char*>(data) + rank() * count * k_->element_bytes(), gather->host() + rank() * count, count));
  DITUNE_ASSIGN_OR_RETURN(auto r, comm_->IAllGatherInPlace(gather->host(), static_cast<size_t>(count)));
  gather->Start(std::move(r));
  return std::unique_ptr<Request>(std::move(gather));
}

StatusOr<std::unique_ptr<Request>> DeviceComm::Isend(const void* data, int64_t count, int peer, int tag) {
  DITUNE_RETURN_IF_ERROR(Even("send", count));
  Timed t(&seconds_);
  if (direct()) {
    DITUNE_RETURN_IF_ERROR(comm_->OrderAfter(k_->device()));
    DITUNE_ASSIGN_OR_RETURN(auto r, comm_->Isend(static_cast<const float*>(data), Words(count), peer, tag));
    return std::unique_ptr<Request>(new TimedRequest(std::move(r), &seconds_));
  }
  // The host copy is the send buffer: the device data is free at once.
  auto send = std::make_unique<StagedShift>(k_, nullptr, std::vector<float>(static_cast<size_t>(count)),
                                            std::vector<float>(), &seconds_);
  DITUNE_RETURN_IF_ERROR(k_->Download(data, send->out(), count));
  DITUNE_ASSIGN_OR_RETURN(auto r, comm_->Isend(send->out(), static_cast<size_t>(count), peer, tag));
  send->Start(std::move(r));
  return std::unique_ptr<Request>(std::move(send));
}

StatusOr<std::unique_ptr<Request>> DeviceComm::Irecv(void* data, int64_t count, int peer, int tag) {
  DITUNE_RETURN_IF_ERROR(Even("receive", count));
  Timed t(&seconds_);
  if (direct()) {
    // Kernels queued to read `data` must finish before the transfer overwrites it.
    DITUNE_RETURN_IF_ERROR(comm_->OrderAfter(k_->device()));
    DITUNE_ASSIGN_OR_RETURN(auto r, comm_->Irecv(static_cast<float*>(data), Words(count), peer, tag));
    return std::unique_ptr<Request>(new TimedRequest(std::move(r), &seconds_));
  }
  auto recv = std::make_unique<StagedShift>(k_, data, std::vector<float>(),
                                            std::vector<float>(static_cast<size_t>(count)), &seconds_);
  DITUNE_ASSIGN_OR_RETURN(auto r, comm_->Irecv(recv->in(), static_cast<size_t>(count), peer, tag));
  recv->Start(std::move(r));
  return std::unique_ptr<Request>(std::move(recv));
}

}  // namespace ditune::exec
