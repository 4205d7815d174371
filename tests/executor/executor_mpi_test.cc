// Every parallel method against the serial forward on tiny models, under mpirun with 2 and 4
// ranks. Each test runs when the launched world has its configuration's size.
#include <gtest/gtest.h>

#include "core/catalog.h"
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "executor/comm.h"
#include "executor/dit.h"
#include "executor/parallel.h"
#include "tests/executor/mpi_test_util.h"

namespace ditune::exec {
namespace {

struct Case {
  const char* model;
  const char* config;
  const char* reference;  // the serial configuration to compare with ("" = plain serial)
  int batch;
};

void Check(const Case& c) {
  const ParallelConfig config = *ParseParallelConfig(c.config);
  if (config.world_size() != World()->size()) GTEST_SKIP() << "needs " << config.world_size() << " ranks";
  const ModelSpec& m = **Cat().Model(c.model);
  const Workload w{c.model, 64, 64, 1, 3, c.batch, OutputType::kLatent};
  auto runner = ParallelRunner::Create(m, w, config, World(), 42);
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  auto par = (*runner)->Generate();
  ASSERT_TRUE(par.ok()) << par.status().ToString();
  auto local = CreateComm("local", nullptr, nullptr);
  auto ref_runner = ParallelRunner::Create(m, w, *ParseParallelConfig(c.reference), local->get(), 42);
  ASSERT_TRUE(ref_runner.ok()) << ref_runner.status().ToString();
  auto ref = (*ref_runner)->Generate();
  ASSERT_TRUE(ref.ok());
  ASSERT_EQ(par->latents.size(), ref->latents.size());
  for (size_t i = 0; i < ref->latents.size(); ++i) {
    EXPECT_LE(MaxRelativeError(par->latents[i], ref->latents[i]), 1e-4)
        << c.model << " " << c.config << " rank " << World()->rank() << " prompt " << i;
  }
}

// DistriFusion computed serially, the textbook way, for comparison: synchronous steps run the
// whole sequence and record every block's K/V; each later step runs every patch (its image
// rows, with the whole text) on its own, attending over the K/V recorded in the step before
// with its own rows fresh, and records those for the next step. Where the text splits evenly
// over the patches each patch owns its share of the text's K/V too; otherwise every patch's
// text K/V are fresh.
Mat SerialDistriFusion(const ModelSpec& m, const Workload& w, int n, int warmup, uint64_t seed, int prompt) {
  DitModel dit(m, seed, 0, m.num_blocks(), 1, 0);
  const int64_t N = ComputeTokenGeometry(m, w)->image_tokens(), nl = N / n;
  const int L = m.num_blocks(), S = w.steps;
  Mat latent = RandomMat(N, dit.latent_width(), 1.0f, seed, 1000 + static_cast<uint64_t>(prompt));
  const std::vector<int> branches = m.uses_cfg ? std::vector<int>{0, 1} : std::vector<int>{0};
  using Kv = std::pair<Mat, Mat>;
  std::vector<std::vector<Kv>> kv(branches.size(), std::vector<Kv>(static_cast<size_t>(L)));
  for (int k = 0; k < S; ++k) {
    const float sigma = 1.0f - static_cast<float>(k) / S, next = 1.0f - static_cast<float>(k + 1) / S;
    const Vec c = dit.Conditioning(sigma * 1000.0f, nullptr);
    const bool sync = k < std::max(1, warmup);
    std::vector<Mat> v;
    for (size_t bi = 0; bi < branches.size(); ++bi) {
      const Mat ctx0 = dit.ProjectText(PromptEmbedding(m, seed, prompt, branches[bi] == 1), nullptr);
      auto recorded = kv[bi];
      Mat pred(N, dit.latent_width());
      for (int r = 0; r < (sync ? 1 : n); ++r) {
        const int64_t row0 = sync ? 0 : r * nl, rows = sync ? N : nl;
        Mat x = dit.Embed(latent.middleRows(row0, rows), nullptr), ctx = ctx0;
        for (int b = 0; b < L; ++b) {
          ParallelHooks hooks;
          hooks.attention = [&](const Mat& q, const Mat& kk, const Mat& vv, int64_t Tq) -> StatusOr<Mat> {
            auto& [K, V] = recorded[static_cast<size_t>(b)];
            if (sync) {
              K = kk;
              V = vv;
              return Attention(q, kk, vv, m.heads, m.head_dim);
            }
            Mat Kb = kv[bi][static_cast<size_t>(b)].first, Vb = kv[bi][static_cast<size_t>(b)].second;
            const int64_t tl = Tq > 0 && Tq % n == 0 ? Tq / n : 0;
            const int64_t t0 = tl > 0 ? r * tl : 0, tn = tl > 0 ? tl : Tq;
            for (Mat* dst : {&Kb, &K}) {
              dst->middleRows(t0, tn) = kk.middleRows(t0, tn);
              dst->middleRows(Tq + row0, rows) = kk.bottomRows(rows);
            }
            for (Mat* dst : {&Vb, &V}) {
              dst->middleRows(t0, tn) = vv.middleRows(t0, tn);
              dst->middleRows(Tq + row0, rows) = vv.bottomRows(rows);
            }
            return Attention(q, Kb, Vb, m.heads, m.head_dim);
          };
          EXPECT_TRUE(dit.Block(b, c, &x, &ctx, hooks, nullptr).ok());
        }
        pred.middleRows(row0, rows) = dit.Final(x, c, nullptr);
      }
      kv[bi] = std::move(recorded);
      v.push_back(std::move(pred));
    }
    const Mat g = m.uses_cfg ? Mat(v[1] + 4.0f * (v[0] - v[1])) : v[0];
    latent += (next - sigma) * g;
  }
  return latent;
}

// DistriFusion across ranks equals its serial computation, synchronous steps equal the model,
// and the stale ones differ from it.
void CheckDistriFusion(const char* model, const char* config_text, int text_tokens) {
  const ParallelConfig config = *ParseParallelConfig(config_text);
  if (config.world_size() != World()->size()) GTEST_SKIP() << "needs " << config.world_size() << " ranks";
  ModelSpec m = **Cat().Model(model);
  if (text_tokens > 0) m.text_tokens = text_tokens;
  const Workload w{model, 64, 64, 1, 3, 1, OutputType::kLatent};
  auto runner = ParallelRunner::Create(m, w, config, World(), 42);
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  auto par = (*runner)->Generate();
  ASSERT_TRUE(par.ok()) << par.status().ToString();
  const Mat serial = SerialDistriFusion(m, w, config.distrifusion, config.warmup, 42, 0);
  EXPECT_LE(MaxRelativeError(par->latents[0], serial), 1e-4) << model << " " << config_text;
  auto local = CreateComm("local", nullptr, nullptr);
  auto exact = (*ParallelRunner::Create(m, w, ParallelConfig{}, local->get(), 42))->Generate();
  ASSERT_TRUE(exact.ok());
  const Mat noise = RandomMat(serial.rows(), serial.cols(), 1.0f, 42, 1000);
  const double stale = MaxRelativeError(Mat(par->latents[0] - noise), Mat(exact->latents[0] - noise));
  if (config.warmup >= w.steps) {
    EXPECT_LE(stale, 1e-4) << model << " " << config_text;
  } else {
    EXPECT_GT(stale, 1e-4) << model << " " << config_text;  // the stale K/V show
    EXPECT_LT(stale, 5e-2) << model << " " << config_text;  // and stay close to the model
  }
}

// 2 ranks.
TEST(Parallel2, DistriFusionWarm) { CheckDistriFusion("tiny-sd3", "distrifusion=2,warmup=3", 0); }
TEST(Parallel2, DistriFusionStaleCross) { CheckDistriFusion("tiny-pixart", "distrifusion=2,warmup=1", 0); }
TEST(Parallel2, DistriFusionStaleJoint) { CheckDistriFusion("tiny-sd3", "distrifusion=2,warmup=1", 0); }
TEST(Parallel2, DistriFusionStaleReplicatedText) { CheckDistriFusion("tiny-flux", "distrifusion=2,warmup=1", 7); }
TEST(Parallel2, Ulysses) { Check({"tiny-pixart", "ulysses=2", "", 1}); }
TEST(Parallel2, UlyssesJoint) { Check({"tiny-sd3", "ulysses=2", "", 1}); }
TEST(Parallel2, UlyssesSingle) { Check({"tiny-flux", "ulysses=2", "", 1}); }
TEST(Parallel2, Ring) { Check({"tiny-pixart", "ring=2", "", 1}); }
TEST(Parallel2, RingJointSingle) { Check({"tiny-flux", "ring=2", "", 1}); }
TEST(Parallel2, TensorParallel) { Check({"tiny-sd3", "tp=2", "", 1}); }
TEST(Parallel2, Cfg) { Check({"tiny-pixart", "cfg=2", "", 1}); }
TEST(Parallel2, DataParallel) { Check({"tiny-sd3", "dp=2", "", 2}); }
TEST(Parallel2, PipeFusionWarm) { Check({"tiny-pixart", "pipefusion=2,patches=2,warmup=3", "", 1}); }
TEST(Parallel2, PipeFusionJointWarm) { Check({"tiny-sd3", "pipefusion=2,patches=2,warmup=3", "", 1}); }
TEST(Parallel2, PipeFusionJointSingleStale) {
  Check({"tiny-flux", "pipefusion=2,patches=4,warmup=1", "patches=4,warmup=1", 1});
}
TEST(Parallel2, PipeFusionStale) {
  Check({"tiny-pixart", "pipefusion=2,patches=4,warmup=1", "patches=4,warmup=1", 1});
}

// 4 ranks.
// Sequence and tensor parallelism inside PipeFusion's stages: each patch's rows split over
// the group, against the serial run of the same patches.
TEST(Parallel2, PatchesUlyssesJoint) { Check({"tiny-sd3", "patches=2,warmup=1,ulysses=2", "patches=2,warmup=1", 1}); }
TEST(Parallel2, PatchesTensorParallel) {
  Check({"tiny-pixart", "patches=4,warmup=1,tp=2", "patches=4,warmup=1", 1});
}

// A peer that stalls: the waiting rank's collective and receive end with an error naming the
// transfer and the limit once the communicator's timeout passes, instead of hanging; a
// receive that timed out stays pending and completes on a later Wait().
TEST(Parallel2, AStalledPeerEndsTheWaitWithAnError) {
  Comm* w = World();
  if (w->size() != 2) GTEST_SKIP() << "needs 2 ranks";
  const double saved = w->timeout_s();
  auto sleep = [](double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); };
  if (w->rank() == 0) {
    w->set_timeout_s(0.3);
    const Status st = w->Barrier();  // rank 1 arrives after 1.5 s
    EXPECT_EQ(st.code(), Status::Code::kUnavailable);
    EXPECT_NE(st.message().find("MPI barrier did not complete within 0.3 s"), std::string::npos) << st.message();
    float value = 0;
    auto recv = w->Irecv(&value, 1, 1, 7);
    ASSERT_TRUE(recv.ok());
    const Status late = (*recv)->Wait();  // rank 1 sends after its barrier and another 0.5 s
    EXPECT_EQ(late.code(), Status::Code::kUnavailable);
    EXPECT_NE(late.message().find("MPI receive did not complete"), std::string::npos) << late.message();
    w->set_timeout_s(saved);
    sleep(2.5);  // the message is sent meanwhile; the request keeps its 0.3 s
    const Status again = (*recv)->Wait();
    EXPECT_TRUE(again.ok()) << again.ToString();
    EXPECT_EQ(value, 42.0f);
  } else {
    sleep(1.5);
    EXPECT_TRUE(w->Barrier().ok());  // completes with rank 0's abandoned one
    sleep(0.5);
    const float value = 42;
    auto send = w->Isend(&value, 1, 0, 7);
    ASSERT_TRUE(send.ok());
    EXPECT_TRUE((*send)->Wait().ok());
  }
  EXPECT_TRUE(w->Barrier().ok());
}
// The tight phase that opens a wait (comm_wait.h): the world's follows its environment and
// sub-communicators inherit it; transfers from 8 B to 1 MB complete with it on; a peer that
// stalls ends a wait still in it at the timeout, with the same message.
TEST(Parallel2, AWaitSpinsThenYieldsAndStillTimesOut) {
  Comm* w = World();
  if (w->size() != 2) GTEST_SKIP() << "needs 2 ranks";
  const double saved_timeout = w->timeout_s(), saved_spin = w->spin_s();
  // Two ranks, one core each, nothing flagged: the spin is on unless the environment says.
  if (std::getenv(kCommSpinEnv) == nullptr && !RanksOversubscribed(w->local_ranks(), 0)) {
    EXPECT_EQ(saved_spin, kDefaultCommSpinS);
  }
  auto sub = w->Split({0, 1});
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  EXPECT_EQ((*sub)->spin_s(), saved_spin);
  w->set_spin_s(0.5);  // longer than any of these transfers takes
  const int peer = 1 - w->rank();
  for (size_t count : {size_t{2}, size_t{256}, size_t{16384}, size_t{262144}}) {
    std::vector<float> out(count, static_cast<float>(w->rank() + 1)), in(count, 0);
    auto send = w->Isend(out.data(), count, peer, 11);
    auto recv = w->Irecv(in.data(), count, peer, 11);
    ASSERT_TRUE(send.ok() && recv.ok());
    EXPECT_TRUE((*recv)->Wait().ok());
    EXPECT_TRUE((*send)->Wait().ok());
    EXPECT_EQ(in.front(), static_cast<float>(peer + 1)) << count;
    EXPECT_EQ(in.back(), static_cast<float>(peer + 1)) << count;
  }
  auto sleep = [](double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); };
  if (w->rank() == 0) {
    w->set_timeout_s(0.2);  // inside the 0.5 s tight phase
    float value = 0;
    auto recv = w->Irecv(&value, 1, 1, 12);
    ASSERT_TRUE(recv.ok());
    const Status late = (*recv)->Wait();  // rank 1 sends after 1 s
    EXPECT_EQ(late.code(), Status::Code::kUnavailable);
    EXPECT_EQ(late.message(),
              "MPI receive did not complete within 0.2 s: a peer rank stalled or died (DITUNE_COMM_TIMEOUT_S sets "
              "the limit; 0 waits forever)");
    sleep(1.5);
    EXPECT_TRUE((*recv)->Wait().ok());
    EXPECT_EQ(value, 42.0f);
  } else {
    sleep(1.0);
    const float value = 42;
    auto send = w->Isend(&value, 1, 0, 12);
    ASSERT_TRUE(send.ok());
    EXPECT_TRUE((*send)->Wait().ok());
  }
  w->set_timeout_s(saved_timeout);
  w->set_spin_s(saved_spin);
  EXPECT_TRUE(w->Barrier().ok());
}

