// ditune's measurement CSV (`calibrate ingest FILE.csv`).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ingest/ingest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ditune::ParseMeasurementCsv(text, "fuzz.csv");
  (void)ditune::DetectIngestFormat(text, "fuzz.txt");
  return 0;
}
