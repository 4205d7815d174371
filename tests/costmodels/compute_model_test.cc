#include "costmodels/compute_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/catalog.h"
#include "costmodels/pipeline_terms.h"

namespace ditune {
namespace {

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

TEST(ComputeModelTest, GoldenDefaults) {
  ComputeModel m = ComputeModel::Defaults(**Cat().Gpu("h100-sxm5-80gb"));
  // A large GEMM: 5 us + flops / (989 TF/s x 0.75).
  OpCost gemm{"g", OpClass::kGemm, Flops(2.0 * 8192 * 8192 * 8192), Bytes(3 * 2.0 * 8192 * 8192), 1};
  EXPECT_NEAR(m.OpTime(gemm).value(), 5e-6 + gemm.flops.value() / (989e12 * 0.75), 1e-12);
  // An elementwise op is memory-bound: 3 us + bytes / (3.35 TB/s x 0.8).
  OpCost ew{"e", OpClass::kElementwise, Flops(1e6), Bytes(1e9), 1};
  EXPECT_NEAR(m.OpTime(ew).value(), 3e-6 + 1e9 / (3350e9 * 0.8), 1e-12);
  // A tiny op with many framework ops is bound by the host that issues them (15 us each).
  OpCost tiny{"t", OpClass::kElementwise, Flops(10), Bytes(100), 6};
  EXPECT_NEAR(m.OpTime(tiny).value(), 6 * 15e-6, 1e-12);
  EXPECT_NEAR(m.HostTime(tiny).value(), 6 * 15e-6, 1e-12);
  // A sequence takes the larger of its device and host sums.
  EXPECT_NEAR(m.OpsTime({gemm, tiny}).value(), m.DeviceTime(gemm).value() + m.DeviceTime(tiny).value(), 1e-12);
  // Host-only ops (views, reshapes) cost the host, not the device.
  OpCost view{"v", OpClass::kElementwise, Flops(0), Bytes(0), 3, true};
  EXPECT_EQ(m.DeviceTime(view).value(), 0.0);
  EXPECT_NEAR(m.OpsTime({view, view}).value(), 6 * 15e-6, 1e-12);
}

// A class scale multiplies the device time of that class's ops only, beside the model's
// scale, within its bounds; host time is not device time.
TEST(ComputeModelTest, ClassScaleMultipliesOnlyItsClassWithinBounds) {
  ComputeModel m = ComputeModel::Defaults(**Cat().Gpu("h100-sxm5-80gb"));
  OpCost gemm{"g", OpClass::kGemm, Flops(1e12), Bytes(1e8), 1};
  OpCost attn{"a", OpClass::kAttention, Flops(1e12), Bytes(1e8), 1};
  const double gemm_s = m.DeviceTime(gemm).value();
  const double attn_s = m.DeviceTime(attn).value();
  const double host_s = m.HostTime(attn).value();
  m.SetClassScale(OpClass::kAttention, 1.4);
  m.set_scale(2.0);
  EXPECT_NEAR(m.DeviceTime(attn).value(), attn_s * 1.4 * 2.0, 1e-15);
  EXPECT_NEAR(m.DeviceTime(gemm).value(), gemm_s * 2.0, 1e-15);
  EXPECT_EQ(m.HostTime(attn).value(), host_s);
  m.SetClassScale(OpClass::kAttention, 9.0);
  EXPECT_EQ(m.class_scale(OpClass::kAttention), kMaxClassScale);
  m.SetClassScale(OpClass::kAttention, 0.01);
  EXPECT_EQ(m.class_scale(OpClass::kAttention), kMinClassScale);
  m.SetClassScale(OpClass::kAttention, std::nan(""));
  EXPECT_EQ(m.class_scale(OpClass::kAttention), 1.0);
}

TEST(ComputeModelTest, MoreFlopsPerSecondNeverSlower) {
  ComputeModel a = ComputeModel::Defaults(**Cat().Gpu("a100-sxm4-80gb"));
  ComputeModel b = a;
  b.ScalePeak(2.0);
  for (double f = 1e6; f < 1e15; f *= 10) {
    OpCost op{"g", OpClass::kGemm, Flops(f), Bytes(f / 100), 1};
    EXPECT_LE(b.OpTime(op).value(), a.OpTime(op).value());
  }
}

TEST(ComputeModelTest, FitOverridesDefaultAndScaleApplies) {
  ComputeModel m = ComputeModel::Defaults(**Cat().Gpu("cpu"));
  EXPECT_EQ(m.launch_overhead().value(), 0.0);
  m.SetFit(OpClass::kAttention, PiecewiseLatencyModel({{1, 1e15, 1e-5, 1e11}}));
  OpCost att{"a", OpClass::kAttention, Flops(1e9), Bytes(1e6), 1};
  EXPECT_DOUBLE_EQ(m.OpTime(att).value(), 1e-5 + 1e9 / 1e11);
  m.set_scale(1.5);
  EXPECT_DOUBLE_EQ(m.OpTime(att).value(), 1.5 * (1e-5 + 1e9 / 1e11));
}

TEST(ComputeModelTest, TheEngineIssuesOneKernelPerOpAndFoldsTheMlpActivation) {
  ComputeModel m = ComputeModel::Defaults(**Cat().Gpu("h100-sxm5-80gb"));
  OpCost norm{"n", OpClass::kElementwise, Flops(1e3), Bytes(1e4), 4};
  OpCost glue{"v", OpClass::kElementwise, Flops(0), Bytes(0), 45, true};
  OpCost act{"act", OpClass::kElementwise, Flops(1e6), Bytes(1e8), 1};
  act.engine_fused = true;
  // Eager: 15 us per framework op, glue included; the activation is a kernel of its own.
  EXPECT_NEAR(m.HostTime(norm).value(), 4 * 15e-6, 1e-12);
  EXPECT_NEAR(m.HostTime(glue).value(), 45 * 15e-6, 1e-12);
  const double act_eager = m.DeviceTime(act).value();
  EXPECT_GT(act_eager, 0.0);
  // The engine: one launch per device op at its default 5 us, no glue, the activation in the
  // GEMM's epilogue.
  m.SetRuntime(Runtime::kEngine);
  EXPECT_NEAR(m.HostTime(norm).value(), 5e-6, 1e-12);
  EXPECT_EQ(m.HostTime(glue).value(), 0.0);
  EXPECT_EQ(m.HostTime(act).value(), 0.0);
  EXPECT_EQ(m.DeviceTime(act).value(), 0.0);
  EXPECT_EQ(m.DeviceTime(norm).value(), ComputeModel::Defaults(**Cat().Gpu("h100-sxm5-80gb")).DeviceTime(norm).value());
  // A measured launch overhead is the engine's, set before or after the switch, never eager's.
  m.SetMeasuredLaunchOverhead(Microseconds(3));
  EXPECT_NEAR(m.HostTime(norm).value(), 3e-6, 1e-12);
  m.SetRuntime(Runtime::kEager);
  EXPECT_NEAR(m.HostTime(norm).value(), 4 * 15e-6, 1e-12);
  m.SetRuntime(Runtime::kEngine);
  EXPECT_NEAR(m.launch_overhead().value(), 3e-6, 1e-12);
  // On the host the kernels run on the issuing thread: no launch overhead either way.
  ComputeModel cpu = ComputeModel::Defaults(**Cat().Gpu("cpu"));
  cpu.SetRuntime(Runtime::kEngine);
  EXPECT_EQ(cpu.HostTime(norm).value(), 0.0);
}

TEST(PipelineTermsTest, TextAndVaeAreSeparateAndVaeSkipsForLatent) {
  const ModelSpec& flux = **Cat().Model("flux.1-dev");
  ComputeModel m = ComputeModel::Defaults(**Cat().Gpu("h100-sxm5-80gb"));
  Workload w{"flux.1-dev", 1024, 1024, 1, 28, 1, OutputType::kDecoded};
  EXPECT_GT(TextEncodeTime(m, flux, w).value(), 0);
  const double vae = VaeDecodeTime(m, flux, w).value();
  EXPECT_GT(vae, 0);
  Workload big = w;
  big.height = big.width = 2048;
  EXPECT_LT(VaeDecodeOp(flux, big, 4).flops.value(), VaeDecodeOp(flux, big).flops.value());
  w.output = OutputType::kLatent;
  EXPECT_EQ(VaeDecodeTime(m, flux, w).value(), 0.0);
}

TEST(PipelineTermsTest, AFrameByFrameImageVaeTakesTheImageConstant) {
  ComputeModel plain = ComputeModel::Defaults(**Cat().Gpu("l20-48gb"));
  ComputeModel m = plain;
  Mechanisms mech;
  mech.image_vae_scale = 2;
  mech.video_vae_scale = 10;
  m.SetMechanisms(mech);
  // Latte decodes its frames with the SD image VAE (no temporal compression): the image
  // constant; CogVideoX's causal 3-D VAE: the video one.
  const ModelSpec& latte = **Cat().Model("latte-1");
  Workload lw{"latte-1", 512, 512, 16, 50, 1, OutputType::kDecoded};
  EXPECT_NEAR(VaeDecodeTime(m, latte, lw).value(), 2 * VaeDecodeTime(plain, latte, lw).value(), 1e-12);
  const ModelSpec& cog = **Cat().Model("cogvideox-5b");
  Workload cw{"cogvideox-5b", 480, 720, 49, 50, 1, OutputType::kDecoded};
  EXPECT_NEAR(VaeDecodeTime(m, cog, cw).value(), 10 * VaeDecodeTime(plain, cog, cw).value(), 1e-9);
}

TEST(PipelineTermsTest, VaeDecodeIsItsConvolutionsPerPixelPlusItsMidBlockAttention) {
  // The SD-family decoder (Flux.1's): 9.46e6 FLOPs a pixel of convolutions, and one 512-channel
  // attention over the 128 x 128 latent positions of a 1024^2 image: 4 n^2 C.
  const ModelSpec& flux = **Cat().Model("flux.1-dev");
  Workload w{"flux.1-dev", 1024, 1024, 1, 28, 1, OutputType::kDecoded};
  const double n = 128.0 * 128.0;
  EXPECT_NEAR(VaeDecodeOp(flux, w).flops.value(), 9.46e6 * 1024 * 1024 + 4.0 * n * n * 512, 1e3);
  // Quadratic in the latent positions: at 4096^2 the attention is 16^2 times as much, the
  // convolutions 16 times.
  Workload big = w;
  big.height = big.width = 4096;
  EXPECT_NEAR(VaeDecodeOp(flux, big).flops.value(), 9.46e6 * 4096 * 4096 + 4.0 * (16 * n) * (16 * n) * 512, 1e5);
  // DC-AE (Sana) attends linearly: its work is per pixel alone.
  const ModelSpec& sana = **Cat().Model("sana-1600m");
  Workload s{"sana-1600m", 1024, 1024, 1, 20, 1, OutputType::kDecoded};
  Workload s4 = s;
  s4.height = s4.width = 4096;
  EXPECT_NEAR(VaeDecodeOp(sana, s).flops.value(), 7.99e6 * 1024 * 1024, 1e3);
  EXPECT_NEAR(VaeDecodeOp(sana, s4).flops.value() / VaeDecodeOp(sana, s).flops.value(), 16.0, 1e-9);
}

TEST(PipelineTermsTest, ACausal3dVaeIsPricedByItsColumnTrafficAtMemoryBandwidth) {
  // CogVideoX's decoder at 480 x 720 x 49: the feature-map traffic (2 bytes x 128 channels x
  // 30 convolutions a pixel) times the vol2col passes (read once, 27 column writes, 27 GEMM
  // reads), at the elementwise share (0.8) of memory bandwidth, plus the class's fixed time.
  const ModelSpec& cog = **Cat().Model("cogvideox-5b");
  Workload w{"cogvideox-5b", 480, 720, 49, 50, 1, OutputType::kDecoded};
  const double pixels = 480.0 * 720 * 49;
  const OpCost op = VaeDecodeOp(cog, w);
  EXPECT_EQ(op.cls, OpClass::kElementwise);
  EXPECT_NEAR(op.bytes.value(), pixels * 2 * 128 * 30 * 55, 1.0);
  const GpuSpec& h100 = **Cat().Gpu("h100-sxm5-80gb");
  const GpuSpec& h20 = **Cat().Gpu("h20-96gb");
  const ComputeModel on_h100 = ComputeModel::Defaults(h100);
  const ComputeModel on_h20 = ComputeModel::Defaults(h20);
  EXPECT_NEAR(on_h100.DeviceTime(op).value(), 3e-6 + op.bytes.value() / (3.35e12 * 0.8), 1e-6);
  // An H20 has a seventh of an H100's tensor peak and more memory bandwidth: it decodes
  // faster, where an image decoder (2-D convolutions on the tensor cores) is slower.
  EXPECT_LT(on_h20.DeviceTime(op).value(), on_h100.DeviceTime(op).value());
  const ModelSpec& flux = **Cat().Model("flux.1-dev");
  Workload fw{"flux.1-dev", 1024, 1024, 1, 28, 1, OutputType::kDecoded};
  EXPECT_EQ(VaeDecodeOp(flux, fw).cls, OpClass::kGemm);
  EXPECT_GT(on_h20.DeviceTime(VaeDecodeOp(flux, fw)).value(), 5 * on_h100.DeviceTime(VaeDecodeOp(flux, fw)).value());
}

}  // namespace
}  // namespace ditune
