// The CPU device: host memory (MemAvailable) with accounting, a synchronous stream whose
// events are steady-clock timestamps.
#ifndef DITUNE_EXECUTOR_CPU_DEVICE_H_
#define DITUNE_EXECUTOR_CPU_DEVICE_H_

#include <memory>

#include "executor/device.h"

namespace ditune::exec {

std::unique_ptr<Device> NewCpuDevice();

// Whether [p, p + bytes) lies inside one live buffer of `device` (a cpu device); the ref
// kernels check every access with it.
bool CpuDeviceOwns(const Device* device, const void* p, int64_t bytes);

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_CPU_DEVICE_H_
