#include "core/json_fields.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace ditune {

StatusOr<nlohmann::json> ParseJsonText(std::string_view text, std::string_view origin) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    return Status::InvalidArgument(fmt::format("{}: malformed JSON at byte {}: {}", origin,
                                               e.byte, e.what()));
  } catch (const nlohmann::json::exception& e) {
    // A number beyond a double (out_of_range 406), found by fuzzing: also the text's fault.
    return Status::InvalidArgument(fmt::format("{}: JSON that cannot be read: {}", origin, e.what()));
  }
}

StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(fmt::format("cannot open '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseJsonText(ss.str(), path);
}

JsonFields::JsonFields(const nlohmann::json& object, std::string where)
    : object_(object), where_(std::move(where)) {
  if (!object_.is_object()) Fail("expected a JSON object");
}

void JsonFields::Fail(const std::string& message) {
  if (status_.ok()) status_ = Status::InvalidArgument(fmt::format("{}: {}", where_, message));
}

bool JsonFields::Has(std::string_view key) const {
  return object_.is_object() && object_.contains(key);
}

const nlohmann::json* JsonFields::Get(std::string_view key) {
  read_.emplace(key);
  if (!object_.is_object()) return nullptr;
  auto it = object_.find(key);
  if (it == object_.end()) {
    Fail(fmt::format("missing field '{}'", key));
    return nullptr;
  }
  return &*it;
}

double JsonFields::Number(std::string_view key, double min, double max) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return 0.0;
  if (!v->is_number()) {
    Fail(fmt::format("field '{}' must be a number, got {}", key, v->dump()));
    return 0.0;
  }
  double d = v->get<double>();
  if (!std::isfinite(d) || d < min || d > max) {
    Fail(fmt::format("field '{}' = {} is out of range [{}, {}]", key, d, min, max));
    return 0.0;
  }
  return d;
}

int64_t JsonFields::Int(std::string_view key, int64_t min, int64_t max) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return 0;
  if (!v->is_number_integer()) {
    Fail(fmt::format("field '{}' must be an integer, got {}", key, v->dump()));
    return 0;
  }
  int64_t i = v->get<int64_t>();
  if (i < min || i > max) {
    Fail(fmt::format("field '{}' = {} is out of range [{}, {}]", key, i, min, max));
    return 0;
  }
  return i;
}

std::string JsonFields::String(std::string_view key) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return {};
  if (!v->is_string()) {
    Fail(fmt::format("field '{}' must be a string, got {}", key, v->dump()));
    return {};
  }
  return v->get<std::string>();
}

std::string JsonFields::Enum(std::string_view key, const std::vector<std::string>& choices) {
  std::string s = String(key);
  if (!status_.ok()) return s;
  for (const auto& c : choices) {
    if (c == s) return s;
  }
  Fail(fmt::format("field '{}' = '{}' is not one of: {}", key, s, fmt::join(choices, ", ")));
  return {};
}

bool JsonFields::Bool(std::string_view key) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return false;
  if (!v->is_boolean()) {
    Fail(fmt::format("field '{}' must be true or false, got {}", key, v->dump()));
    return false;
  }
  return v->get<bool>();
}

bool JsonFields::OptionalBool(std::string_view key, bool fallback) {
  if (!Has(key)) {
    read_.emplace(key);
    return fallback;
  }
  return Bool(key);
}

const nlohmann::json* JsonFields::Object(std::string_view key) {
  const nlohmann::json* v = Get(key);
  if (v != nullptr && !v->is_object()) {
    Fail(fmt::format("field '{}' must be an object", key));
    return nullptr;
  }
  return v;
}

const nlohmann::json* JsonFields::Array(std::string_view key) {
  const nlohmann::json* v = Get(key);
  if (v != nullptr && !v->is_array()) {
    Fail(fmt::format("field '{}' must be an array", key));
    return nullptr;
  }
  return v;
}

std::vector<std::string> JsonFields::StringArray(std::string_view key) {
  std::vector<std::string> out;
  const nlohmann::json* v = Array(key);
  if (v == nullptr) return out;
  for (const auto& e : *v) {
    if (!e.is_string()) {
      Fail(fmt::format("field '{}' must hold strings only", key));
      return {};
    }
    out.push_back(e.get<std::string>());
  }
  return out;
}

void JsonFields::RejectUnknownKeys() {
  if (!object_.is_object()) return;
  for (const auto& [key, value] : object_.items()) {
    if (read_.find(key) == read_.end()) {
      std::vector<std::string> known(read_.begin(), read_.end());
      Fail(fmt::format("unknown field '{}' (known fields: {})", key, fmt::join(known, ", ")));
      return;
    }
  }
}

}  // namespace ditune
