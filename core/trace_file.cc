#include "core/trace_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ditune {

Status WriteTraceFile(const nlohmann::json& events, const std::string& path) {
  std::ofstream out(path);
  if (!out) return Status::InvalidArgument(fmt::format("cannot write trace '{}' ({})", path, std::strerror(errno)));
  out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() << "\n";
  out.close();
  if (!out) return Status::IOError(fmt::format("writing trace '{}' failed ({})", path, std::strerror(errno)));
  return Status::Ok();
}

}  // namespace ditune
