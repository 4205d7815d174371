// Config strings in both syntaxes (ditune's key=value list and xDiT's flags).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/parallel_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto c = ditune::ParseParallelConfig(text);
  if (c.ok()) {
    // What parses prints and parses back to itself.
    auto back = ditune::ParseParallelConfig(ditune::ToString(*c));
    if (!back.ok() || !(*back == *c)) __builtin_trap();
    (void)ditune::Label(*c);
  }
  return 0;
}
