// The DiT engine on the ref kernels: on one device it computes what it computes on the cpu
// kernels (bf16 tolerance); for any rank of a plan its kernels do exactly the FLOPs the cost
// models price for that rank; every access it makes stays inside its buffers (the ref
// kernels check each one).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <tuple>

#include "core/catalog.h"
#include "core/config_rules.h"
#include "costmodels/dit_ops.h"
#include "executor/comm.h"
#include "executor/cpu_device.h"
#include "executor/engine.h"
#include "executor/kernels.h"
#include "executor/profiling_kernels.h"

namespace ditune::exec {
namespace {

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

Workload Tiny(const char* model, int size, int steps, int batch) {
  const ModelSpec& m = **Cat().Model(model);
  return {model, size, size, m.modality == Modality::kVideo ? 9 : 1, steps, batch, OutputType::kLatent};
}

// What the denoising loop added to prompt p's initial noise: the blocks' contribution, which
// the final latent (dominated by the noise) would hide.
Mat Delta(const Mat& latent, const ModelSpec& m, const Workload& w, int p) {
  auto tokens = ComputeTokenGeometry(m, w);
  const int64_t lat = static_cast<int64_t>(m.latent_channels) * m.patch_spatial * m.patch_spatial * m.patch_temporal;
  return latent - RandomMat(tokens->image_tokens(), lat, 1.0f, 42, 1000 + static_cast<uint64_t>(p));
}

// One generation of `config` (one device) on `backend`'s kernels.
EngineResult Generate(const char* backend, const ModelSpec& m, const Workload& w, const char* config) {
  auto dev = NewCpuDevice();
  auto kernels = CreateKernels(backend, dev.get());
  EXPECT_TRUE(kernels.ok()) << kernels.status().ToString();
  auto work = EngineWorkFor(m, w, *ParseParallelConfig(config), 0);
  EXPECT_TRUE(work.ok()) << work.status().ToString();
  auto engine = DitEngine::Create(m, w, *work, kernels->get(), EngineOptions{});
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  auto out = (*engine)->Generate();
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return std::move(out).value();
}

// The one engine on two backends: the ref kernels (bf16 storage, every access checked) and
// the cpu kernels (fp32, the per-ISA Eigen kernels) compute the same model.
TEST(EngineTest, OneDeviceRefAndCpuKernelsAgree) {
  for (const auto& [model, batch] : std::vector<std::pair<const char*, int>>{
           {"tiny-pixart", 1}, {"tiny-pixart", 2}, {"tiny-sd3", 1}, {"tiny-flux", 2}, {"tiny-video", 1}}) {
    SCOPED_TRACE(model);
    const ModelSpec& m = **Cat().Model(model);
    const Workload w = Tiny(model, 64, 3, batch);
    auto work = EngineWorkFor(m, w, ParallelConfig{}, 0);
    ASSERT_TRUE(work.ok()) << work.status().ToString();
    EXPECT_TRUE(work->exact);
    const EngineResult ref = Generate("ref", m, w, ""), cpu = Generate("cpu", m, w, "");
    ASSERT_EQ(ref.latents.size(), static_cast<size_t>(batch));
    ASSERT_EQ(cpu.latents.size(), static_cast<size_t>(batch));
    EXPECT_EQ(cpu.step_seconds.size(), 3u);
    for (int p = 0; p < batch; ++p) {
      const Mat d = Delta(cpu.latents[p], m, w, p);
      EXPECT_GT(d.norm(), 0.0f);
      EXPECT_LE(MaxRelativeError(Delta(ref.latents[p], m, w, p), d), 2e-2) << "prompt " << p;
    }
  }
}

// PipeFusion on one device: patches attend over one-step-stale K/V of the others (zero before
// the first step when there is no warm-up), the same on both host backends, and different
// from the synchronous run only by the staleness.
void CheckStalePatches(const char* model) {
  SCOPED_TRACE(model);
  const ModelSpec& m = **Cat().Model(model);
  const Workload w = Tiny(model, 64, 3, 2);
  const char* kStale = "patches=4,warmup=0";
  const EngineResult ref = Generate("ref", m, w, kStale), cpu = Generate("cpu", m, w, kStale);
  const EngineResult sync = Generate("cpu", m, w, "");
  ASSERT_EQ(cpu.latents.size(), 2u);
  for (int p = 0; p < 2; ++p) {
    const Mat got = Delta(cpu.latents[p], m, w, p);
    EXPECT_LE(MaxRelativeError(Delta(ref.latents[p], m, w, p), got), 2e-2) << "prompt " << p;
    // The same kernels on the same rows differ only by the staleness (the tiny model's blocks
    // add little to the latent, hence the small but clearly nonzero difference; fp32 rounding
    // is far below it).
    EXPECT_GT(MaxRelativeError(got, Delta(sync.latents[p], m, w, p)), 1e-3) << "prompt " << p;
  }
}

// For every block family: cross blocks, and joint and single blocks, whose first patch of a
// step carries the text.
TEST(EngineTest, PipelinedPatchesAttendOverStaleKv) { CheckStalePatches("tiny-pixart"); }
TEST(EngineTest, PipelinedJointPatchesAttendOverStaleKv) { CheckStalePatches("tiny-sd3"); }
TEST(EngineTest, PipelinedSinglePatchesAttendOverStaleKv) { CheckStalePatches("tiny-flux"); }

// GEMM and attention FLOPs of one steady step of rank `rank`, as the cost models count them
// (modulation and time embedding, one-row GEMMs the engine counts apart, left out).
void ExpectedFlops(const ModelSpec& m, const EngineWork& work, double* gemm, double* attn) {
  const RankWork& rw = work.steady;
  *gemm = *attn = 0;
  for (int b = work.first_block; b < work.first_block + work.blocks; ++b) {
    for (const OpCost& op : BlockOps(m, m.family_of(b), rw)) {
      if (op.name.find("modulation") != std::string::npos) continue;
      if (op.cls == OpClass::kGemm) *gemm += op.flops.value();
      if (op.cls == OpClass::kAttention) *attn += op.flops.value();
    }
  }
  const bool first = work.first_block == 0, last = work.first_block + work.blocks == m.num_blocks();
  for (const OpCost& op : StepOverheadOps(m, rw)) {
    if (op.name == "time_embed" || (op.name == "patch_embed" && !first) || (op.name == "final_proj" && !last)) continue;
    if (op.cls == OpClass::kGemm) *gemm += op.flops.value();
  }
  *gemm *= rw.patches;
  *attn *= rw.patches;
}

TEST(EngineTest, EveryRankDoesTheFlopsTheCostModelsPrice) {
  struct Case {
    const char* model;
    const char* config;
  };
  const std::vector<Case> cases = {
      {"tiny-pixart", ""},          {"tiny-pixart", "ulysses=2"}, {"tiny-pixart", "ring=2"},
      {"tiny-pixart", "tp=2"},      {"tiny-pixart", "cfg=2"},     {"tiny-pixart", "pipefusion=2,warmup=0"},
      {"tiny-pixart", "ulysses=2,ring=2,cfg=2"}, {"tiny-pixart", "distrifusion=2"}, {"tiny-pixart", "dp=2"},
      {"tiny-sd3", ""},             {"tiny-sd3", "ulysses=4"},    {"tiny-sd3", "ring=2,tp=2"},
      {"tiny-sd3", "pipefusion=2,patches=4,warmup=0"},
      {"tiny-flux", ""},            {"tiny-flux", "ulysses=2"},   {"tiny-flux", "ring=4"},
      {"tiny-flux", "pipefusion=3,patches=4,warmup=0"}, {"tiny-flux", "tp=2"},
  };
  for (const Case& c : cases) {
    const ModelSpec& m = **Cat().Model(c.model);
    const Workload w = Tiny(c.model, 128, 1, 2);
    const ParallelConfig config = *ParseParallelConfig(c.config);
    auto tokens = ComputeTokenGeometry(m, w);
    ASSERT_TRUE(tokens.ok());
    const Status valid = ValidateConfig({&m, *tokens, w.steps, w.batch, config.world_size()}, config);
    ASSERT_TRUE(valid.ok()) << c.model << " " << c.config << ": " << valid.ToString();
    for (int r = 0; r < config.world_size(); ++r) {
      auto work = EngineWorkFor(m, w, config, r);
      ASSERT_TRUE(work.ok()) << work.status().ToString();
      auto dev = NewCpuDevice();
      auto kernels = CreateKernels("ref", dev.get());
      ASSERT_TRUE(kernels.ok());
      auto engine = DitEngine::Create(m, w, *work, kernels->get(), EngineOptions{});
      ASSERT_TRUE(engine.ok()) << c.model << " " << c.config << " rank " << r << ": " << engine.status().ToString();
      auto before = RefKernelCounts(kernels->get());
      ASSERT_TRUE(before.ok());
      auto out = (*engine)->Generate();
      ASSERT_TRUE(out.ok()) << c.model << " '" << c.config << "' rank " << r << ": " << out.status().ToString();
      auto after = RefKernelCounts(kernels->get());
      double gemm = 0, attn = 0;
      ExpectedFlops(m, *work, &gemm, &attn);
      EXPECT_NEAR(after->gemm_flops - before->gemm_flops, gemm, 1e-9 * gemm) << c.model << " '" << c.config << "' rank " << r;
      EXPECT_NEAR(after->attention_flops - before->attention_flops, attn, 1e-9 * attn)
          << c.model << " '" << c.config << "' rank " << r;
      EXPECT_EQ(out->latents.empty(), config.world_size() > 1 || config.patches > 1);
    }
  }
}

// The profiler passes every call through unchanged, and while recording it sees each kernel
// the engine runs: the GEMM FLOPs the ref kernels count, a time for every call, nothing when
// not recording.
TEST(EngineTest, TheKernelProfileSeesEveryKernelOfTheLoop) {
  for (const char* model : {"tiny-pixart", "tiny-flux"}) {
    SCOPED_TRACE(model);
    const ModelSpec& m = **Cat().Model(model);
    const Workload w = Tiny(model, 64, 2, 1);
    auto work = EngineWorkFor(m, w, ParallelConfig{}, 0);
    ASSERT_TRUE(work.ok());
    auto dev = NewCpuDevice();
    auto plain = CreateKernels("ref", dev.get());
    ASSERT_TRUE(plain.ok());
    ProfilingKernels profiled(plain->get());
    EXPECT_EQ(profiled.name(), "ref");
    auto engine = DitEngine::Create(m, w, *work, &profiled, EngineOptions{});
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    auto quiet = (*engine)->Generate();  // not recording
    ASSERT_TRUE(quiet.ok());
    auto nothing = profiled.Stop();
    ASSERT_TRUE(nothing.ok());
    EXPECT_TRUE(nothing->rows.empty());
    EXPECT_TRUE(nothing->events.empty());

    auto before = RefKernelCounts(plain->get());
    profiled.Start();
    auto out = (*engine)->Generate();
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    auto profile = profiled.Stop();
    ASSERT_TRUE(profile.ok()) << profile.status().ToString();
    const std::vector<KernelProfileRow>* rows = &profile->rows;
    // The timeline: every call once, in issue order, one after another on the one stream.
    int64_t calls = 0;
    for (const auto& r : *rows) calls += r.calls;
    ASSERT_EQ(static_cast<int64_t>(profile->events.size()), calls);
    for (size_t i = 1; i < profile->events.size(); ++i) {
      const KernelEvent& a = profile->events[i - 1];
      EXPECT_GE(profile->events[i].start_s, a.start_s + a.seconds - 1e-9);
    }
    EXPECT_GE(profile->events.front().start_s, 0.0);
    auto after = RefKernelCounts(plain->get());
    double gemm_flops = 0, attention_flops = 0, kernels_s = 0;
    int64_t gemms = 0, attentions = 0;
    std::set<std::string> names;
    for (const auto& r : *rows) {
      names.insert(r.kernel);
      EXPECT_GT(r.calls, 0) << r.kernel;
      EXPECT_GT(r.seconds, 0) << r.kernel;
      kernels_s += r.seconds;
      if (r.kernel == kernel_names::kGemm || r.kernel == kernel_names::kGemmGelu) {
        gemm_flops += r.flops;
        gemms += r.calls;
      }
      if (r.kernel == kernel_names::kAttention) {
        attention_flops += r.flops;
        attentions += r.calls;
      }
    }
    for (size_t i = 1; i < rows->size(); ++i) EXPECT_GE((*rows)[i - 1].seconds, (*rows)[i].seconds);
    const double counted = (after->gemm_flops - before->gemm_flops) + (after->gemv_flops - before->gemv_flops);
    EXPECT_NEAR(gemm_flops, counted, 1e-9 * counted);
    EXPECT_EQ(gemms, after->gemms - before->gemms);
    EXPECT_NEAR(attention_flops, after->attention_flops - before->attention_flops, 1e-9 * attention_flops);
    EXPECT_EQ(attentions, after->attentions - before->attentions);
    // The non-gated MLP runs its GELU in the up-projection's epilogue.
    EXPECT_TRUE(names.count(kernel_names::kGemmGelu));
    EXPECT_TRUE(names.count(kernel_names::kNormModulate));
    EXPECT_TRUE(names.count(kernel_names::kGatedResidual));
    EXPECT_EQ(names.count(kernel_names::kQkNormRope), m.num_blocks(BlockFamily::kCross) == m.num_blocks() ? 0u : 1u);
    EXPECT_LE(kernels_s, out->dit_seconds * 1.05);

    // As measurements: one per priced kernel and shape, every priced call counted once; the
    // loop's bookkeeping (transfers, the Euler step) is not among them.
    const auto meas = KernelMeasurements(profile->events, "ref", "cpu", "run-x", {{"model", model}});
    int64_t priced_calls = 0;
    for (const auto& e : profile->events) {
      const std::string k = e.kernel;
      priced_calls += k == kernel_names::kGemm || k == kernel_names::kAttention || IsKernelFitName(k);
    }
    int64_t samples = 0;
    std::set<std::tuple<std::string, double, double>> shapes;
    for (const auto& x : meas) {
      EXPECT_TRUE(x.Validate().ok()) << x.Validate().ToString();
      EXPECT_EQ(x.source, MeasurementSource::kExecutor);
      EXPECT_EQ(x.params["model"], model);
      EXPECT_EQ(x.params["from"], "profile");
      EXPECT_LE(x.p10.value(), x.median.value());
      EXPECT_LE(x.median.value(), x.p90.value());
      samples += x.samples;
      const std::string kernel = x.params.value("kernel", x.op);
      EXPECT_TRUE(shapes.insert({kernel, x.flops.value(), x.bytes.value()}).second) << kernel << " twice";
      EXPECT_NE(kernel, "euler_step");
      EXPECT_NE(kernel, "transfer");
      if (x.op == "attention") {
        EXPECT_EQ(x.params["head_dim"], m.head_dim);
      }
    }
    EXPECT_EQ(samples, priced_calls);
    EXPECT_FALSE(shapes.empty());
  }
}

// The estimate `run` refuses too-large runs by, against the device's high-water mark: never
// below it, and not so far above that runs that fit are refused.
TEST(EngineTest, EngineBytesBoundsThePeak) {
  struct Case {
    const char* model;
    const char* config;
    int size, batch;
  };
  for (const Case& c : std::vector<Case>{{"tiny-pixart", "", 256, 2},
                                         {"tiny-sd3", "patches=4,warmup=1", 256, 1},
                                         {"tiny-flux", "patches=2,warmup=0", 256, 1},
                                         {"tiny-sd3", "ulysses=2,tp=2", 256, 2},
                                         {"tiny-flux", "ring=2,pipefusion=2,patches=2", 256, 1},
                                         {"tiny-video", "distrifusion=2", 128, 1}}) {
    const ModelSpec& m = **Cat().Model(c.model);
    const Workload w = Tiny(c.model, c.size, 2, c.batch);
    const ParallelConfig config = *ParseParallelConfig(c.config);
    for (int r = 0; r < config.world_size(); r += std::max(1, config.world_size() - 1)) {
      auto dev = NewCpuDevice();
      auto kernels = CreateKernels("ref", dev.get());
      ASSERT_TRUE(kernels.ok());
      auto work = EngineWorkFor(m, w, config, r);
      ASSERT_TRUE(work.ok()) << work.status().ToString();
      EngineOptions opt;
      auto engine = DitEngine::Create(m, w, *work, kernels->get(), opt);
      ASSERT_TRUE(engine.ok()) << engine.status().ToString();
      auto out = (*engine)->Generate();
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      const int64_t estimate = EngineBytes(m, w, *work, opt, (*kernels)->element_bytes());
      EXPECT_GE(estimate, out->peak_bytes) << c.model << " '" << c.config << "' rank " << r;
      EXPECT_LE(estimate, 3 * out->peak_bytes) << c.model << " '" << c.config << "' rank " << r;
      if (std::getenv("DITUNE_TEST_VERBOSE") != nullptr) {
        std::printf("%s '%s' rank %d: peak %lld B, estimate %lld B\n", c.model, c.config, r,
                    static_cast<long long>(out->peak_bytes), static_cast<long long>(estimate));
      }
    }
  }
}

TEST(EngineTest, WorkOfARankOutsideThePlanIsRefused) {
  const ModelSpec& m = **Cat().Model("tiny-pixart");
  auto w = EngineWorkFor(m, Tiny("tiny-pixart", 64, 2, 1), *ParseParallelConfig("ulysses=2"), 2);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("ranks 0 to 1"), std::string::npos) << w.status().ToString();
}

TEST(RefKernelsTest, AnAccessOutsideItsBufferIsAnError) {
  auto dev = NewCpuDevice();
  auto k = CreateKernels("ref", dev.get());
  ASSERT_TRUE(k.ok());
  auto a = dev->Alloc(4 * 4 * 2), b = dev->Alloc(4 * 4 * 2), c = dev->Alloc(3 * 4 * 2);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  GemmArgs g;
  g.a = (*a)->data();
  g.b = (*b)->data();
  g.c = (*c)->data();
  g.lda = g.ldb = g.ldc = 4;
  g.m = g.k = g.n = 4;  // C needs 16 elements; its buffer has 12
  const Status st = (*k)->Gemm(g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("GEMM C"), std::string::npos) << st.ToString();
  g.m = 3;
  EXPECT_TRUE((*k)->Gemm(g).ok());
  g.lda = 2;  // below k
  EXPECT_FALSE((*k)->Gemm(g).ok());
  EXPECT_FALSE(CreateKernels("tpu", dev.get()).ok());
  // Two sequences written to one output: refused, as the cuda kernels refuse it.
  AttentionArgs at;
  at.q = at.k = at.v = (*a)->data();
  at.o = (*b)->data();
  at.ldq = at.ldk = at.ldv = at.ldo = 4;
  at.q_rows = at.kv_rows = 2;
  at.heads = 1;
  at.head_dim = 4;
  at.batch = 2;
  at.q_batch_stride = at.k_batch_stride = at.v_batch_stride = 8;
  const Status one_output = (*k)->Attention(at);
  EXPECT_EQ(one_output.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(one_output.message().find("o_batch_stride 0"), std::string::npos) << one_output.ToString();
  at.o_batch_stride = 8;
  EXPECT_TRUE((*k)->Attention(at).ok());
}

}  // namespace
}  // namespace ditune::exec

