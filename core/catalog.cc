#include "core/catalog.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/json_fields.h"

#ifndef DITUNE_DATA_DIR
#define DITUNE_DATA_DIR "data"
#endif

namespace ditune {
namespace {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// Loads every *.json in `dir`, sorted by file name, through `parse`.
template <typename T, typename Parse>
Status LoadDir(const std::filesystem::path& dir, Parse parse, std::vector<T>* out) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return Status::NotFound(fmt::format(
        "catalog directory '{}' does not exist (set DITUNE_DATA to ditune's data/ folder)",
        dir.string()));
  }
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    auto json = ReadJsonFile(path.string());
    if (!json.ok()) return json.status();
    StatusOr<T> item = parse(*json, path.string());
    if (!item.ok()) return item.status();
    if (item->id != path.stem().string()) {
      return Status::InvalidArgument(fmt::format("{}: id '{}' does not match the file name",
                                                 path.string(), item->id));
    }
    out->push_back(std::move(item).value());
  }
  if (out->empty()) return Status::NotFound(fmt::format("no catalog files in '{}'", dir.string()));
  return Status::Ok();
}

template <typename T>
StatusOr<const T*> Find(const std::vector<T>& items, std::string_view what, std::string_view id) {
  for (const auto& item : items) {
    if (item.id == id) return &item;
  }
  std::vector<std::string> valid;
  for (const auto& item : items) valid.push_back(item.id);
  return Status::NotFound(UnknownIdMessage(what, id, valid));
}

}  // namespace

std::string UnknownIdMessage(std::string_view what, std::string_view id,
                             const std::vector<std::string>& valid) {
  std::string closest;
  size_t best = std::string::npos;
  for (const auto& v : valid) {
    size_t d = EditDistance(id, v);
    if (d < best) {
      best = d;
      closest = v;
    }
  }
  std::string hint;
  if (!closest.empty() && best <= std::max<size_t>(2, id.size() / 3)) {
    hint = fmt::format(" (did you mean '{}'?)", closest);
  } else if (id.size() >= 3) {
    // The start of an id ("vllm" for "vllm-omni").
    for (const auto& v : valid) {
      if (v.rfind(id, 0) == 0) {
        hint = fmt::format(" (did you mean '{}'?)", v);
        break;
      }
    }
  }
  return fmt::format("unknown {} '{}'{}; valid: {}", what, id, hint, fmt::join(valid, ", "));
}

std::filesystem::path Catalog::DefaultDataDir() {
  if (const char* env = std::getenv("DITUNE_DATA"); env != nullptr && *env != '\0') return env;
  return DITUNE_DATA_DIR;
}

StatusOr<const Catalog*> Catalog::Default() {
  static const StatusOr<Catalog>* loaded = new StatusOr<Catalog>(Load(DefaultDataDir()));
  if (!loaded->ok()) return loaded->status();
  return &loaded->value();
}

StatusOr<Catalog> Catalog::Load(const std::filesystem::path& data_dir) {
  Catalog c;
  c.data_dir_ = data_dir;
  DITUNE_RETURN_IF_ERROR(LoadDir(data_dir / "models", ParseModelSpec, &c.models_));
  DITUNE_RETURN_IF_ERROR(LoadDir(data_dir / "hardware" / "gpus", ParseGpuSpec, &c.gpus_));
  DITUNE_RETURN_IF_ERROR(LoadDir(data_dir / "hardware" / "links", ParseLinkSpec, &c.links_));
  std::vector<RuntimeFile> runtime_files;
  DITUNE_RETURN_IF_ERROR(LoadDir(data_dir / "runtimes", ParseRuntimeFile, &runtime_files));
  for (RuntimeFile& file : runtime_files) {
    for (auto& entry : file.models) {
      const std::string& model_id = entry.first;
      RuntimeSupport& support = entry.second;
      auto it = std::find_if(c.models_.begin(), c.models_.end(), [&](const ModelSpec& m) { return m.id == model_id; });
      if (it == c.models_.end()) {
        std::vector<std::string> valid;
        for (const auto& m : c.models_) valid.push_back(m.id);
        return Status::InvalidArgument(fmt::format("{}: models: {}", (data_dir / "runtimes" / (file.id + ".json")).string(),
                                                   UnknownIdMessage("model", model_id, valid)));
      }
      if (!it->runtimes.emplace(file.id, std::move(support)).second) {
        return Status::InvalidArgument(fmt::format("runtime '{}': model '{}' is described twice (its model file's "
                                                   "\"{}\" object and data/runtimes/{}.json)",
                                                   file.id, model_id, file.id, file.id));
      }
    }
    c.runtimes_.push_back(std::move(file.spec));
  }
  for (const auto& m : c.models_) {
    for (const auto& [id, support] : m.runtimes) {
      if (!c.Runtime(id).ok()) {
        return Status::InvalidArgument(fmt::format("model '{}' names runtime '{}', which has no file in {}", m.id, id,
                                                   (data_dir / "runtimes").string()));
      }
    }
  }
  // Cross-references between files.
  for (const auto& g : c.gpus_) {
    auto link = c.Link(g.default_intra);
    if (!link.ok()) return link.status().WithContext(fmt::format("GPU '{}' default_intra", g.id));
    if ((*link)->scope != LinkScope::kIntra) {
      return Status::InvalidArgument(
          fmt::format("GPU '{}': default_intra '{}' is not an intra-node link", g.id, g.default_intra));
    }
  }
  return c;
}

StatusOr<const ModelSpec*> Catalog::Model(std::string_view id) const { return Find(models_, "model", id); }
StatusOr<const GpuSpec*> Catalog::Gpu(std::string_view id) const { return Find(gpus_, "GPU", id); }
StatusOr<const LinkSpec*> Catalog::Link(std::string_view id) const { return Find(links_, "link", id); }
StatusOr<const RuntimeSpec*> Catalog::Runtime(std::string_view id) const { return Find(runtimes_, "runtime", id); }

}  // namespace ditune
