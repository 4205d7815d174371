#include "core/enumerate.h"

#include <algorithm>
#include <set>

namespace ditune {
namespace {

std::vector<int> Divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i) {
    if (n % i == 0) d.push_back(i);
  }
  return d;
}

// Rank orders worth trying on this cluster besides xDiT's default.
std::vector<RankOrder> Orders(const Cluster& cluster, const ParallelConfig& c, bool vary) {
  std::vector<RankOrder> out = {kDefaultRankOrder};
  if (!vary) return out;
  const bool topology = cluster.nodes() > 1 || cluster.intra->topology == LinkTopology::kPcieTwoSocket;
  if (!topology) return out;
  // Keep the chatty groups (sp, tp, cfg) inside nodes/sockets and put PipeFusion's
  // point-to-point transfers (and dp, which does not talk) outermost.
  if (c.pipefusion > 1 && (c.cfg > 1 || c.dp > 1)) {
    out.push_back({OrderDim::kTp, OrderDim::kSp, OrderDim::kCfg, OrderDim::kDp, OrderDim::kPp});
  }
  if (c.cfg > 1 && c.sp() > 1) {
    // CFG's one all-gather per step can cross a socket; the all-to-alls stay inside it.
    out.push_back({OrderDim::kTp, OrderDim::kSp, OrderDim::kPp, OrderDim::kDp, OrderDim::kCfg});
  }
  return out;
}

}  // namespace

long CountFactorisations(int n) {
  long count = 0;
  for (int a : Divisors(n))
    for (int b : Divisors(n / a))
      for (int c : Divisors(n / a / b))
        for (int d : Divisors(n / a / b / c))
          count += static_cast<long>(Divisors(n / a / b / c / d).size());
  return count;
}

std::vector<ParallelConfig> EnumerateConfigs(const ValidationContext& ctx, const Cluster& cluster,
                                             const EnumerateOptions& opt) {
  std::vector<ParallelConfig> out;
  const int n = ctx.gpus;
  for (int dp : Divisors(n)) {
    for (int cfg : Divisors(n / dp)) {
      if (cfg > 2) continue;
      for (int pp : Divisors(n / dp / cfg)) {
        for (int u : Divisors(n / dp / cfg / pp)) {
          for (int r : Divisors(n / dp / cfg / pp / u)) {
            const int tp = n / dp / cfg / pp / u / r;
            ParallelConfig c;
            c.dp = dp;
            c.cfg = cfg;
            c.pipefusion = pp;
            c.ulysses = u;
            c.ring = r;
            c.tp = tp;
            std::set<int> patch_counts = {pp};
            if (pp > 1 && opt.vary_patches) {
              if (pp % 2 == 0) patch_counts.insert(pp / 2);
              patch_counts.insert(2 * pp);
              patch_counts.insert(4 * pp);
            }
            const std::vector<int> warmups = pp > 1 ? opt.warmups : std::vector<int>{1};
            for (int patches : patch_counts) {
              for (int w : warmups) {
                c.patches = patches;
                c.warmup = w;
                for (const RankOrder& order : Orders(cluster, c, opt.vary_order)) {
                  c.order = order;
                  if (IsValidConfig(ctx, c)) out.push_back(c);
                }
              }
            }
          }
        }
      }
    }
  }
  if (opt.distrifusion && n > 1) {
    ParallelConfig c;
    c.distrifusion = n;
    if (IsValidConfig(ctx, c)) out.push_back(c);
  }
  return out;
}

}  // namespace ditune
