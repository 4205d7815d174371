#include "core/csv.h"

#include <fmt/format.h>

#include "core/text.h"

namespace ditune {
namespace {

constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

Status LineError(std::string_view origin, int line, std::string_view what) {
  return Status::InvalidArgument(fmt::format("{}:{}: {}", origin, line, what));
}

}  // namespace

Status CheckUtf8(std::string_view text, std::string_view origin) {
  int line = 1;
  size_t line_start = 0;
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      ++line;
      line_start = ++i;
      continue;
    }
    // The length of the sequence and the range of its second byte (RFC 3629: no overlong
    // forms, no surrogates, nothing above U+10FFFF).
    size_t len = 1;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80) {
      len = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      len = 0;
    }
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    }
    if (!ok) {
      return Status::InvalidArgument(fmt::format(
          "{}:{}:{}: byte 0x{:02X} is not UTF-8: save the file as UTF-8 text", origin, line, i - line_start + 1, c));
    }
    i += len;
  }
  return Status::Ok();
}

StatusOr<std::vector<CsvRecord>> ReadCsvRecords(std::string_view text, std::string_view origin) {
  DITUNE_RETURN_IF_ERROR(CheckUtf8(text, origin));
  if (text.starts_with(kUtf8Bom)) text.remove_prefix(kUtf8Bom.size());  // spreadsheet exports
  std::vector<CsvRecord> records;
  const size_t n = text.size();
  size_t pos = 0;
  int line = 1;
  auto is_blank = [](char c) { return c == ' ' || c == '\t'; };
  while (pos < n) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = n;
    std::string_view content = Trim(text.substr(pos, eol - pos));
    if (content.empty() || content.front() == '#') {
      pos = eol + 1;
      ++line;
      continue;
    }
    CsvRecord record;
    record.line = line;
    while (true) {
      std::string field;
      size_t p = pos;
      while (p < n && is_blank(text[p])) ++p;
      if (p < n && text[p] == '"') {
        const int start_line = line;
        bool closed = false;
        for (++p; p < n; ++p) {
          const char c = text[p];
          if (c == '"') {
            if (p + 1 < n && text[p + 1] == '"') {
              field += '"';
              ++p;
              continue;
            }
            closed = true;
            ++p;
            break;
          }
          if (c == '\n') ++line;
          field += c;
        }
        if (!closed) {
          return LineError(origin, start_line,
                           "a quoted field is never closed (valid: a field in double quotes, with "
                           "each quote inside it written twice as \"\")");
        }
        while (p < n && (is_blank(text[p]) || text[p] == '\r')) ++p;
        if (p < n && text[p] != ',' && text[p] != '\n') {
          return LineError(origin, line,
                           fmt::format("'{}' after the closing quote of a field (valid: ',' or "
                                       "the end of the line; write a quote inside a quoted field "
                                       "as \"\")",
                                       text[p]));
        }
      } else {
        size_t q = pos;
        while (q < n && text[q] != ',' && text[q] != '\n') ++q;
        std::string_view value = text.substr(pos, q - pos);
        if (!value.empty() && value.back() == '\r') value.remove_suffix(1);
        if (value.find('"') != std::string_view::npos) {
          return LineError(origin, line,
                           fmt::format("a '\"' inside the unquoted field '{}' (valid: put the "
                                       "whole field in double quotes and double the quotes "
                                       "inside, e.g. \"{{\"\"steps\"\": 28}}\")",
                                       Trim(value)));
        }
        field = std::string(value);
        p = q;
      }
      record.fields.push_back(std::move(field));
      if (p < n && text[p] == ',') {
        pos = p + 1;
        continue;
      }
      pos = p + 1;  // past the '\n', or past the end
      ++line;
      break;
    }
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace ditune
