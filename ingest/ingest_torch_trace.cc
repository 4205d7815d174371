// PyTorch profiler traces: the Chrome trace JSON torch.profiler's export_chrome_trace (Kineto)
// writes, as xDiT's runner saves it with --profile (profile_trace_rank_R.json, or .json.gz,
// which torch gzips by the name). What is read:
//  - collectives: each NCCL kernel ("ncclDevKernel_*", "ncclKernel_*") with the arguments of
//    the record_param_comms op that launched it ("Collective name", "In msg nelems", "Out msg
//    nelems", "dtype", "Group size"): copied onto the kernel by Kineto, else found through the
//    kernel's "External id", else paired with the comm ops in order when the counts agree;
//  - the host's launch overhead: the CUDA launch calls (cudaLaunchKernel, cudaLaunchKernelExC,
//    cuLaunchKernel, ...) of the thread that issues most of them, and that thread's wall time
//    from its first to its last launch, less the time it sat in a synchronising call, inside
//    each "ProfilerStep#N" window (the whole trace when it has none);
//  - GPU kernel time by class (gemm, attention, nccl, other), over the trace and per step
//    (ingest_torch_trace_kernels.cc).
// Everything left out is reported through IngestContext::warnings, one message per kind.
// ingest_torch_trace_json.cc inflates the file and parses its JSON.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/stats.h"
#include "ingest/ingest.h"
#include "ingest/ingest_impl.h"
#include "ingest/ingest_torch_trace_impl.h"

