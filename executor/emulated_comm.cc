#include "executor/emulated_comm.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace ditune::exec {
namespace {

class DoneRequest : public Request {
 public:
  Status Wait() override { return Status::Ok(); }
};

class EmulatedComm : public Comm {
 public:
  EmulatedComm(int rank, int size, CommCost cost, double* charged)
      : rank_(rank), size_(size), cost_(std::move(cost)), charged_(charged) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view backend() const override { return "emulated"; }
  int local_ranks() const override { return 1; }  // the other ranks do not exist

  Status AllToAll(const float* send, float* recv, size_t count) override {
    Charge("all_to_all", count * size_);
    // Every peer "sends" what this rank sends it: the shapes are right, the values are not.
    for (int j = 0; j < size_; ++j) std::memcpy(recv + j * count, send + rank_ * count, count * sizeof(float));
    return Status::Ok();
  }
  Status AllGather(const float* send, float* recv, size_t count) override {
    Charge("all_gather", count * size_);
    for (int j = 0; j < size_; ++j) std::memcpy(recv + j * count, send, count * sizeof(float));
    return Status::Ok();
  }
  Status AllReduceSum(float*, size_t count) override {
    Charge("all_reduce", count);
    return Status::Ok();
  }
  StatusOr<std::unique_ptr<Request>> Isend(const float*, size_t count, int, int) override {
    Charge("sendrecv", count, 2);
    return std::unique_ptr<Request>(new DoneRequest());
  }
  StatusOr<std::unique_ptr<Request>> Irecv(float* data, size_t count, int, int) override {
    std::memset(data, 0, count * sizeof(float));
    return std::unique_ptr<Request>(new DoneRequest());
  }
  Status Barrier() override { return Status::Ok(); }
  StatusOr<std::unique_ptr<Comm>> Split(const std::vector<int>& ranks) override {
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] == rank_) {
        return std::unique_ptr<Comm>(new EmulatedComm(static_cast<int>(i), static_cast<int>(ranks.size()), cost_, charged_));
      }
    }
    return Status::Internal(fmt::format("rank {} is not in its own split group", rank_));
  }
  double Now() const override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  void Abort(const std::string& why) override {
    std::fprintf(stderr, "ditune (emulated rank %d): %s\n", rank_, why.c_str());
  }

 private:
  void Charge(const char* op, size_t floats, int group = 0) {
    if (size_ > 1 && cost_) *charged_ += cost_(op, static_cast<double>(floats) * sizeof(float), group ? group : size_);
  }

  int rank_, size_;
  CommCost cost_;
  double* charged_;
};

}  // namespace

std::unique_ptr<Comm> NewEmulatedWorld(int rank, int size, CommCost cost, double* charged) {
  return std::unique_ptr<Comm>(new EmulatedComm(rank, size, std::move(cost), charged));
}

}  // namespace ditune::exec
