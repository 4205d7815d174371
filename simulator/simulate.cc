#include "simulator/simulate.h"

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>

#include <fmt/format.h>

#include "core/rank_layout.h"
#include "core/rank_share.h"
#include "simulator/stage_costs.h"

namespace ditune {
namespace {

// Builds the task graph of a generation with `steps` denoising steps.
class GraphBuilder {
 public:
  GraphBuilder(const SimInput& in, const SimOptions& opt, const RankLayout& layout, const StageCosts& costs,
               TaskScheduler* e)
      : in_(in), opt_(opt), layout_(layout), costs_(costs), e_(*e), c_(in.config) {
    stages_ = std::max(1, c_.pipefusion);
    for (int s = 0; s < stages_; ++s) {
      RankCoords rc;
      rc.index[static_cast<int>(Axis::kPipeFusion)] = s;
      rep_.push_back(layout.RankOf(rc));
      host_.push_back(e_.AddStream(rep_[s], "host"));
      prev_inputs_.emplace_back();
      compute_.push_back(e_.AddStream(rep_[s], "compute"));
      comm_.push_back(e_.AddStream(rep_[s], "comm"));
      int first = 0, count = 0;
      StageBlocks(in.model->num_blocks(), stages_, s, &first, &count, opt.stage_partition);
      first_block_.push_back(first);
      block_count_.push_back(count);
    }
  }

  // Builds everything; `steps` denoising steps. Returns the DiT region [start, end) tasks.
  void Build(int steps) {
    // Model CPU offload's moves (config offload): the text encoders to the GPU and back and
    // the DiT to it before the loop, the DiT back and the VAE to it and back after.
    const OffloadTraffic moves = OffloadMoves(*in_.model, c_);
    const Seconds before_loop = HostLinkTime(moves.before_loop);
    const Seconds after_loop = HostLinkTime(moves.after_loop);
    // Text encoders split over the ranks (te=parallel) share the work; their all-reduces over
    // a prompt's few hundred tokens are left out.
    // On the CPU (te=cpu) they run at the host's rate.
    const Seconds text = (c_.te == TextEncoderPlacement::kCpu
                              ? HostTextEncodeTime(*in_.model, in_.workload)
                              : TextEncodeTime(*in_.compute, *in_.model, in_.workload, opt_.terms) / TextEncoderShards(c_)) +
                         before_loop;
    for (int s = 0; s < stages_; ++s) {
      text_task_.push_back(Add(compute_[s], text, {}, TaskKind::kTextEncode, "text_encode", -1));
      // Preparing the loop's inputs reads the prompt embeddings back on the host, so the
      // host starts issuing the first forward only once text encoding has finished.
      prev_inputs_[s] = {text_task_[s]};
    }
    int final_latent = -1;
    if (c_.distrifusion > 1) {
      final_latent = BuildDistriFusion(steps);
    } else if (stages_ > 1) {
      final_latent = BuildPipeFusion(steps);
    } else {
      final_latent = BuildSync(steps);
    }
    // The latent is split over the sequence-parallel ranks: gather it for the decoder.
    if (c_.sp() * c_.distrifusion > 1) {
      const auto group = layout_.GroupOf(rep_.back(), c_.distrifusion > 1 ? Axis::kDistriFusion : Axis::kSp);
      const Seconds t = in_.comm->Time(Collective::kAllGather, costs_.Latent(false) * (c_.sp() * c_.distrifusion), group);
      final_latent = Add(comm_.back(), t, {final_latent}, TaskKind::kComm, "gather_latent", -1);
    }
    dit_end_ = final_latent;
    const int parallel =
        opt_.parallel_vae || EffectiveVae(c_, opt_.memory.placement) == VaePlacement::kParallel ? layout_.world_size() : 1;
    // Tiles overlap (vae=tiled): the overlaps are decoded twice. A runtime that always tiles
    // has its tiling in the decode's calibrated scale already, as its published runs had it.
    const double tiled = c_.vae == VaePlacement::kTiled && !opt_.memory.placement.vae_tiled_by_default
                             ? TiledDecodeWork(*in_.model, in_.workload)
                             : 1.0;
    // On the CPU (vae=cpu) the decode runs at the host's rate.
    const Seconds vae = (c_.vae == VaePlacement::kCpu
                             ? HostVaeDecodeTime(*in_.model, in_.workload)
                             : VaeDecodeTime(*in_.compute, *in_.model, in_.workload, parallel, opt_.terms) * tiled) +
                        after_loop;
    for (int s = 0; s < stages_; ++s) {
      vae_task_.push_back(Add(compute_[s], vae, {final_latent}, TaskKind::kVaeDecode, "vae_decode", -1));
    }
  }

