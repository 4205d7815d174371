#include "executor/local_comm.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include <fmt/format.h>

namespace ditune::exec {
namespace {

class LocalRequest : public Request {
 public:
  Status Wait() override { return Status::Ok(); }
};

class LocalComm : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string_view backend() const override { return "local"; }
  Status AllToAll(const float* send, float* recv, size_t count) override {
    std::memmove(recv, send, count * sizeof(float));
    return Status::Ok();
  }
  Status AllGather(const float* send, float* recv, size_t count) override {
    std::memmove(recv, send, count * sizeof(float));
    return Status::Ok();
  }
  Status AllReduceSum(float*, size_t) override { return Status::Ok(); }
  // A send to oneself is stored until the matching receive.
  StatusOr<std::unique_ptr<Request>> Isend(const float* data, size_t count, int peer, int tag) override {
    if (peer != 0) return Status::InvalidArgument(fmt::format("local comm has one rank; peer {}", peer));
    mailbox_[tag].assign(data, data + count);
    return std::unique_ptr<Request>(new LocalRequest());
  }
  StatusOr<std::unique_ptr<Request>> Irecv(float* data, size_t count, int peer, int tag) override {
    if (peer != 0) return Status::InvalidArgument(fmt::format("local comm has one rank; peer {}", peer));
    auto it = mailbox_.find(tag);
    if (it == mailbox_.end() || it->second.size() != count) {
      return Status::Internal(fmt::format("local receive with tag {} has no matching send", tag));
    }
    std::memcpy(data, it->second.data(), count * sizeof(float));
    mailbox_.erase(it);
    return std::unique_ptr<Request>(new LocalRequest());
  }
  Status Barrier() override { return Status::Ok(); }
  StatusOr<std::unique_ptr<Comm>> Split(const std::vector<int>& ranks) override {
    if (ranks != std::vector<int>{0}) return Status::InvalidArgument("local comm splits only into {0}");
    return std::unique_ptr<Comm>(new LocalComm());
  }
  double Now() const override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  void Abort(const std::string& why) override {
    std::fprintf(stderr, "ditune: %s\n", why.c_str());
  }

 private:
  std::map<int, std::vector<float>> mailbox_;
};

}  // namespace

std::unique_ptr<Comm> NewLocalComm() { return std::unique_ptr<Comm>(new LocalComm()); }

}  // namespace ditune::exec
