#include "core/names.h"

#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/text.h"

namespace ditune {
namespace {

bool SameText(std::string_view a, std::string_view b) { return Lower(Trim(a)) == Lower(Trim(b)); }


// Lower case, without the vendor and product-line words and without spaces, '-' and '_'.
std::string Compact(std::string_view s) {
  std::string words = " " + Lower(Trim(s)) + " ";
  for (const char* w : {" nvidia ", " geforce ", " tesla ", " amd ", " instinct "}) {
    for (size_t at = words.find(w); at != std::string::npos; at = words.find(w)) words.replace(at, std::string(w).size() - 1, "");
  }
  std::string out;
  for (char c : words) {
    if (c != ' ' && c != '-' && c != '_') out += c;
  }
  return out;
}

// True iff `name` (compact) spells the id's first word whole and then, optionally, the start
// of its following words: "h100" and "h100sxm" for h100-sxm5-80gb; not "h20" for h200-sxm-141gb.
bool ShortFormOf(const std::string& name, std::string_view id) {
  std::vector<std::string> words;
  size_t start = 0;
  while (start <= id.size()) {
    const size_t dash = id.find('-', start);
    words.emplace_back(id.substr(start, dash == std::string_view::npos ? std::string_view::npos : dash - start));
    if (dash == std::string_view::npos) break;
    start = dash + 1;
  }
  if (words.empty() || name.size() < words[0].size() || name.compare(0, words[0].size(), words[0]) != 0) return false;
  std::string joined;
  for (const auto& w : words) joined += w;
  return joined.compare(0, name.size(), name) == 0;
}

}  // namespace

std::string RepositoryOf(const ModelSpec& m) {
  const std::string_view s = m.source;
  const size_t end = s.find_first_of(" :(,;");
  const std::string_view first = s.substr(0, end);
  return first.find('/') != std::string_view::npos ? std::string(first) : std::string();
}

StatusOr<const ModelSpec*> FindModel(const Catalog& catalog, std::string_view name) {
  if (auto exact = catalog.Model(name); exact.ok()) return exact;
  for (const auto& m : catalog.models()) {
    if (SameText(m.id, name) || SameText(m.name, name)) return &m;
  }
  std::vector<const ModelSpec*> by_repo;
  for (const auto& m : catalog.models()) {
    const std::string repo = RepositoryOf(m);
    if (repo.empty()) continue;
    const std::string last = repo.substr(repo.rfind('/') + 1);
    if (SameText(repo, name) || SameText(last, name)) by_repo.push_back(&m);
  }
  if (by_repo.size() == 1) return by_repo.front();
  for (const ModelSpec* m : by_repo) {
    const std::string repo = RepositoryOf(*m);
    if (SameText(repo.substr(repo.rfind('/') + 1), m->name)) return m;
  }
  std::vector<std::string> ids;
  for (const auto& m : catalog.models()) ids.push_back(m.id);
  return Status::NotFound(UnknownIdMessage("model", Lower(Trim(name)), ids) +
                          " (ids, published names and Hugging Face repositories are all accepted; see `ditune models`)");
}

StatusOr<const GpuSpec*> FindGpu(const Catalog& catalog, std::string_view name, std::string* note) {
  if (auto exact = catalog.Gpu(name); exact.ok()) return exact;
  for (const auto& g : catalog.gpus()) {
    if (SameText(g.id, name)) return &g;
    for (const auto& d : g.device_names) {
      if (SameText(d, name)) return &g;
    }
  }
  const std::string compact = Compact(name);
  std::vector<const GpuSpec*> matches;
  if (!compact.empty()) {
    for (const auto& g : catalog.gpus()) {
      if (ShortFormOf(compact, g.id)) matches.push_back(&g);
    }
  }
  if (matches.size() == 1) return matches.front();
  if (matches.size() > 1) {
    std::vector<std::string> ids;
    const GpuSpec* sxm = nullptr;
    for (const GpuSpec* g : matches) {
      ids.push_back(g->id);
      // The SXM form of multi-GPU servers, its largest memory where there are several (A100).
      if (g->id.find("sxm") != std::string::npos && (sxm == nullptr || g->memory.value() > sxm->memory.value())) {
        sxm = g;
      }
    }
    if (sxm != nullptr) {
      if (note != nullptr) {
        *note = fmt::format("GPU '{}' taken as {} (the SXM form of multi-GPU servers, the largest memory); also in the catalog: {}",
                            Trim(name), sxm->id, fmt::join(ids, ", "));
      }
      return sxm;
    }
    return Status::InvalidArgument(
        fmt::format("GPU '{}' is any of {}: give one of them with --gpu", Trim(name), fmt::join(ids, ", ")));
  }
  std::vector<std::string> ids;
  for (const auto& g : catalog.gpus()) ids.push_back(g.id);
  return Status::NotFound(UnknownIdMessage("GPU", Lower(Trim(name)), ids) +
                          " (ids, the names nvidia-smi prints and short forms such as H100 are all accepted; a GPU "
                          "outside the catalog: see `ditune hardware`)");
}

}  // namespace ditune