  // Weights moved between host memory and the GPU by the framework's module.to(): copies
  // from pageable memory, which CUDA stages through pinned buffers, run well below the
  // link's nominal rate (a bandwidthTest of large pageable host-to-device copies on NVIDIA's
  // developer forum levels off at 8.3 GB/s); half the nominal rate is taken. An estimate:
  // no published run of the training suite offloads.
  Seconds HostLinkTime(Bytes bytes) const {
    constexpr double kPageableShare = 0.5;
    if (bytes.value() <= 0) return Seconds(0);
    return Seconds(bytes.value() / (in_.cluster->gpu->host_link.value() * kPageableShare));
  }

  int stages() const { return stages_; }
  int rep(int s) const { return rep_[s]; }
  int compute_stream(int s) const { return compute_[s]; }
  int text_task(int s) const { return text_task_[s]; }
  int vae_task(int s) const { return vae_task_[s]; }
  int dit_end() const { return dit_end_; }

 private:
  int Add(int stream, Seconds d, std::vector<int> deps, TaskKind kind, std::string_view name, int step,
          Seconds comm_part = Seconds(0), int resource = -1) {
    deps.erase(std::remove(deps.begin(), deps.end(), -1), deps.end());
    TaskSpec t;
    t.stream = stream;
    t.duration = d;
    t.comm_part = comm_part;
    t.deps = std::move(deps);
    t.kind = kind;
    t.name = name;
    t.step = step;
    t.resource = resource;
    return e_.AddTask(std::move(t));
  }

  // One forward of stage `s` (all its blocks), after `deps`. Synchronous collectives
  // (Ulysses' all-to-alls, tensor parallelism's all-reduces) sit between the kernels that
  // wait for them, so they are part of the compute stream's task (its comm_part); nothing
  // else overlaps them. Blocks are grouped into up to kChunks tasks per forward, each issued
  // by a host task first: the host runs ahead of the device within the forward, and starts
  // a forward once the previous forward's inputs have arrived (the received patch, the
  // previous step), so it runs at most one forward ahead.
  // With `host_waits` false the host does not wait for the inputs at all, only for text
  // encoding: PipeFusion's patch loop takes each received patch with a NCCL request's wait(),
  // which orders the device stream after the transfer and returns on the host at once
  // (xDiT's PipelineGroupCoordinator.get_pipeline_recv_data), so the host issues patch after
  // patch, step after step, as fast as it can.
  int Forward(int s, bool patched, int step, std::vector<int> deps, double scale = 1.0, bool host_waits = true) {
    constexpr int kChunks = 4;
    const std::string_view tag = patched ? "fwd_patch" : "fwd";
    std::vector<int> host_deps = host_waits ? prev_inputs_[s] : std::vector<int>{text_task_[s]};
    prev_inputs_[s] = deps;
    int last = -1;
    int last_issue = -1;
    Seconds compute(0), comm(0), host(0);
    auto flush = [&]() {
      if (compute.value() <= 0 && comm.value() <= 0 && host.value() <= 0) return;
      if (host.value() > 0) {
        last_issue = Add(host_[s], host * scale, host_deps, TaskKind::kHost, "issue", step);
        deps.push_back(last_issue);
        host_deps.clear();
      }
      last = Add(compute_[s], (compute + comm) * scale, deps, TaskKind::kCompute, tag, step, comm * scale);
      deps = {last};
      compute = comm = host = Seconds(0);
    };
    if (s == 0) {
      compute += costs_.Overhead(patched);  // embeddings
      host += costs_.OverheadHost(patched);
      // A ControlNet runs first, over the whole forward's tokens; the DiT's stream is then
      // gathered wherever its hints are added.
      const BlockCost& control = costs_.Control();
      compute += control.compute();
      comm += control.comm() + costs_.ControlGathers();
      host += control.pre_host + control.attn_host + control.post_host;
    }
    // A patch's forward is short and a step holds many: one chunk each keeps the task count
    // down while the host still overlaps with the previous patch's forward.
    const int chunks = patched ? 1 : kChunks;
    const int per_chunk = std::max(1, (block_count_[s] + chunks - 1) / chunks);
    for (int j = 0; j < block_count_[s]; ++j) {
      const BlockCost& b = costs_.Block(first_block_[s] + j, patched);
      compute += b.compute();
      comm += b.comm();
      host += b.pre_host + b.attn_host + b.post_host;
      if ((j + 1) % per_chunk == 0) flush();
    }
    flush();
    if (last == -1) last = Add(compute_[s], Seconds(0), deps, TaskKind::kCompute, tag, step);
    return s == stages_ - 1 ? SchedulerStep(s, last, last_issue, step) : last;
  }

