// xDiT logs (`calibrate ingest run.log --model ... --config ...`).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "costmodels/ingest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ditune::IngestContext ctx;
  ctx.device = "h100-sxm5-80gb";
  ctx.run = {{"model", "flux.1-dev"}, {"height", 1024}, {"width", 1024}, {"frames", 1}, {"steps", 28},
             {"batch", 1}, {"config", "ulysses=4"}, {"gpus", 4}, {"output_type", "decoded"}, {"scope", "e2e"}};
  (void)ditune::ParseXditLog(text, ctx, "fuzz.log");
  (void)ditune::ParseIngest(text, ditune::IngestFormat::kAuto, ctx, "fuzz.log");
  return 0;
}
