// `ditune doctor`: what the user's machine is and where it falls short. It reads what users
// can produce in a minute (nvidia-smi's topology matrix and GPU report, nccl-tests outputs,
// the NCCL_* environment), compares each measured collective with what ditune prices for
// that box, names the likely cause of every shortfall, and says what it costs a DiT plan.
#ifndef DITUNE_PLANNER_DOCTOR_H_
#define DITUNE_PLANNER_DOCTOR_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/catalog.h"
#include "core/status.h"
#include "core/topology.h"
#include "costmodels/fit.h"
#include "ingest/nvidia_smi.h"

namespace ditune {

struct DoctorInputs {
  std::optional<MachineTopology> topology;
  std::vector<GpuState> gpus;  // nvidia-smi -q / --query-gpu rows
  struct Text {
    std::string origin;
    std::string text;
  };
  std::vector<Text> nccl_tests;  // nccl-tests outputs (all_reduce, alltoall, sendrecv, all_gather, ...)
  std::map<std::string, std::string> env;  // NCCL_* settings
  std::string env_origin;                  // where they came from ("" where none were read)
  std::string gpu_id;   // --gpu; else mapped from the GPUs' names
  std::string link_id;  // --link: what the nccl-tests crossed; else this box's intra-node link
  std::string collective;  // --collective: for nccl-tests outputs whose text and file name name none
  std::string model_id = "flux.1-dev";  // whose plan the cost is told for
};

enum class Severity { kOk, kNote, kWarning };
std::string_view SeverityName(Severity s);

struct Finding {
  Severity severity = Severity::kNote;
  std::string subject;  // "NCCL_P2P_DISABLE", "all_reduce over nvlink3 (4 ranks)", "GPU 3 PCIe link"
  std::string text;     // what was found, in numbers
  std::vector<std::string> causes;  // likely causes, most likely first
  std::string cost;     // what it costs a DiT plan, where it could be priced
};

// One nccl-tests collective judged at its largest message.
struct MeasuredCollective {
  std::string origin;
  std::string collective;
  std::string link;
  int ranks = 0;
  double bytes = 0;
  double measured_gbps = 0;  // bus bandwidth, nccl-tests' convention
  double expected_gbps = 0;  // what ditune prices for that group on this box
};

struct DoctorReport {
  std::vector<std::string> topology;  // TopologyLines, or what the GPU report says
  std::vector<std::string> box_notes;  // what the cost model makes of the layout
  std::string gpu_id;     // catalog id ("" when unknown)
  std::string gpu_name;   // as the driver names it
  int gpus = 0;           // GPUs seen
  std::string link_id;    // the link the box is priced on
  std::vector<MeasuredCollective> measured;
  std::vector<Finding> findings;
  int warnings() const;
};

// The fraction of the priced bus bandwidth below which a measured collective is a warning,
// and below which it is a note. kLinkShortfallFraction's 0.2 of the catalog figure and this
// agree on every published failure (2-11% of the figure) and every healthy run (60-100%).
inline constexpr double kDoctorWarnFraction = 0.2;
inline constexpr double kDoctorNoteFraction = 0.5;

// Reads and judges. InvalidArgument (exit 2) for nccl-tests text that does not parse, an
// unknown --gpu or --link, or nccl-tests given without a GPU that names a catalog entry.
StatusOr<DoctorReport> RunDoctor(const Catalog& catalog, const std::vector<Fit>& fits, const DoctorInputs& in);

std::string DoctorText(const DoctorReport& report);
nlohmann::json DoctorJson(const DoctorReport& report);

}  // namespace ditune

#endif  // DITUNE_PLANNER_DOCTOR_H_