namespace ditune::exec {
namespace {

// Attention over keys A then B, merged by the log-sum-exps, equals attention over A and B at
// once (what Ring attention relies on); the log-sum-exp is the row's ln sum e^(q.k/sqrt d).
TEST(RefKernelsTest, AttentionOverTwoKeyBlocksMergesToTheWhole) {
  auto dev = NewCpuDevice();
  auto k = CreateKernels("ref", dev.get());
  ASSERT_TRUE(k.ok());
  const int heads = 2, d = 16, batch = 2;
  const int64_t q_rows = 5, ka = 7, kb = 9, w = heads * d;
  const Mat q = RandomMat(batch * q_rows, w, 1.0f, 7, 1), kv = RandomMat(batch * (ka + kb), 2 * w, 1.0f, 7, 2);
  auto up = [&](const Mat& m) {
    auto b = dev->Alloc(m.size() * 2);
    EXPECT_TRUE((*k)->Upload(m.data(), (*b)->data(), m.size()).ok());
    return std::move(*b);
  };
  auto qb = up(q), kvb = up(kv);
  auto whole = dev->Alloc(batch * q_rows * w * 2), part = dev->Alloc(batch * q_rows * w * 2),
       part2 = dev->Alloc(batch * q_rows * w * 2);
  auto lse = dev->Alloc(batch * heads * q_rows * 4), lse2 = dev->Alloc(batch * heads * q_rows * 4),
       lse_whole = dev->Alloc(batch * heads * q_rows * 4);
  auto attend = [&](int64_t key0, int64_t keys, void* o, void* l) {
    AttentionArgs a;
    a.q = qb->data();
    a.ldq = w;
    a.q_batch_stride = q_rows * w;
    a.k = static_cast<char*>(kvb->data()) + key0 * 2 * w * 2;
    a.v = static_cast<char*>(kvb->data()) + (key0 * 2 * w + w) * 2;
    a.ldk = a.ldv = 2 * w;
    a.k_batch_stride = a.v_batch_stride = (ka + kb) * 2 * w;
    a.o = o;
    a.ldo = w;
    a.o_batch_stride = q_rows * w;
    a.q_rows = q_rows;
    a.kv_rows = keys;
    a.batch = batch;
    a.heads = heads;
    a.head_dim = d;
    a.lse = static_cast<float*>(l);
    return (*k)->Attention(a);
  };
  ASSERT_TRUE(attend(0, ka + kb, (*whole)->data(), (*lse_whole)->data()).ok());
  ASSERT_TRUE(attend(0, ka, (*part)->data(), (*lse)->data()).ok());
  ASSERT_TRUE(attend(ka, kb, (*part2)->data(), (*lse2)->data()).ok());
  AttentionMergeArgs m;
  m.o = (*part)->data();
  m.ldo = m.ldo2 = w;
  m.o_batch_stride = m.o2_batch_stride = q_rows * w;
  m.lse = static_cast<float*>((*lse)->data());
  m.o2 = (*part2)->data();
  m.lse2 = static_cast<float*>((*lse2)->data());
  m.q_rows = q_rows;
  m.batch = batch;
  m.heads = heads;
  m.head_dim = d;
  ASSERT_TRUE((*k)->MergeAttention(m).ok());
  Mat got(batch * q_rows, w), want(batch * q_rows, w);
  ASSERT_TRUE((*k)->Download((*part)->data(), got.data(), got.size()).ok());
  ASSERT_TRUE((*k)->Download((*whole)->data(), want.data(), want.size()).ok());
  EXPECT_LE(MaxRelativeError(got, want), 1e-2);
  const auto* l = static_cast<const float*>((*lse)->data());
  const auto* lw = static_cast<const float*>((*lse_whole)->data());
  for (int64_t i = 0; i < batch * heads * q_rows; ++i) EXPECT_NEAR(l[i], lw[i], 1e-3) << i;
  // The first sequence's head 1, row 3 by hand (bf16-rounded inputs).
  Mat qr(1, d), kr(ka + kb, d);
  ASSERT_TRUE((*k)->Download(static_cast<char*>(qb->data()) + (3 * w + d) * 2, qr.data(), d).ok());
  double sum = 0;
  for (int64_t j = 0; j < ka + kb; ++j) {
    Mat row(1, d);
    ASSERT_TRUE((*k)->Download(static_cast<char*>(kvb->data()) + (j * 2 * w + d) * 2, row.data(), d).ok());
    sum += std::exp(static_cast<double>((qr * row.transpose())(0, 0)) / std::sqrt(static_cast<double>(d)));
  }
  EXPECT_NEAR(lw[(0 * heads + 1) * q_rows + 3], std::log(sum), 1e-4);
  // A log-sum-exp array too short for the rows is refused like any other access.
  auto short_lse = dev->Alloc(4);
  EXPECT_FALSE(attend(0, ka, (*part)->data(), (*short_lse)->data()).ok());
}

}  // namespace
}  // namespace ditune::exec
