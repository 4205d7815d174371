#include "executor/microbench.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "costmodels/comm_model.h"
#include "costmodels/dit_ops.h"
#include "core/stats.h"

namespace ditune::exec {
namespace {

using Clock = std::chrono::steady_clock;

Measurement Op(const std::string& op, double flops, double bytes, double seconds, int reps, nlohmann::json params) {
  Measurement m;
  m.source = MeasurementSource::kMicrobench;
  m.kind = MeasurementKind::kOp;
  m.op = op;
  m.backend = "cpu";
  m.device = "cpu";
  m.flops = Flops(flops);
  m.bytes = Bytes(bytes);
  m.median = m.p10 = m.p90 = Seconds(seconds);
  m.samples = reps;
  m.params = std::move(params);
  return m;
}

// Median device time of `f` over `reps` calls after one warm-up call.
template <typename F>
StatusOr<double> DeviceMedian(Device* d, int reps, F&& f) {
  DITUNE_RETURN_IF_ERROR(f());
  std::vector<std::unique_ptr<Event>> marks;
  DITUNE_ASSIGN_OR_RETURN(auto first, d->stream()->Record());
  marks.push_back(std::move(first));
  for (int i = 0; i < reps; ++i) {
    DITUNE_RETURN_IF_ERROR(f());
    DITUNE_ASSIGN_OR_RETURN(auto e, d->stream()->Record());
    marks.push_back(std::move(e));
  }
  DITUNE_RETURN_IF_ERROR(d->stream()->Synchronize());
  std::vector<double> t;
  for (size_t i = 1; i < marks.size(); ++i) {
    DITUNE_ASSIGN_OR_RETURN(double s, marks[i]->SecondsSince(*marks[i - 1]));
    t.push_back(s);
  }
  return Median(std::move(t));
}

// Median host seconds to issue `n` small kernels (GEMMs and norms alternating, as in a DiT
// block) without waiting for them, over `reps` rounds; the device drains between rounds so
// the launch queue never fills and the host, not the device, is timed.
StatusOr<double> HostLaunchMedian(Kernels* kernels, int reps, int n, void* buf, const float* vec) {
  constexpr int64_t kDim = 64;
  GemmArgs g;
  g.a = buf;
  g.b = static_cast<char*>(buf) + 2 * kDim * kDim;
  g.c = static_cast<char*>(buf) + 4 * kDim * kDim;
  g.lda = g.ldb = g.ldc = kDim;
  g.m = g.k = g.n = kDim;
  NormArgs nm;
  nm.x = g.c;
  nm.y = buf;
  nm.ldx = nm.ldy = kDim;
  nm.rows = nm.cols = kDim;
  nm.shift = vec;
  nm.scale = vec + 16384;
  auto round = [&]() -> StatusOr<double> {
    DITUNE_RETURN_IF_ERROR(kernels->device()->stream()->Synchronize());
    const auto start = Clock::now();
    for (int i = 0; i < n; ++i) DITUNE_RETURN_IF_ERROR(i % 2 == 0 ? kernels->Gemm(g) : kernels->NormModulate(nm));
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    DITUNE_RETURN_IF_ERROR(kernels->device()->stream()->Synchronize());
    return s;
  };
  DITUNE_RETURN_IF_ERROR(round().status());  // warm-up: plans, caches
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    DITUNE_ASSIGN_OR_RETURN(double s, round());
    t.push_back(s);
  }
  return Median(std::move(t));
}

// The head dimension the elementwise sweep uses for per-head kernels over `cols` columns.
int MergeHeadDim(int64_t cols) { return cols % 128 == 0 ? 128 : 64; }

}  // namespace

