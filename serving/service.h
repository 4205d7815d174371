// Service times from the simulator: each request shape on each replica configuration, for
// each batch size, priced as `ditune plan` prices a configuration (the calibrated models,
// the executor's pricing, the memory model).
#ifndef DITUNE_SERVING_SERVICE_H_
#define DITUNE_SERVING_SERVICE_H_

#include <vector>

#include "core/catalog.h"
#include "core/cluster.h"
#include "core/parallel_config.h"
#include "store/store.h"
#include "planner/plan.h"
#include "serving/queue_sim.h"
#include "serving/requests.h"

namespace ditune::serving {

struct PricingContext {
  const Catalog* catalog = nullptr;
  const std::vector<Fit>* fits = nullptr;
  PlanOptions plan;       // executor, runner options
  Cluster cluster;        // the whole cluster: a replica sees its GPU type and links
  Workload base;          // batch, output type; the shape comes from each request
};

// A table of `types` (each a configuration whose world size is its GPU count) for `shapes`,
// batches 1..max_batch. A configuration the rules refuse for a shape, or that does not fit in
// memory, is refused with the reason (the rule, or the memory it needs).
StatusOr<ServiceTable> PriceServiceTimes(const PricingContext& ctx, const std::vector<RequestShape>& shapes,
                                         const std::vector<ParallelConfig>& types, int max_batch);

}  // namespace ditune::serving

#endif  // DITUNE_SERVING_SERVICE_H_
