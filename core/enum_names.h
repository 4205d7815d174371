// One way to name an enum's values and to read them back: a table of (value, name) pairs per
// enum, written once beside the enum's functions, and these two lookups over it. Every enum
// ditune prints or parses (axes, collectives, op classes, objectives, executors, policies, ...)
// uses them, so a name and its parse error ("--objective 'x' is not one of: latency,
// throughput, gpu-seconds") read the same everywhere.
#ifndef DITUNE_CORE_ENUM_NAMES_H_
#define DITUNE_CORE_ENUM_NAMES_H_

#include <cstddef>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "core/status.h"

namespace ditune {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

// The name of `value` in `table`; "?" for a value the table lacks.
template <typename E, size_t N>
constexpr std::string_view NameIn(const EnumName<E> (&table)[N], E value) {
  for (const auto& e : table) {
    if (e.value == value) return e.name;
  }
  return "?";
}

// The value `table` names `text`; InvalidArgument "<what> '<text>' is not one of: <names>"
// otherwise (`what`: the flag or field, e.g. "--objective", "collective").
template <typename E, size_t N>
StatusOr<E> ParseIn(const EnumName<E> (&table)[N], std::string_view text, std::string_view what) {
  std::string names;
  for (const auto& e : table) {
    if (e.name == text) return e.value;
    names += (names.empty() ? "" : ", ") + std::string(e.name);
  }
  return Status::InvalidArgument(fmt::format("{} '{}' is not one of: {}", what, text, names));
}

}  // namespace ditune

#endif  // DITUNE_CORE_ENUM_NAMES_H_
