#include "serving/requests.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <optional>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "core/csv.h"
#include "core/text.h"

namespace ditune::serving {
namespace {

std::optional<double> ToDouble(std::string_view s) {
  s = Trim(s);
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<int> ToInt(std::string_view s, int lo, int hi) {
  s = Trim(s);
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty() || v < lo || v > hi) return std::nullopt;
  return v;
}

// Uniform in [0, 1) from 53 random bits.
double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

int ShapeIndex(std::vector<RequestShape>& shapes, std::map<RequestShape, int>& index, const RequestShape& s) {
  auto [it, added] = index.emplace(s, static_cast<int>(shapes.size()));
  if (added) shapes.push_back(s);
  return it->second;
}

}  // namespace

std::string ShapeLabel(const RequestShape& s) {
  std::string out = fmt::format("{} {}x{}", s.model, s.height, s.width);
  if (s.frames > 1) out += fmt::format("x{}", s.frames);
  return out + fmt::format(", {} steps", s.steps);
}

RequestShape ShapeOf(const Workload& w) { return {w.model_id, w.height, w.width, w.frames, w.steps}; }

Workload WorkloadOf(const RequestShape& s, const Workload& base) {
  Workload w = base;
  w.model_id = s.model;
  w.height = s.height;
  w.width = s.width;
  w.frames = s.frames;
  w.steps = s.steps;
  return w;
}

StatusOr<std::vector<MixItem>> ParseMix(std::string_view spec, const RequestShape& base) {
  constexpr std::string_view kForm = "HxW[xFRAMES][@STEPS][:WEIGHT], comma-separated, e.g. 1024x1024:3,2048x2048:1";
  std::vector<MixItem> mix;
  size_t pos = 0;
  for (;;) {
    const size_t comma = spec.find(',', pos);
    const std::string_view item = Trim(spec.substr(pos, comma == std::string_view::npos ? spec.npos : comma - pos));
    auto bad = [&](std::string_view why) {
      return Status::InvalidArgument(fmt::format("--mix item '{}': {}; give {}", item, why, kForm));
    };
    MixItem m;
    m.shape = base;
    std::string_view dims = item;
    if (size_t colon = dims.find(':'); colon != dims.npos) {
      auto w = ToDouble(dims.substr(colon + 1));
      if (!w || *w <= 0) return bad("the weight is not a number > 0");
      m.weight = *w;
      dims = dims.substr(0, colon);
    }
    if (size_t at = dims.find('@'); at != dims.npos) {
      auto steps = ToInt(dims.substr(at + 1), 1, kMaxSteps);
      if (!steps) return bad(fmt::format("the steps are not an integer from 1 to {}", kMaxSteps));
      m.shape.steps = *steps;
      dims = dims.substr(0, at);
    }
    std::vector<std::string_view> parts;
    for (size_t p = 0;;) {
      const size_t x = dims.find('x', p);
      parts.push_back(dims.substr(p, x == dims.npos ? dims.npos : x - p));
      if (x == dims.npos) break;
      p = x + 1;
    }
    if (parts.size() < 2 || parts.size() > 3) return bad("the size is not HxW or HxWxFRAMES");
    auto h = ToInt(parts[0], 1, kMaxSide), w = ToInt(parts[1], 1, kMaxSide);
    if (!h || !w) return bad(fmt::format("height and width must be integers from 1 to {}", kMaxSide));
    m.shape.height = *h;
    m.shape.width = *w;
    if (parts.size() == 3) {
      auto f = ToInt(parts[2], 1, kMaxFrames);
      if (!f) return bad(fmt::format("frames must be an integer from 1 to {}", kMaxFrames));
      m.shape.frames = *f;
    }
    mix.push_back(std::move(m));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return mix;
}

StatusOr<RequestStream> PoissonRequests(const std::vector<MixItem>& mix, double rate_per_s, Seconds duration,
                                        uint64_t seed) {
  if (mix.empty()) return Status::InvalidArgument("a Poisson stream needs at least one request shape");
  if (!(rate_per_s > 0) || !std::isfinite(rate_per_s)) {
    return Status::InvalidArgument(fmt::format("--rate {}: give requests per second > 0", rate_per_s));
  }
  if (!(duration.value() > 0) || !std::isfinite(duration.value())) {
    return Status::InvalidArgument(fmt::format("--duration {}: give seconds > 0", duration.value()));
  }
  constexpr double kMaxRequests = 10e6;
  if (rate_per_s * duration.value() > kMaxRequests) {
    return Status::InvalidArgument(fmt::format(
        "--rate {} over --duration {} s is {:.0f} requests on average; at most {:.0f} are simulated",
        rate_per_s, duration.value(), rate_per_s * duration.value(), kMaxRequests));
  }
  std::vector<double> cumulative;
  double total = 0;
  for (const auto& m : mix) cumulative.push_back(total += m.weight);
  RequestStream out;
  std::map<RequestShape, int> index;
  std::vector<int> shape_of_item;
  for (const auto& m : mix) shape_of_item.push_back(ShapeIndex(out.shapes, index, m.shape));
  std::mt19937_64 rng(seed);
  double t = 0;
  for (;;) {
    t += -std::log1p(-Uniform(rng)) / rate_per_s;
    if (t >= duration.value()) break;
    const double pick = Uniform(rng) * total;
    const size_t item = std::min<size_t>(
        std::upper_bound(cumulative.begin(), cumulative.end(), pick) - cumulative.begin(), mix.size() - 1);
    out.requests.push_back({static_cast<int>(out.requests.size()), Seconds(t), shape_of_item[item]});
  }
  return out;
}

namespace {
constexpr double kMaxArrivalS = 1e8;
}  // namespace

StatusOr<RequestStream> ReadRequestTrace(std::string_view text, std::string_view origin,
                                         const RequestShape& defaults, const Catalog& catalog) {
  DITUNE_ASSIGN_OR_RETURN(auto records, ReadCsvRecords(text, origin));
  constexpr std::string_view kHeader = "arrival_s,model,height,width,frames,steps";
  if (records.empty()) {
    return Status::InvalidArgument(fmt::format("{}: empty; a trace has the header {} and a row per request",
                                               origin, kHeader));
  }
  std::map<std::string, int> col;
  for (size_t i = 0; i < records[0].fields.size(); ++i) {
    const std::string name(Trim(records[0].fields[i]));
    static const std::set<std::string> kColumns = {"arrival_s", "model", "height", "width", "frames", "steps"};
    if (!kColumns.count(name)) {
      return Status::InvalidArgument(fmt::format("{}:{}: unknown column '{}'; a trace's columns are {}", origin,
                                                 records[0].line, name, kHeader));
    }
    if (!col.emplace(name, static_cast<int>(i)).second) {
      return Status::InvalidArgument(
          fmt::format("{}:{}: column '{}' is named twice; name each once", origin, records[0].line, name));
    }
  }
  if (!col.count("arrival_s")) {
    return Status::InvalidArgument(fmt::format(
        "{}:{}: the header has no arrival_s column; a trace's header names arrival_s and any of "
        "model,height,width,frames,steps ({})",
        origin, records[0].line, kHeader));
  }
  struct Row {
    double arrival;
    RequestShape shape;
  };
  std::vector<Row> rows;
  for (size_t r = 1; r < records.size(); ++r) {
    const CsvRecord& rec = records[r];
    auto field = [&](const char* name) -> std::optional<std::string_view> {
      auto it = col.find(name);
      if (it == col.end()) return std::nullopt;
      if (it->second >= static_cast<int>(rec.fields.size())) return std::string_view();
      return Trim(rec.fields[it->second]);
    };
    auto bad = [&](const char* column, std::string_view value, std::string_view valid) {
      return Status::InvalidArgument(
          fmt::format("{}:{}: {} '{}' is not {}", origin, rec.line, column, value, valid));
    };
    Row row{0, defaults};
    const std::string_view a = *field("arrival_s");
    auto arrival = ToDouble(a);
    // Beyond about three years the seconds of one request's latency vanish beside its arrival.
    if (!arrival || *arrival < 0 || *arrival > kMaxArrivalS) {
      return bad("arrival_s", a, fmt::format("a number of seconds from 0 to {:g}", kMaxArrivalS));
    }
    row.arrival = *arrival;
    if (auto m = field("model"); m && !m->empty()) row.shape.model = std::string(*m);
    struct IntColumn {
      const char* name;
      int* out;
      int hi;
    } ints[] = {{"height", &row.shape.height, kMaxSide},
                {"width", &row.shape.width, kMaxSide},
                {"frames", &row.shape.frames, kMaxFrames},
                {"steps", &row.shape.steps, kMaxSteps}};
    for (const auto& ic : ints) {
      auto v = field(ic.name);
      if (!v || v->empty()) continue;
      auto n = ToInt(*v, 1, ic.hi);
      if (!n) return bad(ic.name, *v, fmt::format("an integer from 1 to {}", ic.hi));
      *ic.out = *n;
    }
    auto model = catalog.Model(row.shape.model);
    if (!model.ok()) {
      return Status::InvalidArgument(fmt::format("{}:{}: {}", origin, rec.line, model.status().message()));
    }
    Workload w = WorkloadOf(row.shape, Workload{});
    if (auto geo = ComputeTokenGeometry(**model, w); !geo.ok()) {
      return Status::InvalidArgument(fmt::format("{}:{}: {}", origin, rec.line, geo.status().message()));
    }
    rows.push_back(std::move(row));
  }
  if (rows.empty()) {
    return Status::InvalidArgument(fmt::format("{}: no requests after the header", origin));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) { return x.arrival < y.arrival; });
  RequestStream out;
  std::map<RequestShape, int> index;
  for (const Row& row : rows) {
    const int s = ShapeIndex(out.shapes, index, row.shape);
    out.requests.push_back({static_cast<int>(out.requests.size()), Seconds(row.arrival), s});
  }
  return out;
}

StatusOr<RequestStream> LoadRequestTraceFile(const std::string& path, const RequestShape& defaults,
                                             const Catalog& catalog) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(fmt::format("--trace '{}': cannot open it", path));
  std::stringstream text;
  text << in.rdbuf();
  return ReadRequestTrace(text.str(), path, defaults, catalog);
}

double MeanRate(const RequestStream& stream) {
  const auto& r = stream.requests;
  if (r.size() < 2) return 0;
  const double span = (r.back().arrival - r.front().arrival).value();
  return span > 0 ? static_cast<double>(r.size() - 1) / span : 0;
}

}  // namespace ditune::serving
