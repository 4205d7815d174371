// The inputs of `ditune serve`: request traces (CSV), layouts and mixes. A layout that parses
// prints back to itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/catalog.h"
#include "serving/layout.h"
#include "serving/requests.h"

namespace {

const ditune::Catalog& Cat() {
  static const ditune::Catalog* c = [] {
    auto r = ditune::Catalog::Load(DITUNE_FUZZ_DATA_DIR);
    if (!r.ok()) std::abort();
    return new ditune::Catalog(std::move(*r));
  }();
  return *c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const ditune::serving::RequestShape base{"flux.1-dev", 1024, 1024, 1, 28};
  (void)ditune::serving::ReadRequestTrace(text, "fuzz.csv", base, Cat());
  (void)ditune::serving::ParseMix(text, base);
  auto layout = ditune::serving::ParseLayout(text);
  if (layout.ok()) {
    auto again = ditune::serving::ParseLayout(ditune::serving::ToString(*layout));
    if (!again.ok() || ditune::serving::ToString(*again) != ditune::serving::ToString(*layout)) std::abort();
  }
  return 0;
}