namespace ditune {
namespace {

using Json = nlohmann::json;
using ingest_internal::ParseInt;
using ingest_internal::Trim;
using ingest_internal::torch_trace::Event;
using ingest_internal::torch_trace::Gunzip;
using ingest_internal::torch_trace::IsGzip;
using ingest_internal::torch_trace::IsNcclKernel;
using ingest_internal::torch_trace::KernelTimeByClass;
using ingest_internal::torch_trace::Kind;
using ingest_internal::torch_trace::kTraceExample;
using ingest_internal::torch_trace::Lower;
using ingest_internal::torch_trace::ParseTraceJson;
using ingest_internal::torch_trace::ProfilerWindows;

constexpr std::string_view kValidCollectives =
    "all_to_all, all_to_allv, alltoall_base, _allgather_base, all_gather_into_tensor, "
    "allgather, allreduce, reduce_scatter, _reduce_scatter_base, send, recv";

bool IsLaunchName(std::string_view name) {
  for (std::string_view base :
       {"cudaLaunchKernelExC", "cudaLaunchKernel", "cudaLaunchCooperativeKernel",
        "cuLaunchKernelEx", "cuLaunchKernel"}) {
    // CUPTI may add a version or stream suffix ("cudaLaunchKernelExC_v11060", "_ptsz").
    if (name == base || (name.starts_with(base) && name[base.size()] == '_')) return true;
  }
  return false;
}

// Calls that block the host until the GPU catches up: time in them is not launch overhead.
bool IsBlockingName(std::string_view name) {
  return name.find("Synchronize") != std::string_view::npos || name == "cudaMemcpy" ||
         name == "cuMemcpy" || name == "cudaMemcpy2D";
}

// An integer argument, written as a number or as digits in a string; nullopt otherwise.
std::optional<int64_t> IntArg(const Json* args, const char* key) {
  if (args == nullptr) return std::nullopt;
  const auto it = args->find(key);
  if (it == args->end()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number_unsigned()) {
    const uint64_t v = it->get<uint64_t>();
    return v <= static_cast<uint64_t>(INT64_MAX) ? std::optional<int64_t>(v) : std::nullopt;
  }
  if (it->is_number_float()) {
    const double v = it->get<double>();
    if (v == std::floor(v) && std::abs(v) < 9e15) return static_cast<int64_t>(v);
    return std::nullopt;
  }
  if (it->is_string()) return ParseInt(it->get_ref<const std::string&>());
  return std::nullopt;
}

// A string argument without the quotes older Kineto versions left around some values.
std::optional<std::string> StringArg(const Json* args, const char* key) {
  if (args == nullptr) return std::nullopt;
  const auto it = args->find(key);
  if (it == args->end() || !it->is_string()) return std::nullopt;
  std::string_view s = Trim(it->get_ref<const std::string&>());
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return std::string(s);
}

// ditune's collective for a record_param_comms "Collective name", and whether its nccl-tests
// size is the op's output ("Out msg nelems": all_gather's gathered output) or its input.
struct CollectiveOf {
  std::string_view name;
  bool output_size = false;
};

std::optional<CollectiveOf> MapCollective(std::string_view torch_name) {
  static const std::map<std::string, CollectiveOf, std::less<>> kNames = {
      {"all_to_all", {"all_to_all"}},
      {"all_to_allv", {"all_to_all"}},
      {"alltoall_base", {"all_to_all"}},
      {"alltoall", {"all_to_all"}},
      {"_allgather_base", {"all_gather", true}},
      {"all_gather_into_tensor", {"all_gather", true}},
      {"allgather", {"all_gather", true}},
      {"all_gather", {"all_gather", true}},
      {"allreduce", {"all_reduce"}},
      {"all_reduce", {"all_reduce"}},
      {"reduce_scatter", {"reduce_scatter"}},
      {"_reduce_scatter_base", {"reduce_scatter"}},
      {"reduce_scatter_tensor", {"reduce_scatter"}},
      {"send", {"sendrecv"}},
      {"recv", {"sendrecv"}}};
  const auto it = kNames.find(Trim(torch_name));
  if (it == kNames.end()) return std::nullopt;
  return it->second;
}

// Bytes per element of a torch dtype as record_param_comms names it (c10's ScalarType names:
// "Float", "BFloat16", ...; also "torch.float16" and "bf16" spellings); 0 when unknown.
int DtypeBytes(std::string_view dtype) {
  std::string d = Lower(Trim(dtype));
  if (d.starts_with("torch.")) d = d.substr(6);
  static const std::map<std::string, int, std::less<>> kSizes = {
      {"float", 4},        {"float32", 4},       {"fp32", 4},   {"double", 8},   {"float64", 8},
      {"half", 2},         {"float16", 2},       {"fp16", 2},   {"bfloat16", 2}, {"bf16", 2},
      {"byte", 1},         {"uint8", 1},         {"char", 1},   {"int8", 1},     {"short", 2},
      {"int16", 2},        {"int", 4},           {"int32", 4},  {"long", 8},     {"int64", 8},
      {"bool", 1},         {"uint16", 2},        {"uint32", 4}, {"uint64", 8},   {"complexhalf", 4},
      {"complexfloat", 8}, {"complexdouble", 16}};
  if (const auto it = kSizes.find(d); it != kSizes.end()) return it->second;
  if (d.starts_with("float8")) return 1;
  return 0;
}

// Total length of the union of [start, end) intervals clipped to [lo, hi].
double UnionLength(std::vector<std::pair<double, double>> spans, double lo, double hi) {
  std::sort(spans.begin(), spans.end());
  double total = 0, reach = lo;
  for (auto [a, b] : spans) {
    a = std::max(a, reach);
    b = std::min(b, hi);
    if (b > a) {
      total += b - a;
      reach = b;
    }
  }
  return total;
}

class TraceReader {
 public:
  TraceReader(const IngestContext& ctx, std::string_view origin) : ctx_(ctx), origin_(origin) {}

  Status Read(const Json& doc);
  StatusOr<std::vector<Measurement>> Finish();

 private:
  void Warn(std::string_view what) {
    if (ctx_.warnings != nullptr) ctx_.warnings->push_back(fmt::format("{}: {}", origin_, what));
  }
  void Collectives();
  void Launches();
  void Summary();