StatusOr<std::vector<Measurement>> KernelSweep(Kernels* kernels, const std::string& device_id, int reps,
                                               const Progress& progress) {
  if (reps < 1) return Status::InvalidArgument("reps must be >= 1");
  Device* d = kernels->device();
  const bool big = d->props().async;
  struct G {
    int64_t m, k, n;
  };
  std::vector<G> gemms;
  // On the host (the ref kernels) the sizes span what the tiny test models run at 256 to
  // 512 pixels a side, so a prediction of such a run interpolates rather than extrapolates.
  const std::vector<int64_t> ms =
      big ? std::vector<int64_t>{64, 256, 1024, 4096, 16384} : std::vector<int64_t>{16, 64, 256, 1024, 4096};
  const std::vector<std::pair<int64_t, int64_t>> kns =
      big ? std::vector<std::pair<int64_t, int64_t>>{{1152, 3456}, {3072, 9216}, {3072, 12288}, {12288, 3072}}
          : std::vector<std::pair<int64_t, int64_t>>{{64, 192}, {64, 256}, {256, 64}};
  for (int64_t m : ms) {
    for (auto [k, n] : kns) gemms.push_back({m, k, n});
  }
  struct A {
    int64_t q, kv;
    int heads, d;
  };
  std::vector<A> attns;
  const std::vector<int> dims = big ? std::vector<int>{64, 72, 88, 128} : std::vector<int>{16, 64};
  const std::vector<std::pair<int64_t, int64_t>> seqs =
      big ? std::vector<std::pair<int64_t, int64_t>>{{256, 256}, {1024, 1024}, {4096, 300}, {4096, 4096}, {4608, 4608},
                                                     {16384, 16384}}
          : std::vector<std::pair<int64_t, int64_t>>{{32, 32}, {64, 128}, {256, 256}, {1024, 1024}};
  for (int dim : dims) {
    for (auto [q, kv] : seqs) attns.push_back({q, kv, big ? 16 : 2, dim});
  }
  const std::vector<std::pair<int64_t, int64_t>> norms =
      big ? std::vector<std::pair<int64_t, int64_t>>{{1024, 1152}, {4096, 1152}, {4096, 3072}, {16384, 3072}}
          : std::vector<std::pair<int64_t, int64_t>>{{64, 64}, {256, 64}, {1024, 64}, {4096, 64}};
  // Buffers for the largest case of each kind, filled once.
  int64_t elems = 0;
  for (const auto& g : gemms) elems = std::max(elems, g.m * g.k + g.k * g.n + g.m * g.n);
  for (const auto& a : attns) elems = std::max(elems, (2 * a.q + 2 * a.kv) * a.heads * a.d);
  // The widest elementwise case: SwiGLU reads rows x 8 cols and writes rows x 4 cols.
  for (auto [r, c] : norms) elems = std::max(elems, 12 * r * c);
  int64_t lse_elems = 0;  // attention merge: two log-sum-exp vectors of rows x heads
  for (auto [r, c] : norms) lse_elems = std::max(lse_elems, 2 * r * c / MergeHeadDim(c));
  const int64_t eb = kernels->element_bytes();
  DITUNE_ASSIGN_OR_RETURN(auto buf, d->Alloc(elems * eb));
  DITUNE_ASSIGN_OR_RETURN(auto vec, d->Alloc(2 * 16384 * 4));
  DITUNE_ASSIGN_OR_RETURN(auto lse, d->Alloc(lse_elems * 4));
  DITUNE_RETURN_IF_ERROR(kernels->FillRandom(buf->data(), elems, 0.5f, 11, 1));
  // The f32 vectors zeroed as act elements of the same bytes.
  DITUNE_RETURN_IF_ERROR(kernels->Zero(vec->data(), 2 * 16384 * 4 / eb));
  DITUNE_RETURN_IF_ERROR(kernels->Zero(lse->data(), lse_elems * 4 / eb));
  auto at = [&](int64_t e) { return static_cast<char*>(buf->data()) + eb * e; };
  // Host time to issue kernels back to back (a GPU's stream is asynchronous): what the
  // engine's host spends per kernel while the device runs ahead.
  const std::vector<int> launches = big ? std::vector<int>{32, 128, 512} : std::vector<int>{};
  const int total = static_cast<int>(gemms.size() + attns.size() + norms.size() + launches.size());
  int done = 0;
  std::vector<Measurement> out;
  auto op = [&](const std::string& name, double flops, double bytes, double seconds, nlohmann::json params) {
    Measurement m = Op(name, flops, bytes, seconds, reps, std::move(params));
    m.backend = std::string(kernels->name());
    m.device = device_id;
    out.push_back(std::move(m));
  };
  for (const auto& g : gemms) {
    GemmArgs a;
    a.a = at(0);
    a.b = at(g.m * g.k);
    a.c = at(g.m * g.k + g.k * g.n);
    a.lda = g.k;
    a.ldb = a.ldc = g.n;
    a.m = g.m;
    a.k = g.k;
    a.n = g.n;
    DITUNE_ASSIGN_OR_RETURN(double t, DeviceMedian(d, reps, [&] { return kernels->Gemm(a); }));
    op("gemm", 2.0 * g.m * g.k * g.n, kElementBytes * (g.m * g.k + g.k * g.n + g.m * g.n), t,
       {{"m", g.m}, {"k", g.k}, {"n", g.n}});
    if (g.n > g.k) {
      // An up-projection with the MLP's GELU in its epilogue (the engine's fused MLP-in).
      a.epilogue = Epilogue::kGelu;
      DITUNE_ASSIGN_OR_RETURN(double te, DeviceMedian(d, reps, [&] { return kernels->Gemm(a); }));
      op("gemm", 2.0 * g.m * g.k * g.n, kElementBytes * (g.m * g.k + g.k * g.n + g.m * g.n), te,
         {{"m", g.m}, {"k", g.k}, {"n", g.n}, {"kernel", kernel_names::kGemmGelu}});
    }
    if (progress) progress(++done, total);
  }
  for (const auto& x : attns) {
    const int64_t w = static_cast<int64_t>(x.heads) * x.d;
    AttentionArgs a;
    a.q = at(0);
    a.k = at(x.q * w);
    a.v = at(x.q * w + x.kv * w);
    a.o = at(x.q * w + 2 * x.kv * w);
    a.ldq = a.ldk = a.ldv = a.ldo = w;
    a.q_rows = x.q;
    a.kv_rows = x.kv;
    a.heads = x.heads;
    a.head_dim = x.d;
    DITUNE_ASSIGN_OR_RETURN(double t, DeviceMedian(d, reps, [&] { return kernels->Attention(a); }));
    op("attention", 4.0 * x.q * x.kv * w, kElementBytes * w * (2.0 * x.q + 2.0 * x.kv), t,
       {{"q", x.q}, {"kv", x.kv}, {"heads", x.heads}, {"head_dim", x.d}});
    if (progress) progress(++done, total);
  }
  for (const auto& shape : norms) {
    const int64_t rows = shape.first, cols = shape.second;  // named: lambdas below capture them
    const auto* shift = static_cast<const float*>(vec->data());
    NormArgs n;
    n.x = at(0);
    n.y = at(rows * cols);
    n.ldx = n.ldy = cols;
    n.rows = rows;
    n.cols = cols;
    n.shift = shift;
    n.scale = shift + 16384;
    DITUNE_ASSIGN_OR_RETURN(double t, DeviceMedian(d, reps, [&] { return kernels->NormModulate(n); }));
    op("elementwise", 8.0 * rows * cols, 2.0 * kElementBytes * rows * cols, t,
       {{"kernel", "norm_modulate"}, {"rows", rows}, {"cols", cols}});
    DITUNE_ASSIGN_OR_RETURN(double tg, DeviceMedian(d, reps, [&] {
                              return kernels->Activate(Activation::kGelu, at(0), 4 * cols, at(4 * rows * cols), 4 * cols, rows, 4 * cols);
                            }));
    op("elementwise", 8.0 * rows * 4 * cols, 2.0 * kElementBytes * rows * 4 * cols, tg,
       {{"kernel", kernel_names::kGelu}, {"rows", rows}, {"cols", 4 * cols}});
    // The rest of the engine's elementwise kernels at the same rows and widths, their bytes
    // counted as the cost model counts its ops' (dit_ops.cc): passes x bf16 elements.
    DITUNE_ASSIGN_OR_RETURN(double ts, DeviceMedian(d, reps, [&] {
                              return kernels->Activate(Activation::kSwiGlu, at(0), 8 * cols, at(8 * rows * cols),
                                                       4 * cols, rows, 4 * cols);
                            }));
    op("elementwise", 12.0 * rows * 4 * cols, 3.0 * kElementBytes * rows * 4 * cols, ts,
       {{"kernel", kernel_names::kSwiGlu}, {"rows", rows}, {"cols", 4 * cols}});
    DITUNE_ASSIGN_OR_RETURN(double tr, DeviceMedian(d, reps, [&] {
                              return kernels->GatedResidual(at(0), cols, shift, at(rows * cols), cols, rows, cols);
                            }));
    op("elementwise", 2.0 * rows * cols, 3.0 * kElementBytes * rows * cols, tr,
       {{"kernel", kernel_names::kGatedResidual}, {"rows", rows}, {"cols", cols}});
    const int hd = MergeHeadDim(cols);
    DITUNE_ASSIGN_OR_RETURN(double tq, DeviceMedian(d, reps, [&] {
                              return kernels->QkNormRope(at(0), 2 * cols, rows, static_cast<int>(cols / hd), hd, 0);
                            }));
    op("elementwise", 20.0 * rows * 2 * cols, 2.0 * kElementBytes * rows * 2 * cols, tq,
       {{"kernel", kernel_names::kQkNormRope}, {"rows", rows}, {"cols", 2 * cols}, {"head_dim", hd}});
    DITUNE_ASSIGN_OR_RETURN(double tc, DeviceMedian(d, reps, [&] {
                              return kernels->Copy(at(2 * rows * cols), cols, at(0), cols, rows, cols);
                            }));
    op("elementwise", 0, 2.0 * kElementBytes * rows * cols, tc,
       {{"kernel", kernel_names::kCopy}, {"rows", rows}, {"cols", cols}});
    AttentionMergeArgs mg;
    mg.o = at(0);
    mg.ldo = cols;
    mg.o2 = at(rows * cols);
    mg.ldo2 = cols;
    mg.lse = static_cast<float*>(lse->data());
    mg.lse2 = static_cast<float*>(lse->data()) + rows * (cols / hd);
    mg.q_rows = rows;
    mg.heads = static_cast<int>(cols / hd);
    mg.head_dim = hd;
    DITUNE_ASSIGN_OR_RETURN(double tm, DeviceMedian(d, reps, [&] { return kernels->MergeAttention(mg); }));
    // Bytes as the model's Ring merge counts them: ten fp32 passes over the output.
    op("elementwise", 0, 10.0 * 4.0 * rows * cols, tm,
       {{"kernel", kernel_names::kAttentionMerge}, {"rows", rows}, {"cols", cols}, {"head_dim", hd}});
    if (progress) progress(++done, total);
  }
  for (int n : launches) {
    DITUNE_ASSIGN_OR_RETURN(double t, HostLaunchMedian(kernels, reps, n, at(0), static_cast<float*>(vec->data())));
    op("launch", 0, 0, t, {{"launches", n}, {"kernels", "gemm 64x64x64 + norm_modulate 64x64, alternating"}});
    if (progress) progress(++done, total);
  }
  return out;
}


