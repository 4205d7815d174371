// xDiT logs (`calibrate ingest run.log --model ... --config ...`), and the configurations
// they announce checked as `--config` is.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/catalog.h"
#include "ingest/ingest.h"
#include "calibration/measured_runs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ditune::IngestContext ctx;
  ctx.device = "h100-sxm5-80gb";
  ctx.run = {{"model", "flux.1-dev"}, {"height", 1024}, {"width", 1024}, {"frames", 1}, {"steps", 28},
             {"batch", 1}, {"config", "ulysses=4"}, {"gpus", 4}, {"output_type", "decoded"}, {"scope", "e2e"}};
  auto runs = ditune::ParseXditLog(text, ctx, "fuzz.log");
  // A configuration the log announces is checked as --config is: any announcement, no crash.
  static const ditune::Catalog* catalog = [] {
    auto c = ditune::Catalog::Load(DITUNE_FUZZ_DATA_DIR);
    return c.ok() ? new ditune::Catalog(std::move(*c)) : nullptr;
  }();
  if (runs.ok() && catalog != nullptr) {
    for (const auto& m : *runs) (void)ditune::CheckXditRunConfig(m.params, *catalog);
  }
  (void)ditune::ParseIngest(text, ditune::IngestFormat::kAuto, ctx, "fuzz.log");
  return 0;
}
