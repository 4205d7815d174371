// GPUs and links, as shipped in data/hardware/gpus/<id>.json and data/hardware/links/<id>.json.
#ifndef DITUNE_CORE_HARDWARE_SPEC_H_
#define DITUNE_CORE_HARDWARE_SPEC_H_

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "core/units.h"

namespace ditune {

struct GpuSpec {
  std::string id;
  std::string name;
  bool is_cpu = false;
  FlopsPerSecond bf16_peak;          // dense tensor-core peak; 0 when unsupported
  FlopsPerSecond fp16_peak;          // dense, as the datasheet quotes it
  FlopsPerSecond fp16_fp32acc_peak;  // dense fp16/bf16 with fp32 accumulation
  FlopsPerSecond fp32_peak;          // non-tensor fp32
  BytesPerSecond memory_bandwidth;
  // The host interface, per direction at its nominal rate (PCIe x16 of the part's
  // generation): what weights moved to and from host memory cross.
  BytesPerSecond host_link;
  Bytes memory;
  int sm_count = 0;
  // Whether the driver lets two such GPUs read and write each other's memory. Without it
  // (GeForce cards), NCCL moves every transfer between them through host memory, its SHM
  // transport, and a send is a staged copy rather than a peer write.
  bool peer_access = true;
  std::string default_intra;  // link id of a typical box with this GPU
  int max_gpus_per_node = 8;
  std::vector<std::string> device_names;  // what the driver reports, for detection
  std::string source;
  std::string notes;

  // The peak that DiT inference (bf16 storage, fp32 accumulation) can reach: bf16 with
  // fp32 accumulation where the part has it, else fp16, else fp32 (CPUs, V100 without bf16).
  FlopsPerSecond tensor_peak() const;
};

enum class LinkScope { kIntra, kInter };
enum class LinkTopology { kSwitch, kPcieTwoSocket, kSharedMemory, kNetwork, kNone };

struct LinkSpec {
  std::string id;
  std::string name;
  LinkScope scope = LinkScope::kIntra;
  LinkTopology topology = LinkTopology::kSwitch;
  BytesPerSecond line;        // per direction
  BytesPerSecond busbw;       // achieved collective bus bandwidth
  BytesPerSecond p2p;         // achieved send/recv
  Seconds latency;            // base cost of one collective or message
  int sockets = 1;            // pcie-two-socket boxes: 2
  BytesPerSecond cross_socket;  // achieved between sockets; 0 where not applicable
  // pcie-two-socket boxes: GPUs behind each PCIe switch (consecutive GPUs share one, and its
  // one x16 uplink to the CPU carries all their traffic to GPUs behind other switches);
  // 0 where the GPUs sit on the CPU's root ports directly.
  int gpus_per_switch = 0;
  int nics_per_node = 0;      // inter-node links
  // GPUs in the box the layout describes: a user's topology (--topology) sets it; 0 means
  // the GPU's max_gpus_per_node. Never read from a catalog file.
  int box_gpus = 0;
  // Where the layout came from when not the catalog (the --topology file); "" otherwise.
  std::string layout_source;
  std::string source;
  std::string notes;
};

std::string_view LinkTopologyName(LinkTopology t);

StatusOr<GpuSpec> ParseGpuSpec(const nlohmann::json& j, const std::string& origin);
StatusOr<LinkSpec> ParseLinkSpec(const nlohmann::json& j, const std::string& origin);

}  // namespace ditune

#endif  // DITUNE_CORE_HARDWARE_SPEC_H_