  // The scheduler step after the last stage's forward (StageCosts::SchedulerHost): the host
  // issues its ops after the forward's (`issued`, the forward's last host task), and the
  // latent it returns is ready once they are issued (their device work is a few elementwise
  // passes over the latent).
  int SchedulerStep(int s, int after, int issued, int step) {
    if (costs_.SchedulerHost().value() <= 0) return after;
    const int issue = Add(host_[s], costs_.SchedulerHost(), {issued}, TaskKind::kHost, "scheduler", step);
    return Add(compute_[s], Seconds(0), {after, issue}, TaskKind::kCompute, "scheduler_step", step);
  }

  // CFG parallel: the last stage all-gathers the noise prediction of the two branches.
  int CfgGather(int after, bool patched, int step) {
    if (c_.cfg < 2) return after;
    Seconds& t = cfg_gather_[patched ? 1 : 0];
    if (t.value() < 0) {
      const auto group = layout_.GroupOf(rep_.back(), Axis::kCfg);
      const double share = in_.comm->Sharing(group, layout_, Axis::kCfg);
      t = in_.comm->Time(Collective::kAllGather, costs_.Latent(patched) * c_.cfg, group, share);
    }
    return Add(comm_.back(), t, {after}, TaskKind::kComm, "cfg_all_gather", step);
  }

  // Point-to-point time between two stages' representatives, with every PipeFusion
  // group's same pair transferring at once. Memoised: the groups are the same every call.
  Seconds P2p(int from, int to, Bytes bytes) {
    auto key = std::make_tuple(from, to, bytes.value());
    auto it = p2p_cache_.find(key);
    if (it != p2p_cache_.end()) return it->second;
    const std::vector<int> pair = {rep_[from], rep_[to]};
    double share = 1.0;  // a pair inside one socket shares nothing
    if (in_.comm->TierOf(pair) != LinkTier::kIntra) {
      // Every PipeFusion group's ranks at stages `from` and `to` form a concurrent pair.
      share = in_.comm->Sharing(pair, layout_.world_size(), [&](int r) -> std::vector<int> {
        const int stage = layout_.IndexOf(r, Axis::kPipeFusion);
        if (stage != from && stage != to) return {};
        RankCoords c = layout_.CoordsOf(r);
        c.index[static_cast<int>(Axis::kPipeFusion)] = from;
        const int a = layout_.RankOf(c);
        c.index[static_cast<int>(Axis::kPipeFusion)] = to;
        return {a, layout_.RankOf(c)};
      });
    }
    const Seconds t = in_.comm->Time(Collective::kSendRecv, bytes, pair, share);
    p2p_cache_.emplace(key, t);
    return t;
  }

  int BuildSync(int steps) {
    int prev = text_task_[0];
    for (int k = 0; k < steps; ++k) {
      int f = Forward(0, false, k, {prev});
      prev = CfgGather(f, false, k);
    }
    return prev;
  }