  const IngestContext& ctx_;
  std::string_view origin_;
  std::vector<Event> events_;
  std::vector<Measurement> out_;
  int collectives_ = 0;  // collective measurements in out_
  bool launch_ = false;  // a launch measurement is in out_
  std::optional<int> world_size_, rank_;
};

Status TraceReader::Read(const Json& doc) {
  const auto trace = doc.find("traceEvents");
  if (!doc.is_object() || trace == doc.end() || !trace->is_array()) {
    return Status::InvalidArgument(fmt::format(
        "{}: not a PyTorch profiler trace: a JSON object without a \"traceEvents\" array "
        "(valid: {})",
        origin_, kTraceExample));
  }
  if (const auto info = doc.find("distributedInfo"); info != doc.end() && info->is_object()) {
    if (auto n = IntArg(&*info, "world_size"); n && *n >= 1 && *n <= 1'000'000) world_size_ = *n;
    if (auto r = IntArg(&*info, "rank"); r && *r >= 0 && *r < 1'000'000) rank_ = *r;
  }
  int malformed = 0;
  for (const Json& e : *trace) {
    if (!e.is_object() || !e.contains("ph") || e["ph"] != "X") continue;
    const auto name = e.find("name");
    const auto ts = e.find("ts");
    const auto dur = e.find("dur");
    if (name == e.end() || !name->is_string() || ts == e.end() || !ts->is_number() ||
        dur == e.end() || !dur->is_number() || dur->get<double>() < 0 ||
        std::abs(ts->get<double>()) > 1e17 || dur->get<double>() > 1e15) {
      ++malformed;
      continue;
    }
    Event ev;
    const auto cat_it = e.find("cat");
    const std::string cat =
        cat_it != e.end() && cat_it->is_string() ? cat_it->get<std::string>() : "";
    // A step's span on the GPU's timeline: the host's "ProfilerStep#N" is the window.
    if (cat == "gpu_user_annotation") continue;
    ev.kind = cat == "kernel"                                 ? Kind::kKernel
              : cat == "gpu_memcpy" || cat == "gpu_memset"    ? Kind::kMemcpy
              : cat == "cuda_runtime" || cat == "cuda_driver" ? Kind::kRuntime
                                                              : Kind::kHost;
    ev.name = name->get_ref<const std::string&>();
    ev.ts_us = ts->get<double>();
    ev.dur_us = dur->get<double>();
    const auto pid = e.find("pid");
    const auto tid = e.find("tid");
    ev.thread =
        fmt::format("{}/{}", pid == e.end() ? "" : pid->dump(), tid == e.end() ? "" : tid->dump());
    if (const auto args = e.find("args"); args != e.end() && args->is_object()) ev.args = &*args;
    events_.push_back(std::move(ev));
  }
  if (malformed > 0) {
    Warn(
        fmt::format("skipped {} complete (\"ph\": \"X\") events without a name, a numeric "
                    "\"ts\" or a \"dur\" >= 0",
                    malformed));
  }
  std::sort(events_.begin(), events_.end(),
            [](const Event& a, const Event& b) { return a.ts_us < b.ts_us; });
  Collectives();
  Launches();
  Summary();
  return Status::Ok();
}

void TraceReader::Collectives() {
  std::vector<const Event*> kernels, records;
  std::map<int64_t, const Event*> record_of;  // by "External id"
  std::vector<const Event*> barriers;
  for (const Event& e : events_) {
    if (e.kind == Kind::kKernel && IsNcclKernel(e)) kernels.push_back(&e);
    if (e.kind == Kind::kHost && e.name == "record_param_comms" && e.args != nullptr &&
        e.args->contains("Collective name")) {
      records.push_back(&e);
      if (auto id = IntArg(e.args, "External id")) record_of.emplace(*id, &e);
      if (StringArg(e.args, "Collective name") == "barrier") barriers.push_back(&e);
    }
  }
  // barrier() is an all_reduce of one value inside the barrier's own comm op: its time is
  // the wait for the slowest rank, not a transfer.
  auto in_barrier = [&](const Event* record) {
    for (const Event* b : barriers) {
      if (b != record && b->thread == record->thread && record->ts_us >= b->ts_us &&
          record->ts_us <= b->end_us()) {
        return true;
      }
    }
    return false;
  };
  // Each kernel's comm op arguments.
  std::vector<std::pair<const Event*, const Json*>> linked;
  std::vector<const Event*> unlinked;
  std::set<const Event*> used;
  int barrier_kernels = 0;
  for (const Event* k : kernels) {
    const auto id = IntArg(k->args, "External id");
    const auto rec = id ? record_of.find(*id) : record_of.end();
    if (rec != record_of.end()) {
      used.insert(rec->second);
      if (in_barrier(rec->second)) {
        ++barrier_kernels;
        continue;
      }
    }
    if (k->args != nullptr && k->args->contains("Collective name")) {
      linked.emplace_back(k, k->args);
    } else if (rec != record_of.end()) {
      linked.emplace_back(k, rec->second->args);
    } else {
      unlinked.push_back(k);
    }
  }
  std::vector<const Event*> spare;  // barrier's own op launches nothing
  for (const Event* r : records) {
    if (!used.count(r) && StringArg(r->args, "Collective name") != "barrier") spare.push_back(r);
  }
  if (!unlinked.empty() && unlinked.size() == spare.size()) {
    for (size_t i = 0; i < unlinked.size(); ++i) {
      if (in_barrier(spare[i])) {
        ++barrier_kernels;
      } else {
        linked.emplace_back(unlinked[i], spare[i]->args);
      }
    }
    Warn(
        fmt::format("paired {} NCCL kernels with the record_param_comms ops in launch order "
                    "(the trace does not link them)",
                    unlinked.size()));
  } else {
    if (!unlinked.empty()) {
      Warn(fmt::format(
          "left out {} NCCL kernels that name no collective and share no \"External id\" with a "
          "record_param_comms op ({} unmatched ops, too many or too few to pair in order)",
          unlinked.size(), spare.size()));
    }
    if (!spare.empty() && unlinked.empty() && !kernels.empty()) {
      Warn(
          fmt::format("{} record_param_comms ops launched no NCCL kernel in the trace (e.g. "
                      "barrier, or kernels outside the profiled window); left out",
                      spare.size()));
    }
  }
  if (barrier_kernels > 0) {
    Warn(fmt::format("skipped {} NCCL kernels of barrier(): a wait for the other ranks",
                     barrier_kernels));
  }

  struct Key {
    std::string collective;
    int64_t bytes;
    int64_t ranks;
    auto operator<=>(const Key&) const = default;
  };
  struct Group {
    std::vector<double> seconds;
    std::set<std::string> torch_names, dtypes;
    std::string kernel;
  };
  std::map<Key, Group> groups;
  std::map<std::string, int> unmodelled, unknown_dtype;
  int one_rank = 0, no_bytes = 0, no_time = 0, bad_args = 0;
  for (const auto& [k, args] : linked) {
    const std::string name = StringArg(args, "Collective name").value_or("");
    const auto mapped = MapCollective(name);
    if (!mapped) {
      ++unmodelled[name];
      continue;
    }
    const auto in = IntArg(args, "In msg nelems");
    const auto out = IntArg(args, "Out msg nelems");
    const auto group = IntArg(args, "Group size");
    const std::string dtype = StringArg(args, "dtype").value_or("");
    if (!in || !out || !group || *in < 0 || *out < 0 || *group < 1 || *group > 1'000'000) {
      ++bad_args;
      continue;
    }
    const int elem = DtypeBytes(dtype);
    if (elem == 0) {
      ++unknown_dtype[dtype];
      continue;
    }
    const int64_t nelems = mapped->output_size ? *out : *in;
    if (*group == 1) {
      ++one_rank;
      continue;
    }
    if (nelems == 0 || nelems > INT64_MAX / 16) {
      ++no_bytes;
      continue;
    }
    if (k->dur_us <= 0) {
      ++no_time;
      continue;
    }
    Group& g = groups[Key{std::string(mapped->name), nelems * elem, *group}];
    g.seconds.push_back(k->dur_us * 1e-6);
    g.torch_names.insert(name);
    g.dtypes.insert(dtype);
    if (g.kernel.empty()) g.kernel = std::string(k->name.substr(0, k->name.find('(')));
  }
  for (const auto& [name, n] : unmodelled) {
    Warn(
        fmt::format("skipped {} NCCL kernels of '{}', a collective ditune does not model "
                    "(valid: {})",
                    n, name, kValidCollectives));
  }
  for (const auto& [dtype, n] : unknown_dtype) {
    Warn(fmt::format("skipped {} collectives of dtype '{}': unknown element size", n, dtype));
  }
  if (bad_args > 0) {
    Warn(
        fmt::format("skipped {} collectives without whole \"In msg nelems\", \"Out msg "
                    "nelems\" and \"Group size\" (>= 1) arguments",
                    bad_args));
  }
  if (one_rank > 0) {
    Warn(fmt::format("skipped {} collectives over a group of 1 rank: no traffic", one_rank));
  }
  if (no_bytes > 0) Warn(fmt::format("skipped {} collectives that moved no data", no_bytes));
  if (no_time > 0) Warn(fmt::format("skipped {} NCCL kernels of zero duration", no_time));

  for (auto& [key, g] : groups) {
    std::sort(g.seconds.begin(), g.seconds.end());
    Measurement m;
    m.source = MeasurementSource::kImport;
    m.kind = MeasurementKind::kCollective;
    m.op = key.collective;
    m.backend = "nccl";
    m.device = ctx_.device;
    m.link = ctx_.link;
    m.ranks = static_cast<int>(key.ranks);
    m.bytes = Bytes(static_cast<double>(key.bytes));
    m.median = Seconds(Median(g.seconds));
    m.p10 = Seconds(NearestRank(g.seconds, 0.1));
    m.p90 = Seconds(NearestRank(g.seconds, 0.9));
    m.samples = static_cast<int>(g.seconds.size());
    m.run_id = ctx_.run_id;
    m.params = {{"source", "torch-profiler"},
                {"collective_name", fmt::format("{}", fmt::join(g.torch_names, ","))},
                {"dtype", fmt::format("{}", fmt::join(g.dtypes, ","))},
                {"kernel", g.kernel}};
    if (rank_) m.params["rank"] = *rank_;
    if (Status st = m.Validate(); !st.ok()) {
      Warn(fmt::format("left out the {} of {} bytes over {} ranks: {}", key.collective, key.bytes,
                       key.ranks, st.message()));
      continue;
    }
    out_.push_back(std::move(m));
    ++collectives_;
  }
}

void TraceReader::Launches() {
  std::map<std::string, std::vector<const Event*>> launches, blocking;
  int graphs = 0;
  for (const Event& e : events_) {
    if (e.kind != Kind::kRuntime) continue;
    if (IsLaunchName(e.name)) launches[e.thread].push_back(&e);
    if (IsBlockingName(e.name)) blocking[e.thread].push_back(&e);
    if (e.name.find("GraphLaunch") != std::string_view::npos) ++graphs;
  }
  if (graphs > 0) {
    Warn(
        fmt::format("{} CUDA graph launches issue their kernels without a host launch each; "
                    "they are not counted as launches",
                    graphs));
  }
  if (launches.empty()) {
    Warn(
        "no CUDA kernel launch calls (cuda_runtime events): no launch overhead measured (was "
        "the profiler run with ProfilerActivity.CUDA?)");
    return;
  }
  // The issuing thread: the one with the most launches.
  auto main = std::max_element(launches.begin(), launches.end(), [](const auto& a, const auto& b) {
    return a.second.size() < b.second.size();
  });
  size_t elsewhere = 0;
  for (const auto& [thread, list] : launches) {
    if (thread != main->first) elsewhere += list.size();
  }
  if (elsewhere > 0) {
    Warn(fmt::format("{} kernel launches on other host threads than {} (pid/tid) are not counted",
                     elsewhere, main->first));
  }
  // Outermost calls only: a driver launch inside a runtime launch is the same kernel.
  std::vector<const Event*> calls;
  for (const Event* e : main->second) {
    if (calls.empty() || e->ts_us >= calls.back()->end_us()) calls.push_back(e);
  }
  // Overlapping windows (a step annotated twice) count their launches once.
  std::vector<std::pair<double, double>> windows = ProfilerWindows(events_);
  if (windows.empty()) windows.emplace_back(-1e300, 1e300);
  std::vector<std::pair<double, double>> blocked;
  for (const Event* b : blocking[main->first]) blocked.emplace_back(b->ts_us, b->end_us());
  int64_t n = 0;
  double span_us = 0, blocked_us = 0;
  int steps = 0;
  for (const auto& [lo, hi] : windows) {
    const Event* first = nullptr;
    const Event* last = nullptr;
    int64_t count = 0;
    for (const Event* c : calls) {
      if (c->ts_us < lo || c->ts_us >= hi) continue;
      if (first == nullptr) first = c;
      last = c;
      ++count;
    }
    if (count == 0) continue;
    ++steps;
    n += count;
    span_us += last->end_us() - first->ts_us;
    blocked_us += UnionLength(blocked, first->ts_us, last->end_us());
  }
  const double host_s = (span_us - blocked_us) * 1e-6;
  if (n == 0 || !(host_s > 0)) {
    Warn(
        fmt::format("no launch overhead measured: {} launches in the profiled steps over {} s "
                    "of host time",
                    n, host_s));
    return;
  }
  Measurement m;
  m.source = MeasurementSource::kImport;
  m.kind = MeasurementKind::kOp;
  m.op = "launch";
  m.backend = "xdit";
  m.device = ctx_.device;
  m.median = Seconds(host_s);
  m.p10 = m.median;
  m.p90 = m.median;
  m.run_id = ctx_.run_id;
  m.params = {{"launches", n},
              {"source", "torch-profiler"},
              {"span_s", span_us * 1e-6},
              {"blocked_s", blocked_us * 1e-6},
              {"steps", steps}};
  if (rank_) m.params["rank"] = *rank_;
  if (Status st = m.Validate(); !st.ok()) {
    Warn(fmt::format("left out the launch overhead: {}", st.message()));
    return;
  }
  out_.push_back(std::move(m));
  launch_ = true;
}

void TraceReader::Summary() {
  auto m = KernelTimeByClass(events_, ctx_, world_size_, rank_,
                             [this](std::string_view what) { Warn(what); });
  if (m) out_.push_back(std::move(*m));
}

StatusOr<std::vector<Measurement>> TraceReader::Finish() {
  if (collectives_ == 0 && !launch_) {
    return Status::InvalidArgument(fmt::format(
        "{}: no usable events: no NCCL kernels of a modelled collective and no CUDA kernel "
        "launches among its {} timed events (valid: {}, profiled with activities CPU and CUDA)",
        origin_, events_.size(), kTraceExample));
  }
  if (collectives_ > 0 && ctx_.link.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{}: the trace does not say which link its collectives crossed; pass --link ID (a link "
        "catalog id, e.g. nvlink4 or ib-ndr; `ditune hardware` lists them)",
        origin_));
  }
  return std::move(out_);
}

}  // namespace

StatusOr<std::vector<Measurement>> ParseTorchTrace(std::string_view data, const IngestContext& ctx,
                                                   std::string_view origin) {
  if (ctx.device.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{}: a profiler trace does not say which GPU ran it in ditune's terms; pass --gpu ID (a "
        "GPU catalog id, e.g. h100-sxm5-80gb; `ditune hardware` lists them)",
        origin));
  }
  std::string inflated;
  if (IsGzip(data)) {
    DITUNE_ASSIGN_OR_RETURN(inflated, Gunzip(data, origin));
    data = inflated;
  }
  if (data.starts_with("\xEF\xBB\xBF")) data.remove_prefix(3);  // a UTF-8 byte-order mark
  DITUNE_ASSIGN_OR_RETURN(const Json doc, ParseTraceJson(data, origin));
  TraceReader reader(ctx, origin);
  DITUNE_RETURN_IF_ERROR(reader.Read(doc));
  return reader.Finish();
}

}  // namespace ditune
