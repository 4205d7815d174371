// The shipped catalogs: every model, GPU and link, loaded from a data directory.
#ifndef DITUNE_CORE_CATALOG_H_
#define DITUNE_CORE_CATALOG_H_

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/hardware_spec.h"
#include "core/model_spec.h"
#include "core/status.h"

namespace ditune {

class Catalog {
 public:
  // Loads data_dir/models/*.json, data_dir/hardware/gpus/*.json,
  // data_dir/hardware/links/*.json and data_dir/runtimes/*.json (each runtime's entries are
  // attached to the models they name: ModelSpec::runtimes). Every file must parse, pass its
  // cross-checks and be named after its id. Fails on the first bad file, naming it.
  static StatusOr<Catalog> Load(const std::filesystem::path& data_dir);

  // $DITUNE_DATA when set, else the directory the build was configured with.
  static std::filesystem::path DefaultDataDir();

  // Loads DefaultDataDir() once per process; the catalog lives until exit.
  static StatusOr<const Catalog*> Default();

  // NotFound naming the valid ids (and the closest one) when `id` is unknown.
  StatusOr<const ModelSpec*> Model(std::string_view id) const;
  StatusOr<const GpuSpec*> Gpu(std::string_view id) const;
  StatusOr<const LinkSpec*> Link(std::string_view id) const;
  StatusOr<const RuntimeSpec*> Runtime(std::string_view id) const;

  const std::vector<ModelSpec>& models() const { return models_; }
  const std::vector<GpuSpec>& gpus() const { return gpus_; }
  const std::vector<LinkSpec>& links() const { return links_; }
  const std::vector<RuntimeSpec>& runtimes() const { return runtimes_; }
  const std::filesystem::path& data_dir() const { return data_dir_; }

 private:
  std::filesystem::path data_dir_;
  std::vector<ModelSpec> models_;
  std::vector<GpuSpec> gpus_;
  std::vector<LinkSpec> links_;
  std::vector<RuntimeSpec> runtimes_;
};

// "unknown <what> 'x' (did you mean 'y'?); valid: a, b, c" — the message every unknown
// id gets.
std::string UnknownIdMessage(std::string_view what, std::string_view id,
                             const std::vector<std::string>& valid);

}  // namespace ditune

#endif  // DITUNE_CORE_CATALOG_H_
