// The runtimes beyond xDiT (data/runtimes): their rules, their launch lines, and that every
// command prices a runtime's configuration as its plan does.
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/catalog.h"
#include "core/config_rules.h"
#include "core/runtime_support.h"
#include "planner/launch.h"
#include "planner/plan.h"
#include "costmodels/memory_model.h"
#include "costmodels/pipeline_terms.h"

namespace ditune {
namespace {

const Catalog& Cat() {
  static const Catalog* c = [] {
    auto r = Catalog::Load(DITUNE_TEST_DATA_DIR);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return new Catalog(std::move(*r));
  }();
  return *c;
}

Workload At(const char* id, int h, int w, int frames = 1) {
  const ModelSpec& m = **Cat().Model(id);
  return {id, h, w, frames, m.default_steps, 1, OutputType::kDecoded};
}

StatusOr<Launch> LaunchOf(const char* runtime, const char* model, const Workload& w, const char* gpu, int gpus,
                          const char* config, LaunchOptions options = {}) {
  auto cluster = ResolveCluster({gpu, gpus}, Cat());
  EXPECT_TRUE(cluster.ok());
  return MakeLaunch(**Cat().Model(model), runtime, w, *cluster, *ParseParallelConfig(config), options);
}

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(RuntimesTest, EveryRuntimeIsListedAndEveryEntryCitesItsSources) {
  std::vector<std::string> ids;
  for (const auto& r : Cat().runtimes()) ids.push_back(r.id);
  for (const char* id : {"xdit", "ditune", "wan-generate", "hunyuan-sample", "sglang", "vllm-omni", "diffusers",
                         "trtllm-visualgen"}) {
    EXPECT_NE(std::find(ids.begin(), ids.end(), id), ids.end()) << id;
  }
  for (const auto& m : Cat().models()) {
    for (const auto& [id, s] : m.runtimes) {
      EXPECT_EQ(s.runtime, id);
      EXPECT_FALSE(s.runtime_name.empty());
      EXPECT_FALSE(s.command_source.empty()) << m.id << " " << id;
      for (int i = 0; i < kNumRuntimeMethods; ++i) {
        EXPECT_FALSE(s.methods[i].source.empty())
            << m.id << " " << id << " " << RuntimeMethodKey(static_cast<RuntimeMethod>(i));
      }
    }
  }
}

// xDiT's ring and the launchers built on it (HunyuanVideo's, Wan2.1's) merge the blocks'
// partial outputs in yunchang's TorchScript-fused kernel; diffusers' ring merges eagerly. A
// fused merge is a fact, and a fact cites its source.
TEST(RuntimesTest, RingMergesFusedWhereTheRingLibraryCompilesThem) {
  for (const char* id : {"xdit", "hunyuan-sample", "wan-generate"}) {
    const RuntimeSpec* r = *Cat().Runtime(id);
    EXPECT_TRUE(r->ring_merge_fused) << id;
    EXPECT_TRUE(Has(r->ring_merge_source, "_update_out_and_lse")) << id;
  }
  EXPECT_FALSE((*Cat().Runtime("diffusers"))->ring_merge_fused);
  const nlohmann::json file = {{"id", "r"}, {"name", "R"}, {"source", "s"}, {"summary", "s"},
                               {"ring_merge_fused", true}, {"models", nlohmann::json::object()}};
  auto parsed = ParseRuntimeFile(file, "r.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_TRUE(Has(parsed.status().message(), "ring_merge_fused needs ring_merge_source")) << parsed.status().ToString();
}

TEST(RuntimesTest, WanGenerateRunsEveryRankAsASequenceRankAndShardsOverAll) {
  const Workload w = At("wan2.1-14b", 720, 1280, 81);
  auto line = LaunchOf("wan-generate", "wan2.1-14b", w, "h100-sxm5-80gb", 8, "ulysses=8,fsdp=8,te=fsdp");
  ASSERT_TRUE(line.ok()) << line.status().ToString();
  // The DiT sharded alone names only its switch; te=fsdp the T5's.
  auto dit_only = LaunchOf("wan-generate", "wan2.1-14b", w, "h100-sxm5-80gb", 8, "ulysses=8,fsdp=8");
  ASSERT_TRUE(dit_only.ok()) << dit_only.status().ToString();
  EXPECT_TRUE(Has(dit_only->command, "--dit_fsdp")) << dit_only->command;
  EXPECT_FALSE(Has(dit_only->command, "--t5_fsdp")) << dit_only->command;
  auto t5_cpu = LaunchOf("wan-generate", "wan2.1-14b", w, "h100-sxm5-80gb", 8, "ulysses=8,fsdp=8,te=cpu");
  ASSERT_TRUE(t5_cpu.ok()) << t5_cpu.status().ToString();
  EXPECT_TRUE(Has(t5_cpu->command, "--t5_cpu")) << t5_cpu->command;
  EXPECT_TRUE(Has(line->command, "torchrun --nproc_per_node=8 generate.py --task t2v-14B")) << line->command;
  EXPECT_TRUE(Has(line->command, "--size 1280*720 --frame_num 81 --sample_steps 50")) << line->command;
  EXPECT_TRUE(Has(line->command, "--ulysses_size 8 --ring_size 1")) << line->command;
  EXPECT_TRUE(Has(line->command, "--dit_fsdp")) << line->command;
  EXPECT_TRUE(Has(line->command, "--t5_fsdp")) << line->command;
  EXPECT_FALSE(Has(line->command, "--dit_fsdp 8")) << line->command;
  // generate.py offloads on one GPU unless told not to.
  EXPECT_TRUE(Has(line->command, "--offload_model False")) << line->command;
  // Wan pads the sequence: any degree splits 720p's 45 patch rows.
  EXPECT_TRUE(LaunchOf("wan-generate", "wan2.1-14b", w, "h100-sxm5-80gb", 8, "ring=8").ok());
  // Not every rank a sequence rank, or a partial shard: refused with the rule named.
  auto partial = LaunchOf("wan-generate", "wan2.1-14b", w, "h100-sxm5-80gb", 8, "ulysses=4,dp=2");
  ASSERT_FALSE(partial.ok());
  EXPECT_TRUE(Has(partial.status().message(), kRuleRuntimeConstraint) ||
              Has(partial.status().message(), kRuleRuntimeMethod))
      << partial.status().message();
  auto shard = LaunchOf("wan-generate", "wan2.1-14b", w, "h100-sxm5-80gb", 8, "ulysses=8,fsdp=4");
  ASSERT_FALSE(shard.ok());
  EXPECT_TRUE(Has(shard.status().message(), "sharded over every rank")) << shard.status().message();
  // Wan2.2's generate.py has no Ring.
  auto ring = LaunchOf("wan-generate", "wan2.2-t2v-a14b", At("wan2.2-t2v-a14b", 720, 1280, 81), "h100-sxm5-80gb", 4,
                       "ring=4");
  ASSERT_FALSE(ring.ok());
  EXPECT_TRUE(Has(ring.status().message(), "Ring sequence parallelism")) << ring.status().message();
  // TI2V-5B: its own task, 1280*704, and the README's single-card flags for a 24 GB GPU.
  const Workload ti2v = At("wan2.2-ti2v-5b", 704, 1280, 121);
  auto card = LaunchOf("wan-generate", "wan2.2-ti2v-5b", ti2v, "rtx4090-24gb", 1, "offload=1,te=cpu");
  ASSERT_TRUE(card.ok()) << card.status().ToString();
  EXPECT_TRUE(Has(card->command, "--task ti2v-5B")) << card->command;
  EXPECT_TRUE(Has(card->command, "--size 1280*704 --frame_num 121")) << card->command;
  EXPECT_TRUE(Has(card->command, "--t5_cpu")) << card->command;
  EXPECT_FALSE(LaunchOf("wan-generate", "wan2.2-ti2v-5b", ti2v, "h100-sxm5-80gb", 4, "ring=4").ok());
}

TEST(RuntimesTest, EachRuntimeSpellsItsOwnFlagsOrWritesItsOwnFile) {
  const Workload q = At("qwen-image", 1024, 1024);
  auto sg = LaunchOf("sglang", "qwen-image", q, "h200-sxm-141gb", 2, "cfg=2");
  ASSERT_TRUE(sg.ok()) << sg.status().ToString();
  EXPECT_TRUE(Has(sg->command, "sglang generate --num-gpus 2")) << sg->command;
  EXPECT_TRUE(Has(sg->command, "--model-path Qwen/Qwen-Image")) << sg->command;
  EXPECT_TRUE(Has(sg->command, "--enable-cfg-parallel")) << sg->command;
  auto vo = LaunchOf("vllm-omni", "qwen-image", q, "h200-sxm-141gb", 4, "ulysses=2,cfg=2");
  ASSERT_TRUE(vo.ok()) << vo.status().ToString();
  EXPECT_TRUE(Has(vo->command, "--ulysses-degree 2 --cfg-parallel-size 2")) << vo->command;
  // vLLM-Omni compiles by default; eager=1 is its --enforce-eager, and only then said.
  EXPECT_FALSE(Has(vo->command, "--enforce-eager")) << vo->command;
  auto vo_eager = LaunchOf("vllm-omni", "qwen-image", q, "h200-sxm-141gb", 4, "ulysses=2,cfg=2,eager=1");
  ASSERT_TRUE(vo_eager.ok()) << vo_eager.status().ToString();
  EXPECT_TRUE(Has(vo_eager->command, "--enforce-eager")) << vo_eager->command;
  EXPECT_FALSE(LaunchOf("vllm-omni", "qwen-image", q, "h200-sxm-141gb", 4, "ulysses=2,compile=1,eager=1").ok());
  // Its image-edit and image-to-video scripts: Qwen-Image-Edit's TP (vllm-omni #3684 measured
  // it), Wan2.2 I2V's Ulysses with HSDP (#7737).
  auto edit = LaunchOf("vllm-omni", "qwen-image-edit", At("qwen-image-edit", 1024, 1024), "h200-sxm-141gb", 2, "tp=2");
  ASSERT_TRUE(edit.ok()) << edit.status().ToString();
  EXPECT_TRUE(Has(edit->command, "image_edit.py --image input.png")) << edit->command;
  EXPECT_TRUE(Has(edit->command, "--tensor-parallel-size 2")) << edit->command;
  EXPECT_FALSE(LaunchOf("vllm-omni", "qwen-image-edit", At("qwen-image-edit", 1024, 1024), "h200-sxm-141gb", 2,
                        "fsdp=2,ulysses=2")
                   .ok());
  auto i2v = LaunchOf("vllm-omni", "wan2.2-i2v-a14b", At("wan2.2-i2v-a14b", 720, 1280, 121), "h100-sxm5-80gb", 2,
                      "ulysses=2,fsdp=2");
  ASSERT_TRUE(i2v.ok()) << i2v.status().ToString();
  EXPECT_TRUE(Has(i2v->command, "image_to_video.py --image input.jpg")) << i2v->command;
  EXPECT_TRUE(Has(i2v->command, "--model Wan-AI/Wan2.2-I2V-A14B-Diffusers")) << i2v->command;
  EXPECT_TRUE(Has(i2v->command, "--ulysses-degree 2")) << i2v->command;
  EXPECT_TRUE(Has(i2v->command, "--use-hsdp")) << i2v->command;
  auto trt = LaunchOf("trtllm-visualgen", "qwen-image", q, "h200-sxm-141gb", 2, "cfg=2");
  ASSERT_TRUE(trt.ok()) << trt.status().ToString();
  EXPECT_EQ(trt->config_name, "visual_gen.yaml");
  EXPECT_TRUE(Has(trt->command, "--visual_gen_args visual_gen.yaml")) << trt->command;
  EXPECT_TRUE(Has(trt->config_text, "cfg_size: 2")) << trt->config_text;
  EXPECT_TRUE(Has(trt->config_text, "ulysses_size: 1")) << trt->config_text;
  auto dif = LaunchOf("diffusers", "flux.2-dev", At("flux.2-dev", 1024, 1024), "l20-48gb", 8, "ulysses=4,tp=2");
  ASSERT_TRUE(dif.ok()) << dif.status().ToString();
  EXPECT_TRUE(Has(dif->command, "torchrun --nproc_per_node=8 run_ditune_plan.py")) << dif->command;
  EXPECT_TRUE(Has(dif->config_text, "ulysses_size=4, ring_size=None, tp_size=2,")) << dif->config_text;
  EXPECT_TRUE(Has(dif->config_text, "[pipe.text_encoder] if False else []")) << dif->config_text;
  // CogVideoX1.5 through diffusers' CogVideoXPipeline: the script loads its own repository.
  auto cog15 = LaunchOf("diffusers", "cogvideox1.5-5b", At("cogvideox1.5-5b", 768, 1360, 81), "a100-sxm4-80gb", 2,
                        "ulysses=2");
  ASSERT_TRUE(cog15.ok()) << cog15.status().ToString();
  EXPECT_TRUE(Has(cog15->config_text, "THUDM/CogVideoX1.5-5B")) << cog15->config_text;
  auto split = LaunchOf("diffusers", "flux.2-dev", At("flux.2-dev", 1024, 1024), "l20-48gb", 8,
                        "ulysses=4,tp=2,te=parallel");
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  EXPECT_TRUE(Has(split->config_text, "[pipe.text_encoder] if True else []")) << split->config_text;
  // xDiT keeps the encoders whole on every rank.
  EXPECT_FALSE(LaunchOf("xdit", "flux.2-dev", At("flux.2-dev", 1024, 1024), "l20-48gb", 8, "ulysses=8,te=parallel").ok());
  EXPECT_TRUE(Has(dif->config_text, "if False:\n    pipe.enable_model_cpu_offload")) << dif->config_text;
  EXPECT_TRUE(Has(dif->config_text, "from_pretrained(\"black-forest-labs/FLUX.2-dev\"")) << dif->config_text;
  // xDiT has no TP for FLUX.2; cache-dit has.
  EXPECT_FALSE(LaunchOf("xdit", "flux.2-dev", At("flux.2-dev", 1024, 1024), "l20-48gb", 8, "ulysses=4,tp=2").ok());
  // HunyuanVideo's sample_video.py: height first, and no offload with sequence parallelism.
  const Workload hv = At("hunyuanvideo", 720, 1280, 129);
  auto hy = LaunchOf("hunyuan-sample", "hunyuanvideo", hv, "h100-sxm5-80gb", 8, "ulysses=8");
  ASSERT_TRUE(hy.ok()) << hy.status().ToString();
  EXPECT_TRUE(Has(hy->command, "--video-size 720 1280 --video-length 129")) << hy->command;
  EXPECT_TRUE(Has(hy->command, "--ulysses-degree 8 --ring-degree 1")) << hy->command;
  auto off = LaunchOf("hunyuan-sample", "hunyuanvideo", hv, "l20-48gb", 2, "ulysses=2,offload=1");
  ASSERT_FALSE(off.ok());
  EXPECT_TRUE(Has(off.status().message(), "offload does not run with sequence parallelism")) << off.status().message();
}

// Where nothing fits on the runtime asked for, the message names the runtimes on which
// something does (Mochi on 4 A10s: xDiT decodes its 163 frames whole; diffusers tiles them).
TEST(RuntimesTest, NothingFitsNamesTheRuntimesThatDo) {
  const Cluster four = *ResolveCluster({"a10-24gb", 4}, Cat());
  PlanOptions opt;
  opt.runtime = "xdit";
  const Workload w = At("mochi-1", 480, 848, 163);
  auto plan = MakePlan(Cat(), w, four, {}, opt);
  ASSERT_FALSE(plan.ok());
  ASSERT_EQ(plan.status().code(), Status::Code::kInfeasible) << plan.status().ToString();
  const std::string others = OtherRuntimesThatFit(Cat(), w, four, {}, opt);
  EXPECT_TRUE(Has(others, "other runtimes fit it: diffusers with ")) << others;
  EXPECT_TRUE(Has(others, "vae=tiled")) << others;
  EXPECT_TRUE(Has(others, "GB per GPU")) << others;
  EXPECT_FALSE(Has(others, "xdit with")) << others;
  // Where no runtime fits, nothing is added.
  const Cluster one = *ResolveCluster({"a10-24gb", 1}, Cat());
  EXPECT_EQ(OtherRuntimesThatFit(Cat(), At("flux.2-dev", 1024, 1024), one, {}, opt), "");
}

TEST(RuntimesTest, AnyRanksRuntimesAndQwenImageOnTwoH200TakesCfgParallel) {
  const Cluster two = *ResolveCluster({"h200-sxm-141gb", 2}, Cat());
  PlanOptions opt;
  opt.runtime = kRuntimeAny;
  auto plan = MakePlanAny(Cat(), At("qwen-image", 1024, 1024), two, {}, opt);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->runtime, kRuntimeAny);
  const Candidate& best = plan->ranked.front();
  EXPECT_EQ(best.config.cfg, 2) << Label(best.config) << " on " << best.runtime;
  ASSERT_TRUE(best.launch.has_value());
  EXPECT_EQ(best.launch->runtime, best.runtime);
  // xDiT has no CFG parallel for Qwen-Image: it is in the comparison, and behind.
  bool xdit_line = false;
  for (const auto& line : plan->explanation) xdit_line |= line.rfind("xdit: best ulysses=2", 0) == 0;
  EXPECT_TRUE(xdit_line);
  // Ranked best first across runtimes.
  for (size_t i = 1; i < plan->ranked.size(); ++i) {
    EXPECT_LE(plan->ranked[i - 1].result.total.value(), plan->ranked[i].result.total.value());
  }
}

// The same rules and the same price everywhere: each runtime's plan winner, simulated alone
// for that runtime, gives the plan's figure to the digit.
TEST(RuntimesTest, SimulateReproducesEveryRuntimesPlanToTheDigit) {
  struct Case {
    const char* model;
    Workload w;
    const char* gpu;
    int gpus;
  };
  const std::vector<Case> cases = {{"qwen-image", At("qwen-image", 1024, 1024), "h200-sxm-141gb", 2},
                                   {"wan2.1-14b", At("wan2.1-14b", 720, 1280, 81), "h100-sxm5-80gb", 8},
                                   {"hunyuanvideo", At("hunyuanvideo", 720, 1280, 129), "h100-sxm5-80gb", 8}};
  for (const Case& c : cases) {
    const Cluster cluster = *ResolveCluster({c.gpu, c.gpus}, Cat());
    const ModelSpec& m = **Cat().Model(c.model);
    for (const auto& r : Cat().runtimes()) {
      if (!r.engine && m.runtime(r.id) == nullptr) continue;
      PlanOptions opt;
      opt.runtime = r.id;
      auto plan = MakePlan(Cat(), c.w, cluster, {}, opt);
      if (!plan.ok()) continue;  // nothing of this runtime fits
      auto sim = SimulateAsPlanned(Cat(), c.w, cluster, {}, opt, plan->ranked.front().config);
      ASSERT_TRUE(sim.ok()) << r.id << " " << c.model << ": " << sim.status().ToString();
      EXPECT_EQ(sim->total.value(), plan->ranked.front().result.total.value()) << r.id << " " << c.model;
    }
  }
}

// eager=1 prices a runtime that compiles by default as eager: slower, as its host time and
// unfused kernels come back; on a runtime that never compiles it changes nothing.
TEST(RuntimesTest, EagerModeOfARuntimeThatCompilesByDefaultIsPricedEager) {
  const Workload q = At("qwen-image", 1024, 1024);
  const Cluster cluster = *ResolveCluster({"a100-sxm4-80gb", 2}, Cat());
  auto total = [&](const char* runtime, const char* config) {
    PlanOptions opt;
    opt.runtime = runtime;
    auto sim = SimulateAsPlanned(Cat(), q, cluster, {}, opt, *ParseParallelConfig(config));
    EXPECT_TRUE(sim.ok()) << runtime << " " << config << ": " << sim.status().ToString();
    return sim.ok() ? sim->total.value() : 0.0;
  };
  EXPECT_GT(total("vllm-omni", "ring=2,eager=1"), 1.2 * total("vllm-omni", "ring=2"));
  EXPECT_EQ(total("sglang", "ring=2,eager=1"), total("sglang", "ring=2"));
}

// FLUX.2-dev's 24 B-parameter text encoder does not fit whole beside the DiT on a 48 GB L20;
// cache-dit splits it over the ranks (--parallel-text), xDiT keeps it whole on every rank.
TEST(RuntimesTest, Flux2OnEightL20sFitsWhereTheRuntimeSplitsItsTextEncoder) {
  const Cluster eight = *ResolveCluster({"l20-48gb", 8}, Cat());
  const Workload w = At("flux.2-dev", 1024, 1024);
  PlanOptions xdit;
  auto whole = MakePlan(Cat(), w, eight, {}, xdit);
  ASSERT_FALSE(whole.ok());
  EXPECT_EQ(whole.status().code(), Status::Code::kInfeasible);
  PlanOptions diffusers;
  diffusers.runtime = "diffusers";
  auto split = MakePlan(Cat(), w, eight, {}, diffusers);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  const Candidate& best = split->ranked.front();
  EXPECT_EQ(best.config.te, TextEncoderPlacement::kParallel) << Label(best.config);
  EXPECT_TRUE(best.result.fits);
  ASSERT_TRUE(best.launch.has_value());
  EXPECT_TRUE(Has(best.launch->config_text, "[pipe.text_encoder] if True else []"));
  // The encoders' bytes on a rank: an eighth of their layers; the embedding, the output head
  // and the vision tower stay whole.
  const ModelSpec& m = **Cat().Model("flux.2-dev");
  const TokenGeometry t = *ComputeTokenGeometry(m, w);
  ParallelConfig c = *ParseParallelConfig("ulysses=4,tp=2");
  const double whole_gb = RankMemory(m, t, w, c, *eight.gpu).encoders.value();
  c.te = TextEncoderPlacement::kParallel;
  const double split_gb = RankMemory(m, t, w, c, *eight.gpu).encoders.value();
  EXPECT_NEAR(whole_gb - split_gb, (m.text_encoder_params() - m.text_encoders[0].unsplit_params) * 2 * 7.0 / 8.0, 1e3);
  EXPECT_GT(m.text_encoders[0].unsplit_params, 0);
  // Any runtime: one that splits the encoder wins, and says so.
  PlanOptions any;
  any.runtime = kRuntimeAny;
  auto ranked = MakePlanAny(Cat(), w, eight, {}, any);
  ASSERT_TRUE(ranked.ok()) << ranked.status().ToString();
  EXPECT_EQ(ranked->ranked.front().config.te, TextEncoderPlacement::kParallel);
}

// vae=cpu (Wan2.1 #266's fix, out of memory at the decode on 3 x 16 GB): diffusers' script
// moves the VAE to the host and hands its decode the latents there; nothing of the VAE stays
// on the GPU, and the decode runs at the host's rate. A runtime without it names it; model
// CPU offload, which moves the VAE back to decode, contradicts it.
TEST(RuntimesTest, VaeOnTheCpuLeavesTheGpuAndTakesTheHostsTime) {
  const Workload w = At("wan2.1-14b", 480, 832, 81);
  auto line = LaunchOf("diffusers", "wan2.1-14b", w, "l40-48gb", 2, "ulysses=2,vae=cpu");
  ASSERT_TRUE(line.ok()) << line.status().ToString();
  EXPECT_TRUE(Has(line->config_text, "if True:\n    # decode on the host (vae=cpu)")) << line->config_text;
  EXPECT_TRUE(Has(line->config_text, "pipe.vae.to(\"cpu\", torch.float32)")) << line->config_text;
  auto on_gpu = LaunchOf("diffusers", "wan2.1-14b", w, "l40-48gb", 2, "ulysses=2");
  ASSERT_TRUE(on_gpu.ok());
  EXPECT_TRUE(Has(on_gpu->config_text, "if False:\n    # decode on the host (vae=cpu)")) << on_gpu->config_text;
  auto xdit = LaunchOf("xdit", "wan2.1-14b", w, "l40-48gb", 2, "ulysses=2,vae=cpu");
  ASSERT_FALSE(xdit.ok());
  EXPECT_TRUE(Has(xdit.status().message(), "VAE decode on the CPU")) << xdit.status().message();
  auto both = LaunchOf("diffusers", "wan2.1-14b", w, "l40-48gb", 1, "offload=1,vae=cpu");
  ASSERT_FALSE(both.ok());
  EXPECT_TRUE(Has(both.status().message(), "vae=cpu and offload=1 contradict")) << both.status().message();

  const ModelSpec& m = **Cat().Model("wan2.1-14b");
  const TokenGeometry t = *ComputeTokenGeometry(m, w);
  const GpuSpec& l40 = **Cat().Gpu("l40-48gb");
  const MemoryBreakdown gpu = RankMemory(m, t, w, *ParseParallelConfig("ulysses=2"), l40);
  const MemoryBreakdown host = RankMemory(m, t, w, *ParseParallelConfig("ulysses=2,vae=cpu"), l40);
  EXPECT_GT(gpu.vae_weights.value(), 0);
  EXPECT_GT(gpu.vae_decode.value(), 0);
  EXPECT_EQ(host.vae_weights.value(), 0);
  EXPECT_EQ(host.vae_decode.value(), 0);
  EXPECT_EQ(host.weights.value(), gpu.weights.value());
  EXPECT_LT(host.phases[static_cast<int>(MemoryPhase::kVaeDecode)].value(),
            gpu.phases[static_cast<int>(MemoryPhase::kVaeDecode)].value());
  // Where the weights block it, model CPU offload is offered in place of vae=cpu.
  const std::string blocker = MemoryBlocker(*ParseParallelConfig("ulysses=2,vae=cpu"), host, m.runtime("diffusers"));
  EXPECT_TRUE(Has(blocker, "(offload=1, with the VAE back on the GPU)")) << blocker;
  // Eight minutes for 81 frames at 832 x 480, inside what CPU decodes of Wan2.1 are reported
  // to take (5-15 minutes, deepbeepmeep/Wan2GP #995).
  const double host_s = HostVaeDecodeTime(m, w).value();
  EXPECT_GT(host_s, 5 * 60.0);
  EXPECT_LT(host_s, 15 * 60.0);
  const Cluster two = *ResolveCluster({"l40-48gb", 2}, Cat());
  PlanOptions diffusers;
  diffusers.runtime = "diffusers";
  auto on_host = SimulateAsPlanned(Cat(), w, two, {}, diffusers, *ParseParallelConfig("ulysses=2,vae=cpu"));
  auto on_device = SimulateAsPlanned(Cat(), w, two, {}, diffusers, *ParseParallelConfig("ulysses=2"));
  ASSERT_TRUE(on_host.ok() && on_device.ok());
  EXPECT_NEAR(on_host->vae_decode.value(), host_s, 1e-6);
  EXPECT_GT(on_host->vae_decode.value(), 5 * on_device->vae_decode.value());
}

// Open-Sora 2.0's inference script: ColossalAI's Ring or tensor parallelism over every rank
// (never both), three guidance branches in one batch, the text and image tokens split as one
// sequence, a config file ditune writes over the shipped 256px.py; until 2025-03-26 it read
// the checkpoint onto the GPU beside the model, which is the floor of its published peaks
// (44.3 GiB on 2 to 8 GPUs with either method).
TEST(RuntimesTest, OpenSoraRunsRingOrTpOverEveryRankFromItsOwnConfig) {
  const Workload w = At("open-sora-v2", 768, 768, 129);
  auto ring = LaunchOf("open-sora", "open-sora-v2", w, "h800-sxm5-80gb", 8, "ring=8");
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();
  EXPECT_TRUE(Has(ring->command, "torchrun --nproc_per_node 8 scripts/diffusion/inference.py ditune_opensora.py"))
      << ring->command;
  EXPECT_TRUE(Has(ring->config_text, "_base_ = [\"configs/diffusion/inference/256px.py\"]")) << ring->config_text;
  EXPECT_TRUE(Has(ring->config_text, "resolution=\"768px\", aspect_ratio=\"1:1\", num_frames=129, num_steps=50"))
      << ring->config_text;
  EXPECT_TRUE(Has(ring->config_text, "_ring = 8 or 1")) << ring->config_text;
  EXPECT_TRUE(Has(ring->config_text, "_tp = None or 1")) << ring->config_text;
  EXPECT_TRUE(Has(ring->config_text, "plugin_config_ae = dict(tp_size=8")) << ring->config_text;
  EXPECT_TRUE(Has(ring->config_text, "vae=parallel True")) << ring->config_text;
  EXPECT_TRUE(LaunchOf("open-sora", "open-sora-v2", At("open-sora-v2", 256, 256, 129), "h800-sxm5-80gb", 4, "tp=4").ok());
  // Both methods at once, a method short of the world, CFG parallel over three branches,
  // a size it is not launched at, a sequence that does not split in equal chunks: refused.
  for (const auto& [gpus, config, rule] : std::vector<std::tuple<int, const char*, const char*>>{
           {4, "ring=2,tp=2", "one method spans every rank"},
           {8, "ring=4,dp=2", "one method spans every rank"},
           {2, "cfg=2", "3 guidance branches"},
           {3, "ring=3", "text and image tokens"}}) {
    auto refused = LaunchOf("open-sora", "open-sora-v2", w, "h800-sxm5-80gb", gpus, config);
    ASSERT_FALSE(refused.ok()) << config;
    EXPECT_TRUE(Has(refused.status().message(), rule)) << config << ": " << refused.status().message();
  }
  auto wide = LaunchOf("open-sora", "open-sora-v2", At("open-sora-v2", 576, 1024, 129), "h800-sxm5-80gb", 8, "ring=8");
  ASSERT_FALSE(wide.ok());
  EXPECT_TRUE(Has(wide.status().message(), "launched square")) << wide.status().message();
  // The load is the floor: the whole bf16 DiT and its bf16 checkpoint, on any split.
  const ModelSpec& m = **Cat().Model("open-sora-v2");
  EXPECT_EQ(m.GuidanceBranches(), 3);
  MemoryOptions opt;
  opt.placement = m.runtime("open-sora")->memory;
  const TokenGeometry t = *ComputeTokenGeometry(m, w);
  const GpuSpec& gpu = **Cat().Gpu("h800-sxm5-80gb");
  for (const char* config : {"ring=4", "ring=8", "tp=4"}) {
    const MemoryBreakdown mb = RankMemory(m, t, w, *ParseParallelConfig(config), gpu, opt);
    EXPECT_EQ(mb.peak_phase(), MemoryPhase::kLoad) << config << ": " << MemoryPhasesText(mb);
    EXPECT_NEAR(mb.tensors_peak().value() / (44.3 * 1024 * 1024 * 1024), 1.0, 0.03) << config;
  }
  // Every branch's prompt is encoded, in one batch with the DiT's three.
  EXPECT_NEAR(TextEncodeOp(m, w).flops.value() / TextEncodeOp(**Cat().Model("flux.1-dev"), w).flops.value(),
              3.0 * 512 / (1.0 * (**Cat().Model("flux.1-dev")).text_tokens), 1e-9);
}

// Z-Image-Turbo with its Fun-ControlNet-Union 2.1 under cache-dit: the plain Ulysses rows
// split the DiT only, so every rank runs the ControlNet's 19 blocks whole; --parallel-
// controlnet splits them too. The DiT's split stream is gathered after each of its layers
// to add the ControlNet's whole-sequence hints, in both.
TEST(RuntimesTest, ZImageControlNetRunsWholeOnEveryRankUnlessSplit) {
  const char* id = "z-image-turbo-controlnet-union-2.1";
  const Workload w = At(id, 1728, 992);
  const Cluster four = *ResolveCluster({"l20-48gb", 4}, Cat());
  PlanOptions opt;
  opt.runtime = "diffusers";
  auto sim = [&](const char* model, const char* config) {
    auto r = SimulateAsPlanned(Cat(), At(model, 1728, 992), four, {}, opt, *ParseParallelConfig(config));
    EXPECT_TRUE(r.ok()) << config << ": " << r.status().ToString();
    return r.ok() ? r->total.value() : 0.0;
  };
  const double whole = sim(id, "ulysses=4");
  const double split = sim(id, "ulysses=4,controlnet=parallel");
  const double bare = sim("z-image-turbo", "ulysses=4");
  EXPECT_LT(split, whole);
  EXPECT_GT(split, bare);  // the split ControlNet and the gathers still cost
  // Whole on every rank, the ControlNet's 19 blocks cost about as much as 19 / 32 of the
  // undivided DiT: more than the split DiT's share of its 32.
  EXPECT_GT(whole - bare, 1.5 * (split - bare));
  auto launch = LaunchOf("diffusers", id, w, "l20-48gb", 4, "ulysses=4,controlnet=parallel");
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  EXPECT_TRUE(Has(launch->config_text, "if True:\n        modules.append(pipe.controlnet)")) << launch->config_text;
  EXPECT_TRUE(Has(launch->config_text, "ZImageControlNetPipeline.from_pretrained(\"Tongyi-MAI/Z-Image-Turbo\""));
  auto plain = LaunchOf("diffusers", id, w, "l20-48gb", 4, "ulysses=4");
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(Has(plain->config_text, "if False:\n        modules.append(pipe.controlnet)")) << plain->config_text;
  // No ControlNet to split; a ControlNet beside PipeFusion's stages: refused.
  auto none = LaunchOf("diffusers", "z-image-turbo", At("z-image-turbo", 1024, 1024), "l20-48gb", 4,
                       "ulysses=4,controlnet=parallel");
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(Has(none.status().message(), "has no ControlNet")) << none.status().message();
  const ModelSpec& m = **Cat().Model(id);
  ValidationContext ctx{&m, *ComputeTokenGeometry(m, w), w.steps, 1, 4, ""};
  const std::vector<Violation> why = CheckConfig(ctx, *ParseParallelConfig("pipefusion=4"));
  bool named = false;
  for (const auto& v : why) named |= v.rule == std::string(kRuleControlNet);
  EXPECT_TRUE(named);
  // Its weights and its hints are counted; the whole ControlNet's activations too.
  const TokenGeometry t = *ComputeTokenGeometry(m, w);
  const MemoryBreakdown with = RankMemory(m, t, w, *ParseParallelConfig("ulysses=4"), *four.gpu);
  const ModelSpec& z = **Cat().Model("z-image-turbo");
  const MemoryBreakdown without = RankMemory(z, *ComputeTokenGeometry(z, w), w, *ParseParallelConfig("ulysses=4"), *four.gpu);
  EXPECT_NEAR((with.weights - without.weights).value(), m.control.params * 2, 1e6);
  EXPECT_GT(with.activations.value(), 3 * without.activations.value());
}

TEST(RuntimesTest, UnknownRuntimesAreNamedWithTheValidOnes) {
  auto bad = ParseRuntimeChoice(Cat(), "vllm");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Has(bad.status().message(), "did you mean 'vllm-omni'")) << bad.status().message();
  EXPECT_TRUE(Has(bad.status().message(), "any")) << bad.status().message();
  // A runtime that does not run the model says which do.
  auto none = RuntimeRunsWorkload(**Cat().Model("pixart-alpha"), "wan-generate", At("pixart-alpha", 1024, 1024));
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(Has(none.message(), "runtimes that run it: ")) << none.message();
}

// Each plan says what its figure covers and how its runtime times a generation; where the
// runtime's figure leaves a part out, the line names the part of the plan to compare with.
TEST(RuntimesTest, PlansSayHowToReproduceTheirFigure) {
  SimResult r;
  r.text_encode = Seconds(0.5);
  r.dit = Seconds(10);
  r.vae_decode = Seconds(2);
  r.total = Seconds(12.5);
  const Workload w = At("flux.1-dev", 1024, 1024);
  std::vector<std::string> engine = ReproduceLines(Cat(), "ditune", w, r);
  ASSERT_EQ(engine.size(), 3u);
  EXPECT_TRUE(Has(engine[0], "text encoding 0.50 s + 28 denoising steps 10.00 s + VAE decode 2.00 s"));
  EXPECT_TRUE(Has(engine[2], "compare it with 10.000 s of this plan's 12.500 s"));
  std::vector<std::string> hunyuan = ReproduceLines(Cat(), "hunyuan-sample", w, r);
  bool warm = false;
  for (const auto& l : hunyuan) warm |= Has(l, "no warm-up call first");
  EXPECT_TRUE(warm);
  std::vector<std::string> wan = ReproduceLines(Cat(), "wan-generate", w, r);
  bool unknown = false;
  for (const auto& l : wan) unknown |= Has(l, "no source says whether its figure includes the text encoders (0.50 s)");
  EXPECT_TRUE(unknown);
  for (const auto& rt : Cat().runtimes()) {
    ASSERT_TRUE(rt.timing.has_value()) << rt.id << ": every runtime says how it times a generation";
    EXPECT_FALSE(rt.timing->source.empty()) << rt.id;
  }
}

}  // namespace
}  // namespace ditune
