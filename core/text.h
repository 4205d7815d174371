// Small text helpers every room needs, once.
#ifndef DITUNE_CORE_TEXT_H_
#define DITUNE_CORE_TEXT_H_

#include <string>
#include <string_view>

namespace ditune {

// `s` without leading and trailing white space (std::isspace's set in the C locale).
std::string_view Trim(std::string_view s);
// `s` with ASCII letters in lower case.
std::string Lower(std::string_view s);
// `s` safe inside HTML or SVG text and attribute values: & < > " and ' escaped.
std::string EscapeHtml(std::string_view s);

}  // namespace ditune

#endif  // DITUNE_CORE_TEXT_H_
