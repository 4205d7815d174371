// Reads the fields of one JSON object with error messages that name the file, the field
// and what is valid. Keeps the first error; later reads return defaults, so a parser can
// read every field and check status() once.
#ifndef DITUNE_CORE_JSON_FIELDS_H_
#define DITUNE_CORE_JSON_FIELDS_H_

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace ditune {

// Parses `text` as JSON; on failure the error names `origin` and the position.
StatusOr<nlohmann::json> ParseJsonText(std::string_view text, std::string_view origin);
// Reads and parses a whole file.
StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

class JsonFields {
 public:
  // `where` names the object in messages, e.g. "data/models/flux.1-dev.json".
  // `object` must outlive this reader.
  JsonFields(const nlohmann::json& object, std::string where);

  double Number(std::string_view key, double min, double max);
  int64_t Int(std::string_view key, int64_t min, int64_t max);
  std::string String(std::string_view key);
  // One of `choices`; the error lists them.
  std::string Enum(std::string_view key, const std::vector<std::string>& choices);
  bool Bool(std::string_view key);
  // `fallback` when the key is absent; an error when present but not a boolean.
  bool OptionalBool(std::string_view key, bool fallback);
  // nullptr (and an error) when missing or not of that type.
  const nlohmann::json* Object(std::string_view key);
  const nlohmann::json* Array(std::string_view key);
  std::vector<std::string> StringArray(std::string_view key);
  bool Has(std::string_view key) const;

  // Records an error found by the caller (first one wins).
  void Fail(const std::string& message);
  // An error if the object has a key that was never read: catches misspelt fields.
  void RejectUnknownKeys();

  const std::string& where() const { return where_; }
  const Status& status() const { return status_; }

 private:
  const nlohmann::json* Get(std::string_view key);

  const nlohmann::json& object_;
  std::string where_;
  std::set<std::string, std::less<>> read_;
  Status status_;
};

}  // namespace ditune

#endif  // DITUNE_CORE_JSON_FIELDS_H_