  int BuildPipeFusion(int steps) {
    const int N = stages_;
    const int M = std::max(1, c_.patches);
    const int w = std::min(steps, c_.warmup);
    const auto skips = SkipPairs();
    // Latent of the previous step, per patch (warm-up steps return the whole latent).
    std::vector<int> latent(M, -1);
    int whole = text_task_[0];
    for (int s = 1; s < N; ++s) whole = std::max(whole, text_task_[s]);
    std::vector<int> text_ready(text_task_);
    for (int k = 0; k < steps; ++k) {
      const bool patched = k >= w;
      const int patches = patched ? M : 1;
      for (int p = 0; p < patches; ++p) {
        int in = patched && k > w ? latent[p] : whole;
        std::vector<int> skip_in(N, -1);
        for (int s = 0; s < N; ++s) {
          std::vector<int> deps = {in, text_ready[s], skip_in[s]};
          // A warm-up forward is the whole image through this stage, after the stage before
          // (xDiT runs warm-up steps synchronously through every stage). Patched forwards: the
          // host never blocks on a received patch (see Forward).
          int f = Forward(s, patched, k, deps, 1.0,
                          /*host_waits=*/!patched || in_.compute->runtime() == Runtime::kEngine);
          for (const auto& [from, to, count] : skips) {
            if (from == s) {
              skip_in[to] = Add(comm_[s], P2p(s, to, costs_.Activation(patched) * count), {f}, TaskKind::kComm,
                                "send_skips", k);
            }
          }
          if (s + 1 < N) {
            in = Add(comm_[s], P2p(s, s + 1, costs_.Activation(patched)), {f}, TaskKind::kComm, "send_patch", k);
          } else {
            int g = CfgGather(f, patched, k);
            in = Add(comm_[s], P2p(N - 1, 0, costs_.Latent(patched)), {g}, TaskKind::kComm, "return_latent", k);
          }
        }
        if (patched) {
          latent[p] = in;
        } else {
          whole = in;
        }
      }
      if (patched && k + 1 == steps) {
        // The loop ends when every patch's latent is back.
        int end = latent[0];
        for (int p = 1; p < M; ++p) end = Add(comm_[0], Seconds(0), {end, latent[p]}, TaskKind::kComm, "join", -1);
        return end;
      }
    }
    return whole;
  }

  // (from stage, to stage, skip activations) for long skips that cross stages.
  std::vector<std::tuple<int, int, int>> SkipPairs() const {
    std::map<std::pair<int, int>, int> count;
    if (!in_.model->skip_connections) return {};
    const int L = in_.model->num_blocks();
    auto stage_of = [&](int block) {
      for (int s = 0; s < stages_; ++s) {
        if (block < first_block_[s] + block_count_[s]) return s;
      }
      return stages_ - 1;
    };
    for (int i = 0; i < L / 2; ++i) {
      const int a = stage_of(i), b = stage_of(L - 1 - i);
      if (a != b) count[{a, b}]++;
    }
    std::vector<std::tuple<int, int, int>> out;
    for (const auto& [k, v] : count) out.emplace_back(k.first, k.second, v);
    return out;
  }

  int BuildDistriFusion(int steps) {
    const int L = in_.model->num_blocks();
    const int w = std::min(steps, std::max(1, c_.warmup));
    const auto group = layout_.GroupOf(rep_[0], Axis::kDistriFusion);
    const double share = in_.comm->Sharing(group, layout_, Axis::kDistriFusion);
    // Every layer gathers the fresh K and V of all patches for the next step: the image rows,
    // and the text rows where each rank holds a share of the text (its length divides) and
    // the blocks attend over it (joint, single), as the executor does.
    const RankWork& work = costs_.Work(false);
    const bool text_split = work.txt_tokens < work.seq_txt_tokens &&
                            in_.model->num_blocks(BlockFamily::kJoint) + in_.model->num_blocks(BlockFamily::kSingle) > 0;
    const double rows = static_cast<double>(work.seq_img_tokens + (text_split ? work.seq_txt_tokens : 0));
    const double kv = 2.0 * kElementBytes * work.batch * rows * in_.model->hidden;
    const Seconds gather = in_.comm->Time(Collective::kAllGather, Bytes(kv), group, share);
    std::vector<int> gathered(L, -1);
    int prev = text_task_[0];
    int last_issue = -1;
    for (int k = 0; k < steps; ++k) {
      const bool sync = k < w;
      for (int i = 0; i < L; ++i) {
        const BlockCost& b = costs_.Block(i, false);
        Seconds t = b.compute() + (i == 0 ? costs_.Overhead(false) : Seconds(0));
        const Seconds host = b.pre_host + b.attn_host + b.post_host + (i == 0 ? costs_.OverheadHost(false) : Seconds(0));
        last_issue = Add(host_[0], host, i == 0 ? std::vector<int>{prev} : std::vector<int>{}, TaskKind::kHost,
                         "issue", k);
        std::vector<int> deps = {prev, last_issue};
        if (!sync) deps.push_back(gathered[i]);
        prev = Add(compute_[0], t, deps, TaskKind::kCompute, "fwd", k);
        gathered[i] = Add(comm_[0], gather, {prev}, TaskKind::kComm, "kv_all_gather", k);
        if (sync) prev = gathered[i];  // warm-up: the next layer waits for fresh K/V
      }
      prev = SchedulerStep(0, prev, last_issue, k);
      prev = CfgGather(prev, false, k);
    }
    int end = prev;
    for (int i = 0; i < L; ++i) end = std::max(end, gathered[i]);
    return Add(comm_[0], Seconds(0), {prev, end}, TaskKind::kComm, "join", -1);
  }

