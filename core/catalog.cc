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

// FNV-1a over `text`, continuing from `h`.
uint64_t Fnv(uint64_t h, std::string_view text) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

template <typename T>
struct Loaded {
  T item;
  std::string path;
};

// Loads every *.json in `dir`, sorted by file name, through `parse`, folding each file's
// content into `*digest`. A missing directory is an error where `required` (the shipped
// catalog), nothing otherwise (a user catalog need not have every folder).
template <typename T, typename Parse>
Status LoadDir(const std::filesystem::path& dir, Parse parse, bool required, std::vector<Loaded<T>>* out,
               uint64_t* digest) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    if (!required) return Status::Ok();
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
    *digest = Fnv(Fnv(*digest, path.filename().string()), json->dump());
    StatusOr<T> item = parse(*json, path.string());
    if (!item.ok()) return item.status();
    if (item->id != path.stem().string()) {
      return Status::InvalidArgument(fmt::format("{}: id '{}' does not match the file name",
                                                 path.string(), item->id));
    }
    out->push_back({std::move(item).value(), path.string()});
  }
  if (required && out->empty()) return Status::NotFound(fmt::format("no catalog files in '{}'", dir.string()));
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
  static const StatusOr<Catalog>* loaded = new StatusOr<Catalog>(Load(DefaultDataDir(), DefaultUserDirs()));
  if (!loaded->ok()) return loaded->status();
  return &loaded->value();
}

std::vector<std::filesystem::path> Catalog::DefaultUserDirs() {
  std::vector<std::filesystem::path> dirs;
  const char* env = std::getenv("DITUNE_CATALOG");
  if (env == nullptr) return dirs;
  std::string_view rest(env);
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    const std::string_view part = rest.substr(0, colon);
    if (!part.empty()) dirs.emplace_back(std::string(part));
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return dirs;
}

std::string Catalog::UserFileOf(std::string_view kind, std::string_view id) const {
  const std::string key = fmt::format("{}/{}", kind, id);
  for (const auto& [k, path] : user_files_) {
    if (k == key) return path;
  }
  return "";
}

StatusOr<Catalog> Catalog::Load(const std::filesystem::path& data_dir,
                                const std::vector<std::filesystem::path>& user_dirs) {
  Catalog c;
  c.data_dir_ = data_dir;
  uint64_t digest = 1469598103934665603ull;
  std::vector<Loaded<ModelSpec>> models;
  std::vector<Loaded<GpuSpec>> gpus;
  std::vector<Loaded<LinkSpec>> links;
  std::vector<Loaded<RuntimeFile>> runtime_loaded;
  DITUNE_RETURN_IF_ERROR(LoadDir(data_dir / "models", ParseModelSpec, true, &models, &digest));
  DITUNE_RETURN_IF_ERROR(LoadDir(data_dir / "hardware" / "gpus", ParseGpuSpec, true, &gpus, &digest));
  DITUNE_RETURN_IF_ERROR(LoadDir(data_dir / "hardware" / "links", ParseLinkSpec, true, &links, &digest));
  DITUNE_RETURN_IF_ERROR(LoadDir(data_dir / "runtimes", ParseRuntimeFile, true, &runtime_loaded, &digest));
  // A user catalog adds entries or replaces shipped ones by id.
  auto merge = [&c](auto* into, auto&& user, const char* kind) {
    for (auto& u : user) {
      auto it = std::find_if(into->begin(), into->end(), [&](const auto& x) { return x.item.id == u.item.id; });
      c.user_entries_.push_back(fmt::format("{} {} ({}, from {})", kind, u.item.id,
                                            it == into->end() ? "new" : "replaces the shipped one", u.path));
      c.user_files_.emplace_back(fmt::format("{}/{}", kind, u.item.id), u.path);
      if (it == into->end()) {
        into->push_back(std::move(u));
      } else {
        *it = std::move(u);
      }
    }
  };
  for (const auto& dir : user_dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      return Status::InvalidArgument(fmt::format(
          "user catalog '{}' (--catalog or DITUNE_CATALOG) is not a directory; it holds hardware/gpus/, "
          "hardware/links/, models/ and runtimes/ folders of JSON files (`ditune hardware --template gpu` prints one)",
          dir.string()));
    }
    const bool any = std::filesystem::is_directory(dir / "models", ec) ||
                     std::filesystem::is_directory(dir / "hardware" / "gpus", ec) ||
                     std::filesystem::is_directory(dir / "hardware" / "links", ec) ||
                     std::filesystem::is_directory(dir / "runtimes", ec);
    if (!any) {
      return Status::InvalidArgument(fmt::format(
          "user catalog '{}' holds none of hardware/gpus/, hardware/links/, models/, runtimes/: put a GPU file at "
          "{}/hardware/gpus/<id>.json, a link at {}/hardware/links/<id>.json, a model at {}/models/<id>.json",
          dir.string(), dir.string(), dir.string(), dir.string()));
    }
    std::vector<Loaded<ModelSpec>> um;
    std::vector<Loaded<GpuSpec>> ug;
    std::vector<Loaded<LinkSpec>> ul;
    std::vector<Loaded<RuntimeFile>> ur;
    DITUNE_RETURN_IF_ERROR(LoadDir(dir / "models", ParseModelSpec, false, &um, &digest));
    DITUNE_RETURN_IF_ERROR(LoadDir(dir / "hardware" / "gpus", ParseGpuSpec, false, &ug, &digest));
    DITUNE_RETURN_IF_ERROR(LoadDir(dir / "hardware" / "links", ParseLinkSpec, false, &ul, &digest));
    DITUNE_RETURN_IF_ERROR(LoadDir(dir / "runtimes", ParseRuntimeFile, false, &ur, &digest));
    merge(&models, std::move(um), "model");
    merge(&gpus, std::move(ug), "gpu");
    merge(&links, std::move(ul), "link");
    merge(&runtime_loaded, std::move(ur), "runtime");
  }
  c.fingerprint_ = digest;
  for (auto& m : models) c.models_.push_back(std::move(m.item));
  for (auto& g : gpus) c.gpus_.push_back(std::move(g.item));
  for (auto& l : links) c.links_.push_back(std::move(l.item));
  std::vector<RuntimeFile> runtime_files;
  for (auto& r : runtime_loaded) runtime_files.push_back(std::move(r.item));
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
