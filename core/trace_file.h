// Chrome trace files (Perfetto and chrome://tracing open them): what `ditune simulate
// --trace` and `ditune run --trace` write.
#ifndef DITUNE_CORE_TRACE_FILE_H_
#define DITUNE_CORE_TRACE_FILE_H_

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace ditune {

// Writes {"traceEvents": events, "displayTimeUnit": "ms"} to `path`. InvalidArgument naming
// the path when no file can be made there (the path is the user's); IOError when writing
// fails part way.
Status WriteTraceFile(const nlohmann::json& events, const std::string& path);

}  // namespace ditune

#endif  // DITUNE_CORE_TRACE_FILE_H_
