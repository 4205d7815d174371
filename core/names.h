// The names users type for a model or a GPU, resolved to the catalog's entries. Inputs that
// must name an id exactly (a store's rows, a suite's columns) use Catalog::Model and
// Catalog::Gpu; the command line takes what people write.
#ifndef DITUNE_CORE_NAMES_H_
#define DITUNE_CORE_NAMES_H_

#include <string>
#include <string_view>

#include "core/catalog.h"
#include "core/status.h"

namespace ditune {

// The Hugging Face repository a model's source names first ("black-forest-labs/FLUX.1-dev"),
// or "" when it names none.
std::string RepositoryOf(const ModelSpec& m);

// A model by its id in any letter case ("flux.1-dev", "FLUX.1-dev"), its name as published
// ("Stable Diffusion 3 Medium"), or its Hugging Face repository, whole or its last part
// ("black-forest-labs/FLUX.1-dev", "FLUX.1-dev"). A repository two models share picks the one
// named after it. NotFound naming the closest ids otherwise.
StatusOr<const ModelSpec*> FindModel(const Catalog& catalog, std::string_view name);

// A GPU by its id in any letter case, the name nvidia-smi prints ("NVIDIA H100 80GB HBM3"),
// or a short form ("H100", "h200", "RTX 4090", "A100 SXM4"): the words of the id from its
// first, without "NVIDIA", "GeForce" or "Tesla". A short form that several GPUs start with
// takes the SXM one where there is one (the form multi-GPU servers use), and `*note` then
// says which and names the others; otherwise InvalidArgument naming them. NotFound naming the
// closest ids when nothing matches.
StatusOr<const GpuSpec*> FindGpu(const Catalog& catalog, std::string_view name, std::string* note = nullptr);

}  // namespace ditune

#endif  // DITUNE_CORE_NAMES_H_