TEST(Parallel4, PipeFusionUlysses) {
  Check({"tiny-sd3", "pipefusion=2,patches=2,warmup=1,ulysses=2", "patches=2,warmup=1", 1});
}
TEST(Parallel4, PipeFusionRingJointSingle) {
  Check({"tiny-flux", "pipefusion=2,patches=2,warmup=0,ring=2", "patches=2,warmup=0", 1});
}
TEST(Parallel4, PipeFusionTensorParallel) {
  Check({"tiny-flux", "pipefusion=2,patches=2,warmup=1,tp=2", "patches=2,warmup=1", 1});
}
TEST(Parallel4, PatchesUspCross) { Check({"tiny-pixart", "patches=2,warmup=1,ulysses=2,ring=2", "patches=2,warmup=1", 1}); }

TEST(Parallel4, Usp) { Check({"tiny-flux", "ulysses=2,ring=2", "", 1}); }
TEST(Parallel4, UspJoint) { Check({"tiny-sd3", "ulysses=2,ring=2", "", 1}); }
TEST(Parallel4, Ulysses4) { Check({"tiny-pixart", "ulysses=4", "", 1}); }
TEST(Parallel4, Ring4) { Check({"tiny-sd3", "ring=4", "", 1}); }
TEST(Parallel4, UlyssesCfg) { Check({"tiny-pixart", "ulysses=2,cfg=2", "", 1}); }
TEST(Parallel4, TpUlysses) { Check({"tiny-sd3", "ulysses=2,tp=2", "", 1}); }
TEST(Parallel4, RingDp) { Check({"tiny-pixart", "ring=2,dp=2", "", 2}); }
TEST(Parallel4, DistriFusionStaleSingle) { CheckDistriFusion("tiny-flux", "distrifusion=4,warmup=1", 0); }
TEST(Parallel4, DistriFusionStaleReplicatedText) { CheckDistriFusion("tiny-sd3", "distrifusion=4,warmup=2", 6); }
TEST(Parallel4, PipeFusionJointCfg) {
  Check({"tiny-sd3", "pipefusion=2,patches=4,warmup=1,cfg=2", "patches=4,warmup=1", 1});
}
TEST(Parallel4, PipeFusionCfg) {
  Check({"tiny-pixart", "pipefusion=2,patches=2,warmup=1,cfg=2", "patches=2,warmup=1", 1});
}

}  // namespace
}  // namespace ditune::exec
