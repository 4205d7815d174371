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
  // samples >= 1, op non-empty). Names the offending field.
  Status Validate() const;
};

}  // namespace ditune

#endif  // DITUNE_COSTMODELS_MEASUREMENT_H_
