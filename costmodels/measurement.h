// One measured timing, as the calibration store keeps it: from the executor, a
// microbenchmark, or imported from another tool's output.
#ifndef DITUNE_COSTMODELS_MEASUREMENT_H_
#define DITUNE_COSTMODELS_MEASUREMENT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "core/units.h"

namespace ditune {

enum class MeasurementSource { kExecutor, kMicrobench, kImport };
// op: one kernel or operator; collective: one communication call; step: one denoising
// step; e2e: a whole generation (or its DiT / VAE / text-encoding part, named by `op`).
enum class MeasurementKind { kOp, kCollective, kStep, kE2e };

std::string_view ToString(MeasurementSource s);
std::string_view ToString(MeasurementKind k);
StatusOr<MeasurementSource> ParseMeasurementSource(std::string_view s);
StatusOr<MeasurementKind> ParseMeasurementKind(std::string_view s);

// Physical bounds of a measurement, generous by orders of magnitude: every timing a real
// machine produces lies well inside them; a value outside is a unit mistake or a corrupt row,
// and one such point would otherwise overflow the least-squares sums of every fit it joins
// (a GEMM of 1e12 FLOPs in 1e-200 s; a collective of 1e300 bytes).
//   times (median, p10, p90): 1 ns (below any timer's resolution) .. 1e6 s (11.6 days)
inline constexpr double kMinMeasuredSeconds = 1e-9;
inline constexpr double kMaxMeasuredSeconds = 1e6;
//   bytes: at most 1e18 (an exabyte); FLOPs: at most 1e21 (an hour of a 1,000-GPU cluster at
//   about 3e14 FLOP/s each; a step or e2e measurement may count a whole generation)
inline constexpr double kMaxMeasuredBytes = 1e18;
inline constexpr double kMaxMeasuredFlops = 1e21;
//   implied rates of one kernel or one collective (op and collective kinds: bytes / median,
//   FLOPs / median, and what a fit divides by time): at most 1e18 per second, about 1,000
//   times the FLOP/s of the fastest GPU and a million times the bandwidth of any link
inline constexpr double kMaxMeasuredRatePerSecond = 1e18;

struct Measurement {
  int64_t id = 0;  // assigned by the store; 0 before insertion
  MeasurementSource source = MeasurementSource::kImport;
  MeasurementKind kind = MeasurementKind::kOp;
  // What was measured. op: gemm | attention | linear_attention | elementwise | norm;
  // collective: all_to_all | all_gather | all_reduce | sendrecv; step / e2e: dit |
  // vae_decode | text_encode | total.
  std::string op;
  std::string backend;  // cuda | cpu | nccl | mpi | xdit | ...
  std::string device;   // GPU catalog id (e.g. h100-sxm5-80gb)
  nlohmann::json params = nlohmann::json::object();  // shape and configuration
  int ranks = 1;
  std::string link;     // link id the traffic crossed; empty for compute
  Bytes bytes;          // collectives: nccl-tests' size (bytes per rank); ops: bytes moved
  Flops flops;
  Seconds median;
  Seconds p10;
  Seconds p90;
  int samples = 1;
  std::string run_id;
  int64_t unix_time = 0;  // when measured; the store fills 0 with now

  // OK iff the fields are self-consistent (times > 0 and p10 <= median <= p90, ranks >= 1,
  // samples >= 1, op non-empty) and within the physical bounds above (CheckPhysicalBounds,
  // and p10 and p90 within the time bounds). Names the offending field.
  Status Validate() const;

  // OK iff median, bytes and flops are within the physical bounds above and, for op and
  // collective measurements, bytes / median and flops / median are at most
  // kMaxMeasuredRatePerSecond. InvalidArgument naming the field (as the CSV column: median_s,
  // bytes, flops), its value and the valid range otherwise. Part of Validate(); on its own
  // it screens measurements stored before the bounds existed.
  Status CheckPhysicalBounds() const;
};

}  // namespace ditune

#endif  // DITUNE_COSTMODELS_MEASUREMENT_H_
