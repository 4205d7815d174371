// Validation suites (`validate --suite FILE.csv`), questions files (`validate --questions FILE.json`)
// and plan documents (`run --plan FILE`).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/catalog.h"
#include "planner/plan.h"
#include "planner/questions.h"
#include "calibration/suite.h"

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
  (void)ditune::ParseSuite(text, "fuzz.csv", Cat());
  (void)ditune::ParseQuestions(text, "fuzz.json");
  const ditune::Workload w{"flux.1-dev", 1024, 1024, 1, 28, 1, ditune::OutputType::kDecoded};
  (void)ditune::PlanConfigFromJson(text, "--plan fuzz.json", w);
  return 0;
}
