// Reading a PyTorch profiler trace file (ingest_torch_trace_json.cc), for the reader of its
// events in ingest_torch_trace.cc. Not part of the public API.
#ifndef DITUNE_COSTMODELS_INGEST_TORCH_TRACE_IMPL_H_
#define DITUNE_COSTMODELS_INGEST_TORCH_TRACE_IMPL_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

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

}  // namespace ditune::ingest_internal::torch_trace

#endif  // DITUNE_COSTMODELS_INGEST_TORCH_TRACE_IMPL_H_
