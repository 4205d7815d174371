// The shipped catalogs: every model, GPU and link, loaded from a data directory.
#ifndef DITUNE_CORE_CATALOG_H_
#define DITUNE_CORE_CATALOG_H_

#include <cstdint>
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
  //
  // `user_dirs` (a user catalog: --catalog DIR, or $DITUNE_CATALOG) hold files laid out the
  // same way (DIR/hardware/gpus/<id>.json, DIR/hardware/links/<id>.json, DIR/models/<id>.json,
  // DIR/runtimes/<id>.json; any of the folders may be absent), checked the same way: a file
  // whose id is new adds an entry, one whose id is shipped replaces it, later directories
  // over earlier ones. InvalidArgument naming the directory when it does not exist or holds
  // none of those folders.
  static StatusOr<Catalog> Load(const std::filesystem::path& data_dir,
                                const std::vector<std::filesystem::path>& user_dirs = {});

  // $DITUNE_DATA when set, else the directory the build was configured with.
  static std::filesystem::path DefaultDataDir();
  // $DITUNE_CATALOG split at ':' (empty parts skipped); the CLI's --catalog DIR is appended
  // to it, so that it wins over the environment's.
  static std::vector<std::filesystem::path> DefaultUserDirs();

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
  // What the user catalog added or replaced, one line each: "gpu my-gpu (new, from PATH)",
  // "link pcie4 (replaces the shipped one, from PATH)".
  const std::vector<std::string>& user_entries() const { return user_entries_; }
  // Where an entry came from when a user catalog supplied it ("" for shipped entries).
  std::string UserFileOf(std::string_view kind, std::string_view id) const;
  // A digest of every loaded entry's content: plans cached on one catalog are not reused on
  // another whose figures differ under the same ids.
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  std::filesystem::path data_dir_;
  std::vector<ModelSpec> models_;
  std::vector<GpuSpec> gpus_;
  std::vector<LinkSpec> links_;
  std::vector<RuntimeSpec> runtimes_;
  std::vector<std::string> user_entries_;
  std::vector<std::pair<std::string, std::string>> user_files_;  // ("gpu/<id>", path)
  uint64_t fingerprint_ = 0;
};

// "unknown <what> 'x' (did you mean 'y'?); valid: a, b, c" — the message every unknown
// id gets.
std::string UnknownIdMessage(std::string_view what, std::string_view id,
                             const std::vector<std::string>& valid);

}  // namespace ditune

#endif  // DITUNE_CORE_CATALOG_H_
