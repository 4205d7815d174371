// RFC 4180 CSV records with the line each starts on, for error messages that point at it.
#ifndef DITUNE_CORE_CSV_H_
#define DITUNE_CORE_CSV_H_

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ditune {

// One CSV record: its fields, unquoted, and the 1-based line it starts on.
struct CsvRecord {
  int line = 0;
  std::vector<std::string> fields;
};

// Splits `text` into records: fields separated by ',', records by "\n" or "\r\n"; a field in
// double quotes may hold commas, line breaks and quotes written as "". Blanks before an
// opening quote and after a closing one are ignored. Outside a quoted field, a blank line or
// one whose first non-blank character is '#' is skipped; a leading UTF-8 byte-order mark is
// dropped; the text must be UTF-8 (CheckUtf8). Errors are InvalidArgument "<origin>:<line>: ...".
StatusOr<std::vector<CsvRecord>> ReadCsvRecords(std::string_view text, std::string_view origin);

// OK iff `text` is valid UTF-8; otherwise InvalidArgument "<origin>:<line>:<column>: byte 0xNN
// is not UTF-8 ...", so that no input file's bytes reach a JSON document or the store raw.
Status CheckUtf8(std::string_view text, std::string_view origin);

}  // namespace ditune

#endif  // DITUNE_CORE_CSV_H_