  const SimInput& in_;
  const SimOptions& opt_;
  const RankLayout& layout_;
  const StageCosts& costs_;
  TaskScheduler& e_;
  const ParallelConfig& c_;
  int stages_ = 1;
  std::vector<int> rep_, host_, compute_, comm_, first_block_, block_count_;
  std::vector<std::vector<int>> prev_inputs_;  // per stage: the last forward's input tasks
  std::map<std::tuple<int, int, double>, Seconds> p2p_cache_;
  Seconds cfg_gather_[2] = {Seconds(-1), Seconds(-1)};
  std::vector<int> text_task_, vae_task_;
  int dit_end_ = -1;
};

// Steps at the end of a run whose schedule may differ from the steady state (the pipeline
// drains; nothing of a following step competes for the streams).
constexpr int kTailSteps = 2;

// What one simulated run measured, per stage.
struct RunStats {
  Seconds total, text, dit, vae, warmup;
  Seconds last_step;  // end of the last step's work minus end of the one before
  // True when the tasks of a step before the tail start exactly one period after the
  // corresponding tasks of the step before it: the schedule has reached its periodic state.
  bool periodic = false;
  std::vector<Seconds> busy;  // per stage, whole generation
  // Per stage: the breakdown of every step (indexed by step; has_step marks the steps
  // where the stage ran anything), and of the whole loop.
  std::vector<std::vector<StepBreakdown>> by_step;
  std::vector<std::vector<char>> has_step;
  std::vector<StepBreakdown> loop;
  int check_step = -1;  // the step whose periodicity was checked
  Seconds period;       // its start minus the previous step's, when periodic
  // The mean interval between the ends of the steps from the first after the warm-up to
  // check_step: the step time of a schedule that never becomes periodic (a host that runs
  // further ahead every step); zero when there are not two such steps.
  Seconds mean_step;
};

RunStats Collect(const TaskScheduler& e, const GraphBuilder& g, int warmup_steps) {
  RunStats r;
  const int N = g.stages();
  const int n = e.num_tasks();
  Seconds text_end(0), dit_end = e.end(g.dit_end()), warm_end(0);
  for (int s = 0; s < N; ++s) text_end = std::max(text_end, e.end(g.text_task(s)));
  for (int s = 0; s < N; ++s) r.total = std::max(r.total, e.end(g.vae_task(s)));
  r.text = text_end;
  r.dit = dit_end - text_end;
  r.vae = r.total - dit_end;
  r.busy.assign(N, Seconds(0));
  r.loop.assign(N, StepBreakdown{});
  int steps = 0;  // one past the largest step of any task
  for (int i = 0; i < n; ++i) steps = std::max(steps, e.task(i).step + 1);
  r.by_step.assign(N, std::vector<StepBreakdown>(static_cast<size_t>(steps)));
  r.has_step.assign(N, std::vector<char>(static_cast<size_t>(steps), 0));
  // Step ends: the latest end of any task of that step (steps with no task are absent).
  std::vector<Seconds> step_end(static_cast<size_t>(steps), Seconds(0));
  std::vector<char> present(static_cast<size_t>(steps), 0);
  for (int i = 0; i < n; ++i) {
    const int k = e.task(i).step;
    if (k < 0) continue;
    if (k < warmup_steps) warm_end = std::max(warm_end, e.end(i));
    step_end[k] = present[k] ? std::max(step_end[k], e.end(i)) : e.end(i);
    present[k] = 1;
  }
  r.warmup = warm_end > text_end ? warm_end - text_end : Seconds(0);
  std::vector<int> listed;  // the present steps, ascending
  for (int k = 0; k < steps; ++k) {
    if (present[k]) listed.push_back(k);
  }
  if (listed.size() >= 2) {
    const int last = listed.back();
    r.last_step = step_end[last] - step_end[listed[listed.size() - 2]];
    // The last few steps drain the pipeline and may differ; stationarity is judged on the
    // pair of steps kTailSteps before the end.
    const int b_step = last - kTailSteps;
    std::vector<double> a, b;  // starts of those steps' tasks, in build order
    for (int i = 0; i < n; ++i) {
      if (e.task(i).step == b_step - 1) a.push_back(e.start(i).value());
      if (e.task(i).step == b_step) b.push_back(e.start(i).value());
    }
    r.periodic = b_step - 1 >= warmup_steps && !a.empty() && a.size() == b.size();
    const double period = b.empty() || a.empty() ? 0 : b.front() - a.front();
    r.check_step = b_step;
    r.period = Seconds(period);
    auto is_present = [&](int k) { return k >= 0 && k < steps && present[k]; };
    if (is_present(warmup_steps) && is_present(b_step) && b_step > warmup_steps) {
      r.mean_step = (step_end[b_step] - step_end[warmup_steps]) / static_cast<double>(b_step - warmup_steps);
    }
    for (size_t i = 0; r.periodic && i < a.size(); ++i) {
      r.periodic = std::abs(b[i] - a[i] - period) <= 1e-9 * std::max(period, 1e-12);
    }
    if (!r.periodic && b_step - 1 >= warmup_steps) {
      // A host that issues faster than the device runs gets further ahead every step, so its
      // tasks never keep one period; the device's may. When every device task keeps one
      // period, none of them waited for the host, and the host's tasks keep a period no
      // longer than the device's, the host stays ahead for good and the device's period
      // holds for every later step.
      std::vector<double> da, db, ha, hb;  // device and host starts of the two steps
      bool held = false;
      for (int i = 0; i < n; ++i) {
        const TaskSpec& t = e.task(i);
        if (t.step != b_step - 1 && t.step != b_step) continue;
        const bool host = t.kind == TaskKind::kHost;
        (host ? (t.step == b_step ? hb : ha) : (t.step == b_step ? db : da)).push_back(e.start(i).value());
        const int d = e.last_dep(i);
        // The host held a device task back when the task started as its host task ended.
        held = held || (!host && d >= 0 && e.task(d).kind == TaskKind::kHost && e.start(i) <= e.end(d));
      }
      const auto uniform = [](const std::vector<double>& x, const std::vector<double>& y, double* shift) {
        if (x.empty() || x.size() != y.size()) return false;
        *shift = y.front() - x.front();
        for (size_t i = 0; i < x.size(); ++i) {
          if (std::abs(y[i] - x[i] - *shift) > 1e-9 * std::max(std::abs(*shift), 1e-12)) return false;
        }
        return true;
      };
      double device_period = 0, host_period = 0;
      if (!held && uniform(da, db, &device_period) &&
          ((ha.empty() && hb.empty()) || (uniform(ha, hb, &host_period) && host_period <= device_period))) {
        r.periodic = true;
        r.period = Seconds(device_period);
      }
    }
  } else if (!listed.empty()) {
    r.last_step = r.dit;
  }
  // One pass over the tasks, each compute stream's in submission order.
  std::vector<int> stage_of_stream(static_cast<size_t>(e.num_streams()), -1);
  for (int s = 0; s < N; ++s) stage_of_stream[static_cast<size_t>(g.compute_stream(s))] = s;
  std::vector<Seconds> prev_end(static_cast<size_t>(N), Seconds(-1));
  for (int i = 0; i < n; ++i) {
    const TaskSpec& t = e.task(i);
    const int s = stage_of_stream[static_cast<size_t>(t.stream)];
    if (s < 0) continue;
    r.busy[s] += t.duration;
    if (t.step < 0) {
      prev_end[s] = e.end(i);
      continue;
    }
    StepBreakdown& b = r.by_step[s][t.step];
    r.has_step[s][t.step] = 1;
    b.compute += t.duration - t.comm_part;
    b.exposed_comm += t.comm_part;
    const Seconds gap = prev_end[s].value() >= 0 ? e.start(i) - prev_end[s] : Seconds(0);
    prev_end[s] = e.end(i);
    if (gap.value() <= 0) continue;
    const int d = e.last_dep(i);
    // Waiting for the host to issue the work is framework overhead; waiting on this rank's
    // own communication is exposed communication; waiting on another stage (its compute,
    // or the transfer it started late) is pipeline bubble.
    // A host task that itself waited for data (the previous stage's patch) only passes on
    // a pipeline wait.
    const bool host_waited_for_data =
        d >= 0 && e.task(d).kind == TaskKind::kHost && e.last_dep(d) >= 0 &&
        e.task(e.last_dep(d)).stream != e.task(d).stream && e.start(d) == e.end(e.last_dep(d)) &&
        e.stream_rank(e.task(e.last_dep(d)).stream) != e.stream_rank(t.stream);
    if (d >= 0 && e.task(d).kind == TaskKind::kHost && !host_waited_for_data) {
      b.host_wait += gap;
    } else if (d >= 0 && e.task(d).kind == TaskKind::kComm &&
               e.stream_rank(e.task(d).stream) == e.stream_rank(t.stream)) {
      const Seconds c = std::min(gap, e.task(d).duration);
      b.exposed_comm += c;
      b.bubble += gap - c;
    } else {
      b.bubble += gap;
    }
  }
  for (int s = 0; s < N; ++s) {
    for (const StepBreakdown& b : r.by_step[s]) {
      r.loop[s].compute += b.compute;
      r.loop[s].exposed_comm += b.exposed_comm;
      r.loop[s].bubble += b.bubble;
      r.loop[s].host_wait += b.host_wait;
    }
  }
  return r;
}

Status TooManyTasks(int steps, const ParallelConfig& config) {
  return Status::InvalidArgument(fmt::format(
      "simulating {} steps of '{}' takes more than {} million tasks (the limit that keeps one simulation near "
      "1 GB), because its schedule never repeats exactly; give fewer --steps (per-step figures settle within a "
      "few hundred steps)",
      steps, Label(config), kMaxSimulatedTasks / 1'000'000));
}

StatusOr<RunStats> RunOnce(const SimInput& in, const SimOptions& opt, const RankLayout& layout,
                           const StageCosts& costs, int steps, TaskScheduler* engine) {
  engine->Clear();  // a longer run replaces a shorter one that was not yet periodic
  engine->set_max_tasks(kMaxSimulatedTasks);
  GraphBuilder g(in, opt, layout, costs, engine);
  g.Build(steps);
  if (engine->dropped_tasks() > 0) return TooManyTasks(steps, in.config);
  DITUNE_RETURN_IF_ERROR(engine->Run());
  const int warmup = (in.config.pipefusion > 1 || in.config.distrifusion > 1)
                         ? std::min(steps, in.config.distrifusion > 1 ? std::max(1, in.config.warmup) : in.config.warmup)
                         : 0;
  return Collect(*engine, g, warmup);
}

}  // namespace

StatusOr<SimResult> Simulate(const SimInput& in, const SimOptions& opt, TaskScheduler* engine_out) {
  if (in.model == nullptr || in.cluster == nullptr || in.compute == nullptr || in.comm == nullptr) {
    return Status::Internal("Simulate: incomplete input");
  }
  DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(*in.model, in.workload));
  if (in.config.world_size() != in.cluster->gpus()) {
    return Status::InvalidArgument(fmt::format("config '{}' needs {} GPUs, the cluster has {}", Label(in.config),
                                               in.config.world_size(), in.cluster->gpus()));
  }
  DITUNE_ASSIGN_OR_RETURN(RankLayout layout, RankLayout::Create(in.config, in.cluster->gpus_per_node()));
  StageCosts costs(*in.model, tokens, in.workload, in.config, layout, *in.compute, *in.comm,
                   /*kernel_breakdown=*/false, opt.tp_split, SequentialForwards(*in.model, in.config, opt.memory.placement),
                   opt.ring_merge_fused);

