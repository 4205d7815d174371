#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "executor/gpu_module.h"

namespace ditune::exec {
namespace {

std::vector<std::string> Candidates() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("DITUNE_GPU_MODULE"); env != nullptr && *env != '\0') {
    paths.emplace_back(env);
    return paths;  // an explicit choice is the only one
  }
#ifdef DITUNE_GPU_MODULE_PATH
  paths.emplace_back(DITUNE_GPU_MODULE_PATH);
#endif
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    paths.push_back((exe.parent_path() / "libditune_gpu.so").string());
    paths.push_back((exe.parent_path().parent_path() / "executor" / "libditune_gpu.so").string());
    paths.push_back((exe.parent_path().parent_path() / "lib" / "libditune_gpu.so").string());
  }
  return paths;
}

struct Loaded {
  const GpuModule* module = nullptr;
  Status status = Status::Ok();
};

Loaded Load() {
  std::string tried;
  for (const auto& path : Candidates()) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      tried += fmt::format("{}{} (missing)", tried.empty() ? "" : "; ", path);
      continue;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = dlerror();
      return {nullptr, Status::Unavailable(fmt::format("the GPU backend module {} could not be loaded: {}", path,
                                                       err != nullptr ? err : "unknown error"))};
    }
    using Entry = const GpuModule* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(handle, "ditune_gpu_module"));
    if (entry == nullptr) {
      return {nullptr, Status::Unavailable(fmt::format("{} is not a ditune GPU module (no ditune_gpu_module)", path))};
    }
    const GpuModule* m = entry();
    if (m == nullptr || m->abi != kGpuModuleAbi) {
      return {nullptr, Status::Unavailable(fmt::format(
                           "{} is a GPU module of another ditune build (ABI {}, this binary needs {}); rebuild both",
                           path, m != nullptr ? m->abi : -1, kGpuModuleAbi))};
    }
    return {m, Status::Ok()};  // the handle stays open for the life of the process
  }
  return {nullptr, Status::Unavailable(fmt::format(
                       "the GPU backend module libditune_gpu.so was not found (tried: {}); set DITUNE_GPU_MODULE to its "
                       "path",
                       tried))};
}

}  // namespace

StatusOr<const GpuModule*> LoadGpuModule() {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = Load(); });
  if (!loaded.status.ok()) return loaded.status;
  return loaded.module;
}

}  // namespace ditune::exec
