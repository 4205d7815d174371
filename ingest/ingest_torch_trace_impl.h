// Reading a PyTorch profiler trace file (ingest_torch_trace_json.cc), for the reader of its
// events in ingest_torch_trace.cc, and the GPU time by kernel class
// (ingest_torch_trace_kernels.cc). Not part of the public API.
#ifndef DITUNE_INGEST_INGEST_TORCH_TRACE_IMPL_H_
#define DITUNE_INGEST_INGEST_TORCH_TRACE_IMPL_H_

#include <functional>
#include <nlohmann/json.hpp>

#include "core/text.h"
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "ingest/ingest.h"
#include "costmodels/measurement.h"

namespace ditune::ingest_internal::torch_trace {

// What a trace is, for messages that refuse one.
inline constexpr std::string_view kTraceExample =
    "the profile_trace_rank_R.json[.gz] that torch.profiler's export_chrome_trace writes, e.g. "
    "xDiT's runner with --profile";

// True iff `data` starts with gzip's magic bytes 1f 8b.
bool IsGzip(std::string_view data);

// The bytes a gzip file holds (its members one after another; zero padding after the last is
// ignored). InvalidArgument naming `origin` when the data is corrupt, cut short, followed by
// other bytes, or inflates to more than 8 GiB.
StatusOr<std::string> Gunzip(std::string_view data, std::string_view origin);

// The trace's JSON document with only the complete ("ph": "X") events the reader uses in its
// "traceEvents": GPU kernels, memcpys and memsets, CUDA runtime and driver calls,
// record_param_comms ops and "ProfilerStep#N" windows (a trace holds millions of CPU ops; the
// rest are dropped as they are read). InvalidArgument naming `origin` when the text is not a
// JSON object, nests more than 64 levels, or is not valid JSON (saying so when it is cut short).
StatusOr<nlohmann::json> ParseTraceJson(std::string_view text, std::string_view origin);

// One complete event of the trace, as the reader keeps it: a GPU kernel, a memcpy or memset,
// a CUDA runtime or driver call, or a host op (record_param_comms, ProfilerStep#N).
enum class Kind { kKernel, kMemcpy, kRuntime, kHost };
struct Event {
  Kind kind = Kind::kHost;
  std::string_view name;
  double ts_us = 0;
  double dur_us = 0;
  std::string thread;                    // "pid/tid"
  const nlohmann::json* args = nullptr;  // an object, or nullptr
  double end_us() const { return ts_us + dur_us; }
};

using ::ditune::Lower;  // core/text.h

// True iff `k` is an NCCL kernel: named ncclDevKernel* / ncclKernel*, or carrying a
// record_param_comms "Collective name".
bool IsNcclKernel(const Event& k);

// The class of a GPU kernel for the time by class: "nccl", "attention" (flash, fmha,
// attention, attn in its name; before gemm, since flash attention names cutlass types),
// "gemm" (gemm, cutlass, xmma, nvjet, cublas) or "other".
std::string_view KernelClass(const Event& k);

// The "ProfilerStep#N" host windows of `events` (sorted by start), [start, end) in µs, with
// overlapping ones (a step annotated twice) merged and touching ones kept apart; empty when
// the trace has none.
std::vector<std::pair<double, double>> ProfilerWindows(const std::vector<Event>& events);

// The e2e measurement op "profile" (backend "xdit") of the GPU's kernel time by class, or
// nullopt when `events` (sorted by start) hold no kernel; ingest.h's ParseTorchTrace says
// what its params hold. `world_size` and `rank` are the trace's distributedInfo; `warn`
// receives what is left out.
std::optional<Measurement> KernelTimeByClass(const std::vector<Event>& events,
                                             const IngestContext& ctx,
                                             std::optional<int> world_size, std::optional<int> rank,
                                             const std::function<void(std::string_view)>& warn);

}  // namespace ditune::ingest_internal::torch_trace

#endif  // DITUNE_INGEST_INGEST_TORCH_TRACE_IMPL_H_
