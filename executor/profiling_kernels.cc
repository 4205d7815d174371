#include "executor/profiling_kernels.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/trace_file.h"
#include "costmodels/dit_ops.h"
#include "core/stats.h"

namespace ditune::exec {
namespace {


}  // namespace

struct ProfilingKernels::Impl {
  struct Call {
    const char* kernel;
    double flops, bytes;
    int head_dim;
    std::unique_ptr<Event> start, end;
  };
  bool recording = false;
  std::unique_ptr<Event> origin;  // the start of the recording
  std::vector<Call> calls;
  Status first_error = Status::Ok();  // an event that failed to record
};

ProfilingKernels::ProfilingKernels(Kernels* inner)
    : impl_(std::make_unique<Impl>()), inner_(inner) {}
ProfilingKernels::~ProfilingKernels() = default;

void ProfilingKernels::Start() {
  impl_->calls.clear();
  impl_->first_error = Status::Ok();
  auto origin = device()->stream()->Record();
  if (origin.ok()) {
    impl_->origin = std::move(*origin);
  } else {
    impl_->origin.reset();
    impl_->first_error = origin.status();
  }
  impl_->recording = true;
}

StatusOr<KernelProfile> ProfilingKernels::Stop() {
  impl_->recording = false;
  DITUNE_RETURN_IF_ERROR(impl_->first_error);
  DITUNE_RETURN_IF_ERROR(device()->stream()->Synchronize());
  KernelProfile out;
  std::map<std::string, KernelProfileRow> rows;
  for (const auto& c : impl_->calls) {
    KernelProfileRow& r = rows[c.kernel];
    r.kernel = c.kernel;
    DITUNE_ASSIGN_OR_RETURN(double s, c.end->SecondsSince(*c.start));
    DITUNE_ASSIGN_OR_RETURN(double at, c.start->SecondsSince(*impl_->origin));
    ++r.calls;
    r.seconds += s;
    r.flops += c.flops;
    r.bytes += c.bytes;
    out.events.push_back({c.kernel, at, s, c.flops, c.bytes, c.head_dim});
  }
  impl_->calls.clear();
  for (auto& [name, r] : rows) out.rows.push_back(std::move(r));
  std::sort(out.rows.begin(), out.rows.end(), [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  return out;
}

// Runs `call` between two events on the stream while recording; just runs it otherwise.
template <typename F>
Status ProfilingKernels::Timed(const char* kernel, double flops, double bytes, F&& call, int head_dim) {
  if (!impl_->recording) return call();
  auto start = device()->stream()->Record();
  DITUNE_RETURN_IF_ERROR(call());
  auto end = device()->stream()->Record();
  if (!start.ok() || !end.ok()) {
    // The kernel ran; the profile is what failed: Stop() reports it.
    if (impl_->first_error.ok()) impl_->first_error = !start.ok() ? start.status() : end.status();
    return Status::Ok();
  }
  impl_->calls.push_back({kernel, flops, bytes, head_dim, std::move(*start), std::move(*end)});
  return Status::Ok();
}

Status ProfilingKernels::Gemm(const GemmArgs& a) {
  const double n = a.batch;
  const double flops =
      2.0 * n * static_cast<double>(a.m) * static_cast<double>(a.k) * static_cast<double>(a.n);
  const double bytes = n * static_cast<double>(inner_->element_bytes()) * static_cast<double>(a.m * a.k + a.k * a.n + a.m * a.n);
  const char* kernel =
      a.epilogue == Epilogue::kGelu ? kernel_names::kGemmGelu : kernel_names::kGemm;
  return Timed(kernel, flops, bytes, [&] { return inner_->Gemm(a); });
}

Status ProfilingKernels::Attention(const AttentionArgs& a) {
  const double w = static_cast<double>(a.heads) * a.head_dim * a.batch;
  const double q = static_cast<double>(a.q_rows), kv = static_cast<double>(a.kv_rows);
  return Timed(kernel_names::kAttention, 4.0 * q * kv * w, static_cast<double>(inner_->element_bytes()) * w * (2 * q + 2 * kv),
               [&] { return inner_->Attention(a); }, a.head_dim);
}

Status ProfilingKernels::MergeAttention(const AttentionMergeArgs& a) {
  const double elems = static_cast<double>(a.q_rows) * a.batch * a.heads * a.head_dim;
  // Bytes as the cost model counts a Ring merge: ten fp32 passes over the output.
  return Timed(kernel_names::kAttentionMerge, 0, 10 * 4.0 * elems,
               [&] { return inner_->MergeAttention(a); });
}

Status ProfilingKernels::NormModulate(const NormArgs& a) {
  const double elems = static_cast<double>(a.rows) * static_cast<double>(a.cols);
  return Timed(kernel_names::kNormModulate, 0, 2 * static_cast<double>(inner_->element_bytes()) * elems,
               [&] { return inner_->NormModulate(a); });
}

Status ProfilingKernels::GatedResidual(void* x, int64_t ldx, const float* gate, const void* y,
                                       int64_t ldy, int64_t rows, int64_t cols) {
  const double elems = static_cast<double>(rows) * static_cast<double>(cols);
  return Timed(kernel_names::kGatedResidual, 0, 3 * static_cast<double>(inner_->element_bytes()) * elems,
               [&] { return inner_->GatedResidual(x, ldx, gate, y, ldy, rows, cols); });
}

Status ProfilingKernels::Activate(Activation kind, const void* in, int64_t ld_in, void* out,
                                  int64_t ld_out, int64_t rows, int64_t cols) {
  const double elems = static_cast<double>(rows) * static_cast<double>(cols);
  const bool gelu = kind == Activation::kGelu;
  return Timed(gelu ? kernel_names::kGelu : kernel_names::kSwiGlu, 0,
               (gelu ? 2 : 3) * static_cast<double>(inner_->element_bytes()) * elems,
               [&] { return inner_->Activate(kind, in, ld_in, out, ld_out, rows, cols); });
}

Status ProfilingKernels::QkNormRope(void* qk, int64_t ld, int64_t rows, int heads, int head_dim,
                                    int64_t first_position) {
  const double elems = 2.0 * static_cast<double>(rows) * heads * head_dim;
  return Timed(kernel_names::kQkNormRope, 0, 2 * static_cast<double>(inner_->element_bytes()) * elems,
               [&] { return inner_->QkNormRope(qk, ld, rows, heads, head_dim, first_position); });
}

Status ProfilingKernels::Copy(void* dst, int64_t ld_dst, const void* src, int64_t ld_src,
                              int64_t rows, int64_t cols) {
  const double elems = static_cast<double>(rows) * static_cast<double>(cols);
  return Timed(kernel_names::kCopy, 0, 2 * static_cast<double>(inner_->element_bytes()) * elems,
               [&] { return inner_->Copy(dst, ld_dst, src, ld_src, rows, cols); });
}

Status ProfilingKernels::Zero(void* data, int64_t count) {
  return Timed("zero", 0, static_cast<double>(inner_->element_bytes()) * static_cast<double>(count),
               [&] { return inner_->Zero(data, count); });
}

Status ProfilingKernels::FillRandom(void* data, int64_t count, float stddev, uint64_t seed,
                                    uint64_t stream) {
  return Timed("fill_random", 0, static_cast<double>(inner_->element_bytes()) * static_cast<double>(count),
               [&] { return inner_->FillRandom(data, count, stddev, seed, stream); });
}

Status ProfilingKernels::EulerStep(float* x, void* xb, const void* pred, int64_t pred_stride,
                                   int64_t uncond_offset, bool guidance_on, float guidance,
                                   float dt, int prompts, int64_t count) {
  const double elems = static_cast<double>(prompts) * static_cast<double>(count);
  return Timed("euler_step", 0, (guidance_on ? 5 : 4) * static_cast<double>(inner_->element_bytes()) * elems, [&] {
    return inner_->EulerStep(x, xb, pred, pred_stride, uncond_offset, guidance_on, guidance, dt,
                             prompts, count);
  });
}

Status ProfilingKernels::Upload(const float* host, void* dev, int64_t count) {
  return Timed("transfer", 0, static_cast<double>(inner_->element_bytes()) * static_cast<double>(count),
               [&] { return inner_->Upload(host, dev, count); });
}

Status ProfilingKernels::UploadF32(const float* host, float* dev, int64_t count) {
  return Timed("transfer", 0, 4.0 * static_cast<double>(count),
               [&] { return inner_->UploadF32(host, dev, count); });
}

Status ProfilingKernels::Download(const void* dev, float* host, int64_t count) {
  return Timed("transfer", 0, static_cast<double>(inner_->element_bytes()) * static_cast<double>(count),
               [&] { return inner_->Download(dev, host, count); });
}

Status ProfilingKernels::DownloadF32(const float* dev, float* host, int64_t count) {
  return Timed("transfer", 0, 4.0 * static_cast<double>(count),
               [&] { return inner_->DownloadF32(dev, host, count); });
}

std::vector<Measurement> KernelMeasurements(const std::vector<KernelEvent>& events, const std::string& backend,
                                            const std::string& device, const std::string& run_id,
                                            const nlohmann::json& params) {
  // (kernel, FLOPs, bytes, head_dim) -> the calls' seconds, in first-seen order.
  std::map<std::tuple<std::string, double, double, int>, std::vector<double>> shapes;
  std::vector<std::tuple<std::string, double, double, int>> order;
  for (const auto& e : events) {
    const std::string k = e.kernel;
    const bool priced = k == kernel_names::kGemm || k == kernel_names::kAttention || IsKernelFitName(k);
    if (!priced || e.seconds <= 0) continue;
    auto key = std::make_tuple(k, e.flops, e.bytes, e.head_dim);
    auto [it, fresh] = shapes.try_emplace(key);
    if (fresh) order.push_back(key);
    it->second.push_back(e.seconds);
  }
  std::vector<Measurement> out;
  for (const auto& key : order) {
    std::vector<double> t = shapes[key];
    std::sort(t.begin(), t.end());
    const auto& [kernel, flops, bytes, head_dim] = key;
    Measurement m;
    m.source = MeasurementSource::kExecutor;
    m.kind = MeasurementKind::kOp;
    const bool gemm = kernel == kernel_names::kGemm || kernel == kernel_names::kGemmGelu;
    m.op = gemm ? "gemm" : kernel == kernel_names::kAttention ? "attention" : "elementwise";
    m.backend = backend;
    m.device = device;
    m.flops = Flops(flops);
    m.bytes = Bytes(bytes);
    m.median = Seconds(Median(t));
    m.p10 = Seconds(NearestRank(t, 0.1));
    m.p90 = Seconds(NearestRank(t, 0.9));
    m.samples = static_cast<int>(t.size());
    m.run_id = run_id;
    m.params = params.is_object() ? params : nlohmann::json::object();
    m.params["from"] = "profile";
    if (kernel != kernel_names::kGemm && kernel != kernel_names::kAttention) m.params["kernel"] = kernel;
    if (kernel == kernel_names::kAttention && head_dim > 0) m.params["head_dim"] = head_dim;
    out.push_back(std::move(m));
  }
  return out;
}

Status WriteKernelTrace(const std::vector<KernelEvent>& events, int rank, const std::string& path) {
  nlohmann::json out = nlohmann::json::array();
  out.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"args", {{"name", fmt::format("rank {}", rank)}}}});
  out.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 0}, {"args", {{"name", "stream"}}}});
  for (const auto& e : events) {
    out.push_back({{"name", e.kernel}, {"cat", "kernel"}, {"ph", "X"}, {"pid", rank}, {"tid", 0},
                   {"ts", e.start_s * 1e6}, {"dur", e.seconds * 1e6}});
  }
  return WriteTraceFile(out, path);
}

std::string RankTracePath(const std::string& path, int rank, int ranks) {
  if (ranks <= 1) return path;
  const std::filesystem::path p(path);
  return (p.parent_path() / fmt::format("{}.rank{}{}", p.stem().string(), rank, p.extension().string())).string();
}

}  // namespace ditune::exec
