// nccl-tests output (`calibrate ingest all_to_all_perf.txt`).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ingest/ingest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ditune::IngestContext ctx;
  ctx.device = "h100-sxm5-80gb";
  ctx.link = "nvlink4";
  (void)ditune::ParseNcclTests(text, ctx, "all_reduce_perf.txt");
  ctx.ranks = 8;
  ctx.collective = "all_to_all";
  (void)ditune::ParseNcclTests(text, ctx, "fuzz.txt");
  return 0;
}