  const int steps = in.workload.steps;
  const bool pipelined = in.config.pipefusion > 1 || in.config.distrifusion > 1;
  const int warmup = pipelined ? std::min(steps, in.config.distrifusion > 1 ? std::max(1, in.config.warmup)
                                                                           : in.config.warmup)
                               : 0;
  SimResult res;
  RunStats full;
  TaskScheduler local;
  TaskScheduler* engine = engine_out != nullptr ? engine_out : &local;
  // Extrapolation: simulate K steps and check, on a step before the last few (which drain
  // the pipeline), that every task starts exactly one period after its counterpart in the
  // step before. Every steady step has the same tasks and durations, so a schedule that
  // has become periodic stays periodic: each further step adds one period, and the tail is
  // the same shifted. If not yet periodic (the host's lead still drifting), K doubles; a K
  // of more than half the steps would save less than it risks (a failed try costs K more
  // steps), so the full step count is run instead.
  bool done = false;
  double tasks_per_step = 0;  // of the last try, to refuse a full run too large before building it
  if (opt.extrapolate) {
    for (int k = warmup + 2 * kTailSteps + 2; 2 * k <= steps && !done; k = 2 * k) {
      DITUNE_ASSIGN_OR_RETURN(RunStats r, RunOnce(in, opt, layout, costs, k, engine));
      tasks_per_step = static_cast<double>(engine->num_tasks()) / k;
      if (!r.periodic) continue;
      const double extra = steps - k;
      full = r;
      full.dit = r.dit + r.period * extra;
      full.total = full.text + full.dit + r.vae;
      for (size_t s = 0; s < full.busy.size(); ++s) {
        const bool has = r.check_step >= 0 && r.check_step < static_cast<int>(r.by_step[s].size());
        const StepBreakdown b = has ? r.by_step[s][r.check_step] : StepBreakdown{};
        full.busy[s] = r.busy[s] + (b.compute + b.exposed_comm) * extra;
        full.loop[s] = b;
      }
      res.step = r.period;
      res.simulated_steps = k;
      done = true;
    }
  }
  if (!done) {
    if (tasks_per_step * steps > static_cast<double>(kMaxSimulatedTasks)) return TooManyTasks(steps, in.config);
    DITUNE_ASSIGN_OR_RETURN(full, RunOnce(in, opt, layout, costs, steps, engine));
    res.simulated_steps = steps;
    res.step = full.last_step;
    for (size_t s = 0; s < full.loop.size(); ++s) {
      // The steady step: the last one before the tail when there is one, else the average.
      auto& b = full.loop[s];
      if (full.check_step >= 0 && full.check_step < static_cast<int>(full.by_step[s].size()) &&
          full.has_step[s][full.check_step]) {
        b = full.by_step[s][full.check_step];
        // The period of the first tasks is the step only when every task keeps it.
        if (full.periodic && full.period.value() > 0) {
          res.step = full.period;
        } else if (full.mean_step.value() > 0) {
          res.step = full.mean_step;
        }
      } else {
        b.compute = b.compute / steps;
        b.exposed_comm = b.exposed_comm / steps;
        b.bubble = b.bubble / steps;
        b.host_wait = b.host_wait / steps;
      }
    }
  }
  res.total = full.total;
  res.text_encode = full.text;
  res.dit = full.dit;
  res.vae_decode = full.vae;
  res.warmup = full.warmup;
  res.tasks = engine->num_tasks();
  // The slowest stage's per-step breakdown.
  size_t worst = 0;
  for (size_t s = 1; s < full.loop.size(); ++s) {
    if (full.loop[s].compute > full.loop[worst].compute) worst = s;
  }
  res.steady = full.loop[worst];

