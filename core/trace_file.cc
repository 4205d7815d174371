#include "core/trace_file.h"

#include <nlohmann/json.hpp>

#include "core/output_file.h"

namespace ditune {

Status WriteTraceFile(const nlohmann::json& events, const std::string& path) {
  return WriteFileWhole(path, nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() + "\n",
                        "trace");
}

}  // namespace ditune
