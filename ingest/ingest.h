// Reads measurements users already have: ditune's measurement CSV, nccl-tests output, xDiT
// benchmark logs and PyTorch profiler traces. Parsers are pure (text in, measurements out);
// `origin` names the input in errors, which carry the 1-based line number of the offending
// line where the input has lines.
#ifndef DITUNE_INGEST_INGEST_H_
#define DITUNE_INGEST_INGEST_H_

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "costmodels/measurement.h"

namespace ditune {

enum class IngestFormat { kAuto, kCsv, kNcclTests, kXditLog, kTorchTrace };

// What the text itself does not say, given on the command line.
struct IngestContext {
  std::string device;      // GPU catalog id (required for nccl-tests, xDiT logs, traces)
  std::string link;        // link id the collective ran over (nccl-tests; traces with NCCL)
  int ranks = 0;           // nccl-tests: ranks of the run (0 = count the "# Rank" lines)
  std::string collective;  // nccl-tests: all_to_all | all_gather | all_reduce | sendrecv |
                           // reduce_scatter, for every test in the file that does not name
                           // its own ("" = infer from the output, then from `origin`'s file
                           // name, e.g. all_reduce_perf.txt)
  // xDiT logs and profiler traces: the workload and configuration of the run, stored in params:
  // {"model","height","width","frames","steps","batch","config","gpus","output_type","scope"}.
  // A configuration the log itself announces before a result ("Running test for size 1024,
  // ulysses_degree 2, ring_degree 4") replaces "config", "gpus", "height" and "width" for
  // the results that follow it.
  nlohmann::json run = nlohmann::json::object();
  std::string run_id;
  // Where a parser appends what it left out or repaired and why, one "<origin>:<line>: ..."
  // message each (rows dropped for wrong results, log text glued onto a row, tests of one
  // rank, ...). Not owned; nullptr = discard them. The parsed measurements do not depend on it.
  std::vector<std::string>* warnings = nullptr;
};

// Recognises the format from the content, in this order: gzip data (1f 8b) or a JSON object
// with a "traceEvents" array, a PyTorch profiler trace; a CSV whose first line that is
// neither blank nor a '#' comment names at least two of the required columns (e.g.
// "source,kind,op,device,median_s"); nccl-tests' "# nThread" banner or its "#  size  count"
// table header; an xDiT "epoch time:" line. InvalidArgument listing the formats when none
// matches. docs/CALIBRATION.md describes the formats.
StatusOr<IngestFormat> DetectIngestFormat(std::string_view text, std::string_view origin);

StatusOr<std::vector<Measurement>> ParseMeasurementCsv(std::string_view text, std::string_view origin);
StatusOr<std::vector<Measurement>> ParseNcclTests(std::string_view text, const IngestContext& ctx,
                                                  std::string_view origin);
StatusOr<std::vector<Measurement>> ParseXditLog(std::string_view text, const IngestContext& ctx,
                                                std::string_view origin);
// A PyTorch profiler trace (torch.profiler's export_chrome_trace, e.g. xDiT's runner with
// --profile: profile_trace_rank_R.json), as JSON or gzipped (recognised by its bytes 1f 8b,
// not its name). Yields, for the rank that wrote it:
//  - one collective measurement per (collective, per-rank bytes in nccl-tests' convention,
//    group size) from the durations of its NCCL kernels (median, p10, p90 over occurrences);
//  - one host launch measurement (op "launch", backend "xdit", params.launches): the issuing
//    thread's time from its first to its last kernel launch in the profiled steps, less the
//    time it was blocked in synchronising calls;
//  - one e2e measurement, op "profile", of the GPU's kernel seconds by class (gemm,
//    attention, nccl, other; memcpys apart), with ctx.run's workload and configuration in
//    params beside them: "gpu_kernel_s" over the whole trace; where the trace has
//    "ProfilerStep#N" windows, "windows" (those that launched kernels) and "window_kernel_s",
//    the mean per window of the kernels launched in it (by the correlated launch call's start,
//    else the kernel's own); and where ctx.run names "steps", "gpu_kernel_s_per_step": the
//    window's over those steps (xDiT's runner steps the profiler once per generation). The
//    planner compares them with the modelled device time per op class (FitMeasuredRuns).
// Needs ctx.device, and ctx.link when the trace holds collectives. InvalidArgument naming
// `origin` for data that is not a trace, is cut short, or holds neither NCCL kernels of a
// modelled collective nor kernel launches; what is left out goes to ctx.warnings.
StatusOr<std::vector<Measurement>> ParseTorchTrace(std::string_view data, const IngestContext& ctx,
                                                   std::string_view origin);

// Detects (when kAuto) and dispatches.
StatusOr<std::vector<Measurement>> ParseIngest(std::string_view text, IngestFormat format,
                                               const IngestContext& ctx, std::string_view origin);

}  // namespace ditune

#endif  // DITUNE_INGEST_INGEST_H_
