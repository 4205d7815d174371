// Compute devices: what a backend's device is (described by data, never by an is_cuda()
// check), its memory with accounting, and a stream with events for timing the device
// rather than the host. The registry in backend_registry.cc is the only place that names
// the implementations (`cpu` here; `cuda` plugs in behind the build flag).
#ifndef DITUNE_EXECUTOR_DEVICE_H_
#define DITUNE_EXECUTOR_DEVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ditune::exec {

struct DeviceProps {
  std::string backend;        // "cpu", "cuda"
  std::string name;           // e.g. the CPU model or "NVIDIA H100 80GB HBM3"
  int64_t memory_bytes = 0;   // what the device has for this process
  int compute_units = 0;      // cores or SMs
  bool bf16 = false;          // native bf16 arithmetic
  bool async = false;         // streams run asynchronously to the host
  bool host_memory = false;   // buffers are the process's own memory (a host communicator reads them)
};

// A point on a stream's timeline.
class Event {
 public:
  virtual ~Event() = default;
  // Seconds from `earlier` to this event, both completed (device time).
  virtual StatusOr<double> SecondsSince(const Event& earlier) const = 0;
};

class Stream {
 public:
  virtual ~Stream() = default;
  // Returns when everything submitted so far has finished.
  virtual Status Synchronize() = 0;
  // Records an event after everything submitted so far.
  virtual StatusOr<std::unique_ptr<Event>> Record() = 0;
};

// Device memory, freed by its destructor.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* data() = 0;
  virtual int64_t bytes() const = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceProps& props() const = 0;
  virtual Stream* stream() = 0;
  // Allocates, with accounting; ResourceExhausted-style InvalidArgument naming the sizes when
  // it would exceed props().memory_bytes.
  virtual StatusOr<std::unique_ptr<Buffer>> Alloc(int64_t bytes) = 0;
  virtual int64_t allocated_bytes() const = 0;
  virtual int64_t peak_bytes() const = 0;
};

StatusOr<std::unique_ptr<Device>> CreateDevice(std::string_view backend);
std::vector<std::string> DeviceBackends();

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_DEVICE_H_
