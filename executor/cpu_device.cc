#include "executor/cpu_device.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>

#include <fmt/format.h>

namespace ditune::exec {
namespace {

class CpuEvent : public Event {
 public:
  explicit CpuEvent(std::chrono::steady_clock::time_point t) : t_(t) {}
  StatusOr<double> SecondsSince(const Event& earlier) const override {
    const auto* e = dynamic_cast<const CpuEvent*>(&earlier);
    if (e == nullptr) return Status::InvalidArgument("events of different devices");
    return std::chrono::duration<double>(t_ - e->t_).count();
  }

 private:
  std::chrono::steady_clock::time_point t_;
};

class CpuStream : public Stream {
 public:
  Status Synchronize() override { return Status::Ok(); }  // work runs on the calling thread
  StatusOr<std::unique_ptr<Event>> Record() override {
    return std::unique_ptr<Event>(new CpuEvent(std::chrono::steady_clock::now()));
  }
};

class CpuDevice;

// Live buffers by start address.
using BufferMap = std::map<uintptr_t, int64_t>;

class CpuBuffer : public Buffer {
 public:
  CpuBuffer(void* p, int64_t n, int64_t* allocated, BufferMap* live) : p_(p), n_(n), allocated_(allocated), live_(live) {
    (*live_)[reinterpret_cast<uintptr_t>(p_)] = n_;
  }
  ~CpuBuffer() override {
    live_->erase(reinterpret_cast<uintptr_t>(p_));
    std::free(p_);
    *allocated_ -= n_;
  }
  void* data() override { return p_; }
  int64_t bytes() const override { return n_; }

 private:
  void* p_;
  int64_t n_;
  int64_t* allocated_;
  BufferMap* live_;
};

int64_t MemAvailable() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t kb = 0;
  while (in >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
}

std::string CpuName() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "cpu";
}

class CpuDevice : public Device {
 public:
  CpuDevice() {
    props_.backend = "cpu";
    props_.name = CpuName();
    props_.memory_bytes = MemAvailable();
    props_.compute_units = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    props_.bf16 = false;
    props_.async = false;
    props_.host_memory = true;
  }
  const DeviceProps& props() const override { return props_; }
  Stream* stream() override { return &stream_; }
  StatusOr<std::unique_ptr<Buffer>> Alloc(int64_t bytes) override {
    if (bytes < 0) return Status::InvalidArgument("negative allocation");
    if (allocated_ + bytes > props_.memory_bytes) {
      return Status::InvalidArgument(fmt::format("allocating {:.2f} GB would exceed the {:.2f} GB available ({:.2f} GB in use)",
                                                 bytes / 1e9, props_.memory_bytes / 1e9, allocated_ / 1e9));
    }
    void* p = std::aligned_alloc(64, static_cast<size_t>((bytes + 63) / 64 * 64));
    if (p == nullptr && bytes > 0) return Status::IOError(fmt::format("out of memory allocating {} bytes", bytes));
    allocated_ += bytes;
    peak_ = std::max(peak_, allocated_);
    return std::unique_ptr<Buffer>(new CpuBuffer(p, bytes, &allocated_, &live_));
  }
  bool Owns(const void* p, int64_t bytes) const {
    const auto a = reinterpret_cast<uintptr_t>(p);
    auto it = live_.upper_bound(a);
    if (it == live_.begin()) return false;
    --it;
    return bytes >= 0 && a + static_cast<uintptr_t>(bytes) <= it->first + static_cast<uintptr_t>(it->second);
  }
  int64_t allocated_bytes() const override { return allocated_; }
  int64_t peak_bytes() const override { return peak_; }

 private:
  DeviceProps props_;
  CpuStream stream_;
  int64_t allocated_ = 0;
  int64_t peak_ = 0;
  BufferMap live_;
};

}  // namespace

std::unique_ptr<Device> NewCpuDevice() { return std::unique_ptr<Device>(new CpuDevice()); }

bool CpuDeviceOwns(const Device* device, const void* p, int64_t bytes) {
  const auto* d = dynamic_cast<const CpuDevice*>(device);
  return d != nullptr && d->Owns(p, bytes);
}

}  // namespace ditune::exec