Status CheckCommSweepFlags(const Catalog& catalog, std::string_view link_id, int iters, bool device_memory,
                           std::string_view backend) {
  if (iters < 1 || iters > kMaxCommSweepIters) {
    return Status::InvalidArgument(
        fmt::format("--iters {}: give 1 to {} timed iterations per size", iters, kMaxCommSweepIters));
  }
  auto link = catalog.Link(link_id);
  if (!link.ok()) return link.status().WithContext("--link");
  const bool host_link = (*link)->topology == LinkTopology::kSharedMemory;
  if (!device_memory && !host_link && (*link)->scope == LinkScope::kIntra) {
    return Status::InvalidArgument(fmt::format(
        "--link {}: the {} ranks move host memory, so they measure the host's shared memory, not {} between GPUs; "
        "use --link shm here, or --comm nccl on GPUs (one per rank) to measure {}",
        link_id, backend, (*link)->name, link_id));
  }
  if (device_memory && host_link) {
    return Status::InvalidArgument(fmt::format(
        "--link {}: the {} ranks move GPU memory; name the link between the GPUs (nvlink4, pcie4, ...)", link_id,
        backend));
  }
  return Status::Ok();
}

StatusOr<std::vector<CollectiveRow>> CommSweep(Comm* comm, const std::string& link, int iters,
                                               std::vector<Measurement>* measurements, const Progress& progress,
                                               Device* device) {
  const int n = comm->size();
  if (n < 2) return Status::InvalidArgument("a communication sweep needs at least 2 ranks (mpirun -np 2 ...)");
  if (iters < 1) return Status::InvalidArgument(fmt::format("a communication sweep needs iters >= 1 (got {})", iters));
  if (comm->device_memory() && device == nullptr) {
    return Status::InvalidArgument(fmt::format("the {} communicator needs device buffers", comm->backend()));
  }
  Comm* host = comm->host();
  if (host == nullptr || host->size() != n) return Status::Internal("no host communicator over the sweep's ranks");
  std::vector<CollectiveRow> rows;
  const std::vector<Collective> ops = {Collective::kAllToAll, Collective::kSendRecv, Collective::kAllGather,
                                       Collective::kAllReduce};
  std::vector<double> sizes;
  for (double b = 1024; b <= 64.0 * 1024 * 1024; b *= 4) sizes.push_back(b);
  const int total = static_cast<int>(ops.size() * sizes.size());
  int done = 0;
  for (Collective c : ops) {
    for (double size : sizes) {
      // nccl-tests sizes: all-to-all and all-gather move `size` bytes per rank in total.
      const size_t count = static_cast<size_t>(size / sizeof(float));
      const size_t chunk = std::max<size_t>(1, count / n);
      const size_t elems = std::max(count, chunk * n);
      std::vector<float> host_send, host_recv;
      std::unique_ptr<Buffer> dev_send, dev_recv;
      float* send_p = nullptr;
      float* recv_p = nullptr;
      if (comm->device_memory()) {
        DITUNE_ASSIGN_OR_RETURN(dev_send, device->Alloc(static_cast<int64_t>(elems * sizeof(float))));
        DITUNE_ASSIGN_OR_RETURN(dev_recv, device->Alloc(static_cast<int64_t>(elems * sizeof(float))));
        send_p = static_cast<float*>(dev_send->data());
        recv_p = static_cast<float*>(dev_recv->data());
      } else {
        host_send.assign(elems, 1.0f);
        host_recv.assign(elems, 0.0f);
        send_p = host_send.data();
        recv_p = host_recv.data();
      }
      auto once = [&]() -> Status {
        switch (c) {
          case Collective::kAllToAll: return comm->AllToAll(send_p, recv_p, chunk);
          case Collective::kAllGather: return comm->AllGather(send_p, recv_p, chunk);
          case Collective::kAllReduce: return comm->AllReduceSum(send_p, count);
          case Collective::kReduceScatter:
            return Status::NotSupported("reduce_scatter is measured by nccl-tests (calibrate ingest), not here");
          case Collective::kSendRecv: {
            // Pairs (0,1), (2,3), ...: each sends `size` bytes to its partner.
            const int me = comm->rank(), peer = me ^ 1;
            if (peer >= n) return Status::Ok();
            DITUNE_ASSIGN_OR_RETURN(auto r, comm->Irecv(recv_p, count, peer, 7));
            DITUNE_ASSIGN_OR_RETURN(auto s, comm->Isend(send_p, count, peer, 7));
            DITUNE_RETURN_IF_ERROR(r->Wait());
            return s->Wait();
          }
        }
        return Status::Ok();
      };
      DITUNE_RETURN_IF_ERROR(once());  // warm-up
      std::vector<double> slowest;
      for (int i = 0; i < iters; ++i) {
        DITUNE_RETURN_IF_ERROR(comm->Barrier());
        const double t0 = comm->Now();
        DITUNE_RETURN_IF_ERROR(once());
        float t = static_cast<float>(comm->Now() - t0);
        std::vector<float> all(static_cast<size_t>(n));
        DITUNE_RETURN_IF_ERROR(host->AllGather(&t, all.data(), 1));
        slowest.push_back(*std::max_element(all.begin(), all.end()));
      }
      std::sort(slowest.begin(), slowest.end());
      CollectiveRow row;
      row.op = std::string(CollectiveName(c));
      row.bytes = size;
      row.seconds = std::max(1e-9, slowest[slowest.size() / 2]);
      row.algbw_gbps = size / row.seconds / 1e9;
      row.busbw_gbps = row.algbw_gbps * BusFactor(c, c == Collective::kSendRecv ? 2 : n);
      rows.push_back(row);
      if (measurements != nullptr) {
        Measurement m;
        m.source = MeasurementSource::kMicrobench;
        m.kind = MeasurementKind::kCollective;
        m.op = row.op;
        m.backend = std::string(comm->backend());
        m.device = "cpu";
        m.ranks = c == Collective::kSendRecv ? 2 : n;
        m.link = link;
        m.bytes = Bytes(size);
        m.median = Seconds(row.seconds);
        m.p10 = Seconds(slowest.front());
        m.p90 = Seconds(slowest.back());
        m.samples = iters;
        m.params = {{"algbw_gbps", row.algbw_gbps}, {"busbw_gbps", row.busbw_gbps}};
        measurements->push_back(std::move(m));
      }
      if (progress) progress(++done, total);
    }
  }
  return rows;
}

}  // namespace ditune::exec