  // Every rank: its stage's representative's numbers; memory per rank.
  // Every rank holds an equal share of everything the memory model counts, and every stage
  // the same number of ranks, so the stages' figures are the ranks' (thousands of ranks
  // cost nothing unless every rank is asked for).
  const MemoryBreakdown memory = RankMemory(*in.model, tokens, in.workload, in.config, *in.cluster->gpu, opt.memory);
  res.peak_memory = memory.peak();
  res.fits = memory.fits();
  Seconds max_busy(0), sum_busy(0);
  for (const Seconds& b : full.busy) {
    max_busy = std::max(max_busy, b);
    sum_busy += b;
  }
  std::vector<bool> listed(full.busy.size(), false);
  for (int r = 0; r < layout.world_size(); ++r) {
    const int stage = layout.IndexOf(r, Axis::kPipeFusion);
    if (!opt.every_rank && listed[static_cast<size_t>(stage)]) continue;
    listed[static_cast<size_t>(stage)] = true;
    RankResult rr;
    rr.rank = r;
    rr.stage = stage;
    rr.busy = full.busy[static_cast<size_t>(stage)];
    rr.memory = memory;
    res.ranks.push_back(rr);
    if (!opt.every_rank && res.ranks.size() == full.busy.size()) break;
  }
  const double mean = sum_busy.value() / static_cast<double>(full.busy.size());
  res.imbalance = mean > 0 ? max_busy.value() / mean - 1.0 : 0.0;
  return res;
}

}  // namespace ditune
