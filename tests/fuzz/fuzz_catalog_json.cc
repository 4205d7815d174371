// Catalog files: a model, a GPU or a link description (data/models, data/hardware).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/hardware_spec.h"
#include "core/json_fields.h"
#include "core/model_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto j = ditune::ParseJsonText(text, "fuzz.json");
  if (!j.ok()) return 0;
  (void)ditune::ParseModelSpec(*j, "fuzz.json");
  (void)ditune::ParseGpuSpec(*j, "fuzz.json");
  (void)ditune::ParseLinkSpec(*j, "fuzz.json");
  if (j->is_object() && j->contains("xdit")) (void)ditune::ParseRuntimeSupport((*j)["xdit"], "fuzz.json: xdit", "xdit", "xDiT");
  return 0;
}
