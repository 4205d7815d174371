// What a serving simulation is fed: requests, each an arrival time and a shape (model,
// resolution, frames, steps). Requests come from Poisson arrivals of a weighted mix of
// shapes, or from a trace of real arrivals (a CSV file).
#ifndef DITUNE_SERVING_REQUESTS_H_
#define DITUNE_SERVING_REQUESTS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/catalog.h"
#include "core/status.h"
#include "core/units.h"
#include "core/workload.h"

namespace ditune::serving {

// The part of a request that sets its service time.
struct RequestShape {
  std::string model;
  int height = 0;
  int width = 0;
  int frames = 1;
  int steps = 0;

  friend bool operator==(const RequestShape&, const RequestShape&) = default;
  friend auto operator<=>(const RequestShape&, const RequestShape&) = default;
};

// "flux.1-dev 1024x1024, 28 steps" (frames shown when more than one).
std::string ShapeLabel(const RequestShape& shape);
// The shape of a workload, and a workload of a shape (the rest from `base`).
RequestShape ShapeOf(const Workload& workload);
Workload WorkloadOf(const RequestShape& shape, const Workload& base);

struct Request {
  int id = 0;         // 0, 1, ... in arrival order
  Seconds arrival;    // since the start of the stream
  int shape = 0;      // index into RequestStream::shapes
};

struct RequestStream {
  std::vector<RequestShape> shapes;  // the distinct shapes, in order of first appearance
  std::vector<Request> requests;     // by arrival time (ties: as given)
};

// One shape of a mix and its relative frequency (> 0).
struct MixItem {
  RequestShape shape;
  double weight = 1;
};

// A mix: comma-separated `HxW[xFRAMES][@STEPS][:WEIGHT]` items, each taking the rest of its
// shape from `base` (weight 1 when omitted), e.g. "1024x1024:3,2048x2048:1". InvalidArgument
// naming the item and the valid form.
StatusOr<std::vector<MixItem>> ParseMix(std::string_view spec, const RequestShape& base);

// Poisson arrivals at `rate_per_s` over [0, duration), each request's shape drawn from `mix`
// by weight. The same seed gives the same stream on every platform (the generator and the
// transforms are ditune's own, not the standard library's distributions).
StatusOr<RequestStream> PoissonRequests(const std::vector<MixItem>& mix, double rate_per_s, Seconds duration,
                                        uint64_t seed);

// A trace: a CSV with a header naming `arrival_s` and any of `model,height,width,frames,steps`
// (missing columns take `defaults`' values; other columns are ignored); one request per row.
// Rows need not be sorted (they are, stably, by arrival). Every model must be in `catalog` and
// every shape valid for its model. InvalidArgument "<origin>:<line>: ..." naming the column and
// what is valid.
StatusOr<RequestStream> ReadRequestTrace(std::string_view text, std::string_view origin,
                                         const RequestShape& defaults, const Catalog& catalog);

// ReadRequestTrace on the file at `path` (NotFound when it cannot be opened).
StatusOr<RequestStream> LoadRequestTraceFile(const std::string& path, const RequestShape& defaults,
                                             const Catalog& catalog);

// The mean arrival rate: requests per second over the span from the first to the last
// arrival (0 for fewer than two requests).
double MeanRate(const RequestStream& stream);

}  // namespace ditune::serving

#endif  // DITUNE_SERVING_REQUESTS_H_
