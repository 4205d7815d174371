// Files the user asked ditune to write (--csv, --plot, --trace, --out): whole or not at all.
#ifndef DITUNE_CORE_OUTPUT_FILE_H_
#define DITUNE_CORE_OUTPUT_FILE_H_

#include <string>
#include <string_view>

#include "core/status.h"

namespace ditune {

// Writes `text` to `path` whole or leaves no trace of the attempt: a regular file is written
// beside the target under a temporary name and renamed over it once every byte is on disk, so
// a full disk or a killed process never leaves a truncated file (an existing file keeps its
// old contents). A target that exists and is not a regular file (a pipe, /dev/stdout) is
// written in place. `what` names the file in messages ("--csv", "trace").
// InvalidArgument when nothing can be created there (the path is the user's); IOError naming
// the cause (errno's text) when writing fails part way.
Status WriteFileWhole(const std::string& path, std::string_view text, std::string_view what);

// Ok iff a file could be created or replaced at `path` (its folder exists and is writable,
// and an existing target is writable), without creating or changing anything: lets a command
// refuse a bad output path before its long work. Same codes as WriteFileWhole.
Status CheckWritable(const std::string& path, std::string_view what);

}  // namespace ditune

#endif  // DITUNE_CORE_OUTPUT_FILE_H_
