// What `ditune doctor` and --topology read about the user's machine: `nvidia-smi topo -m`
// (and its JSON form), `nvidia-smi -q` / --query-gpu CSV, and NCCL_* environment lines.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/catalog.h"
#include "core/topology.h"
#include "ingest/nvidia_smi.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ditune::Catalog* catalog = [] {
    auto c = ditune::Catalog::Load(DITUNE_FUZZ_DATA_DIR);
    if (!c.ok()) std::abort();
    return new ditune::Catalog(std::move(c).value());
  }();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto topo = ditune::ParseTopologyFile(text, "fuzz.txt");
  if (topo.ok()) {
    (void)ditune::TopologyLines(*topo);
    std::vector<std::string> notes;
    for (const char* gpu : {"l20-48gb", "h100-sxm5-80gb", "rtx4090-24gb"}) {
      (void)ditune::LinkForTopology(*topo, **catalog->Gpu(gpu), *catalog, &notes);
    }
    auto back = ditune::TopologyFromJson(ditune::TopologyToJson(*topo), "round-trip");
    if (!back.ok() || back->path != topo->path || back->nvlinks != topo->nvlinks) std::abort();
  }
  (void)ditune::LooksLikeNvidiaSmi(text);
  (void)ditune::ParseNvidiaSmi(text, "fuzz.txt");
  (void)ditune::LooksLikeEnvironment(text);
  (void)ditune::ParseNcclEnvironment(text);
  return 0;
}
