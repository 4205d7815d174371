// Every valid hybrid configuration for a number of GPUs.
#ifndef DITUNE_CORE_ENUMERATE_H_
#define DITUNE_CORE_ENUMERATE_H_

#include <vector>

#include "core/cluster.h"
#include "core/parallel_config.h"
#include "core/config_rules.h"

namespace ditune {

struct EnumerateOptions {
  // PipeFusion patch counts tried per stage count: xDiT users' grid {N/2, N, 2N}, plus 4N.
  bool vary_patches = true;
  // Warm-up steps tried with PipeFusion (fewer is faster but starts from cold K/V; the
  // default keeps xDiT's 1).
  std::vector<int> warmups = {1};
  bool distrifusion = true;
  // Also try rank orders that keep all-to-all groups inside a node or socket and put
  // PipeFusion (point-to-point) across them, where the cluster's topology makes it matter.
  bool vary_order = true;
};

// Only what xDiT's flags can express: no DistriFusion, xDiT's rank order.
inline EnumerateOptions XditOnly(EnumerateOptions o) {
  o.distrifusion = false;
  o.vary_order = false;
  return o;
}

// All factorisations of ctx.gpus into dp x cfg x pipefusion x ulysses x ring x tp (any
// factors, not only powers of two), with the patch counts, warm-ups and rank orders of
// `options`, that pass IsValidConfig. Deterministic order.
std::vector<ParallelConfig> EnumerateConfigs(const ValidationContext& ctx, const Cluster& cluster,
                                             const EnumerateOptions& options = {});

// The number of (dp, cfg, pipefusion, ulysses, ring, tp) tuples with product n, whatever
// their validity: sum over ordered factorisations into six factors.
long CountFactorisations(int n);

}  // namespace ditune

#endif  // DITUNE_CORE_ENUMERATE_H_
