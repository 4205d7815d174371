// PyTorch profiler traces (`calibrate ingest profile_trace_rank_0.json[.gz]`), as JSON and,
// through the same entry point, gzipped: inputs starting 1f 8b are inflated first.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ingest/ingest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ditune::IngestContext ctx;
  ctx.device = "h100-sxm5-80gb";
  ctx.link = "nvlink4";
  (void)ditune::ParseTorchTrace(text, ctx, "profile_trace_rank_0.json");
  ctx.link.clear();
  (void)ditune::ParseIngest(text, ditune::IngestFormat::kAuto, ctx, "fuzz.json");
  return 0;
}
