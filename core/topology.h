// The user's own box: how its GPUs, PCIe switches, CPU sockets, NVLinks and NICs are joined,
// read from `nvidia-smi topo -m` (and `nvidia-smi topo -p2p p`) or from the JSON file
// `ditune doctor --write-topology` writes; and the intra-node link the cost models price
// on that box.
#ifndef DITUNE_CORE_TOPOLOGY_H_
#define DITUNE_CORE_TOPOLOGY_H_

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/hardware_spec.h"
#include "core/status.h"

namespace ditune {

class Catalog;

// How nvidia-smi says two devices are joined, closest first (its legend): NVLink, one PCIe
// bridge (PIX), several bridges without the host bridge (PXB), through the CPU's host bridge
// (PHB), between host bridges of one NUMA node (NODE), across the sockets' interconnect
// (SYS; older drivers say SOC).
enum class TopoPath { kSelf, kNvLink, kPix, kPxb, kPhb, kNode, kSys };
std::string_view TopoPathName(TopoPath p);

// `nvidia-smi topo -p2p p`: whether the driver allows peer-to-peer between two GPUs.
enum class P2pStatus { kUnknown, kOk, kNotSupported };

struct TopoNic {
  std::string name;             // as the matrix names it (NIC0 resolved through the NIC legend)
  std::vector<TopoPath> to_gpu;  // per GPU
};

struct MachineTopology {
  int gpus = 0;
  // path[i][j] and nvlinks[i][j] (the NV# bond width, 0 where not NVLink), gpus x gpus.
  std::vector<std::vector<TopoPath>> path;
  std::vector<std::vector<int>> nvlinks;
  // From `topo -p2p p` where it was given; empty otherwise. gpus x gpus.
  std::vector<std::vector<P2pStatus>> p2p;
  std::vector<int> numa;                  // per GPU; -1 where not given
  std::vector<std::string> cpu_affinity;  // per GPU; "" where not given
  std::vector<TopoNic> nics;
  std::string source;  // the file it was read from
};

// Parses `nvidia-smi topo -m` output (tabs or spaces, with or without the prompt line, the
// legend, the NIC legend, NUMA columns, terminal colour codes), followed optionally by
// `nvidia-smi topo -p2p p`. InvalidArgument naming `origin` and the line for anything else:
// no GPU matrix, a row short of the header's devices (an abbreviated copy), an unknown cell.
StatusOr<MachineTopology> ParseTopoMatrix(std::string_view text, std::string_view origin);

// The file `ditune doctor --write-topology` writes, and reads back.
nlohmann::json TopologyToJson(const MachineTopology& t);
StatusOr<MachineTopology> TopologyFromJson(const nlohmann::json& j, std::string_view origin);

// A topology file as users have it: the JSON above, or nvidia-smi's matrix text.
StatusOr<MachineTopology> ParseTopologyFile(std::string_view text, std::string_view origin);
StatusOr<MachineTopology> ReadTopologyFile(const std::string& path);

// What the matrix says, grouped.
struct TopologySummary {
  // GPUs joined by anything closer than SYS (one CPU socket each), in GPU order.
  std::vector<std::vector<int>> sockets;
  // GPUs joined by PIX or PXB (one PCIe switch tree each); a GPU alone on a root port forms
  // a group of one.
  std::vector<std::vector<int>> switches;
  // GPUs joined by NVLink (transitively).
  std::vector<std::vector<int>> nvlink_groups;
  bool nvlink_all_pairs = false;  // every pair of GPUs is NVLink-joined
  int nvlinks_min = 0;            // the narrowest NV# bond among NVLink-joined pairs
  int p2p_not_supported_pairs = 0;  // pairs `topo -p2p p` marks other than OK
  // Every socket and every switch holds consecutive GPUs (what the cost model's layout assumes).
  bool consecutive = true;
  // The same number of GPUs behind every switch and on every socket.
  bool uniform = true;
};
TopologySummary Summarize(const MachineTopology& t);

// One line per fact for a person: "8 GPUs on 2 sockets (0-3 | 4-7); PCIe switches: ...".
std::vector<std::string> TopologyLines(const MachineTopology& t);

// The intra-node link the cost models price on this box for `gpu`: NVLink between every
// pair keeps the GPU's usual NVLink (or nvlink4 for a GPU whose usual box has none); otherwise
// the PCIe link of the GPU's usual box (else of its host interface's generation) with this
// box's sockets, GPUs per switch and GPU count. `notes` receives what the layout could not
// carry (NVLink bridges between pairs, uneven switches). Keeps the base link's id, so the
// calibration measured on that link still applies. `base`, when given (--intra), is the
// link whose rates the layout takes, where it is of the topology's kind (NVLink or PCIe).
StatusOr<LinkSpec> LinkForTopology(const MachineTopology& t, const GpuSpec& gpu, const Catalog& catalog,
                                   std::vector<std::string>* notes = nullptr, std::string_view base = {});

}  // namespace ditune

#endif  // DITUNE_CORE_TOPOLOGY_H_
