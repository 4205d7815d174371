#include <fmt/format.h>

#include <algorithm>

#include "executor/engine/engine_impl.h"

namespace ditune::exec {

double DitEngine::Impl::CommSeconds() const {
  double total = 0;
  for (const auto* g : {ulysses.get(), ring.get(), tp.get(), cfg.get(), distri.get(), pp_fwd.get(),
                        pp_back.get()}) {
    if (g != nullptr) total += g->seconds();
  }
  return total;
}

StatusOr<std::vector<Mat>> DitEngine::Impl::GatherLatents(const float* xf, int64_t N, int64_t R,
                                                          int P) {
  const int64_t mine_n = static_cast<int64_t>(P) * R * lat;
  std::vector<float> mine(static_cast<size_t>(mine_n)),
      all(static_cast<size_t>(mine_n * world->size()));
  DITUNE_RETURN_IF_ERROR(k->DownloadF32(xf, mine.data(), mine_n));
  DITUNE_RETURN_IF_ERROR(
      world->host()->AllGather(mine.data(), all.data(), static_cast<size_t>(mine_n)));
  DITUNE_ASSIGN_OR_RETURN(RankLayout layout,
                          RankLayout::Create(work.config, work.config.world_size()));
  std::vector<Mat> latents(static_cast<size_t>(wl.batch), Mat::Zero(N, lat));
  for (int q = 0; q < world->size(); ++q) {
    const RankCoords c = layout.CoordsOf(q);
    if (c[Axis::kPipeFusion] != stages - 1) continue;  // the last stage holds the latents
    const int share = c[Axis::kSp] + sp * c[Axis::kDistriFusion];
    for (int i = 0; i < P; ++i) {
      const float* rows = all.data() + (q * static_cast<int64_t>(P) + i) * R * lat;
      for (const Segment& g : ImageSegments(share, 0, R)) {
        latents.at(static_cast<size_t>(c[Axis::kDp] * P + i)).middleRows(g.global, g.rows) =
            Eigen::Map<const Mat>(rows + g.local * lat, g.rows, lat);
      }
    }
  }
  return latents;
}

StatusOr<EngineResult> DitEngine::Impl::Generate() {
  DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(*m, wl));
  const int S = wl.steps;
  const int P = work.prompts, B = work.branches;
  const int64_t T = tokens.text_tokens;
  const bool first_stage = work.first_block == 0;
  const bool last_stage = work.first_block + work.blocks == m->num_blocks();
  // This rank's image rows per step (every patch's rows).
  const int64_t R = work.warmup.img_tokens;
  const int64_t bmax = static_cast<int64_t>(P) * B;
  // Data parallelism: this rank's prompts. CFG parallelism: its one branch (1 = the
  // unconditional one).
  const int first_prompt = coords[Axis::kDp] * P;
  const int cfg_branch = work.config.cfg == 2 ? coords[Axis::kCfg] : 0;
  // Prompt embeddings of every sequence (prompt i, branch j at i B + j) (model_inputs.h).
  DITUNE_ASSIGN_OR_RETURN(void* emb, Scratch(Buf::kPromptEmb, bmax * T * m->text_hidden * eb));
  for (int i = 0; i < P; ++i) {
    for (int j = 0; j < B; ++j) {
      const Mat e = PromptEmbedding(*m, opt.seed, first_prompt + i, (B == 2 ? j : cfg_branch) == 1);
      DITUNE_RETURN_IF_ERROR(
          k->Upload(e.data(), At(emb, (i * B + j) * T * m->text_hidden), e.size()));
    }
  }
  // Initial noise: the rows of the whole latent this rank holds (exact runs: all of it).
  DITUNE_ASSIGN_OR_RETURN(auto xf_buf, d->Alloc(P * R * lat * 4));
  auto* xf = static_cast<float*>(xf_buf->data());
  DITUNE_ASSIGN_OR_RETURN(void* xb, Scratch(Buf::kLatentAct, P * R * lat * eb));
  row_patches = pipeline ? work.steady.patches : 1;
  shares = sp * work.config.distrifusion;
  share_rows = R / row_patches;
  for (int i = 0; i < P; ++i) {
    const Mat full = RandomMat(tokens.image_tokens(), lat, 1.0f, opt.seed,
                               1000 + static_cast<uint64_t>(first_prompt + i));
    for (const Segment& g : ImageSegments(seq_index, 0, R)) {
      const float* rows = full.data() + g.global * lat;
      DITUNE_RETURN_IF_ERROR(k->UploadF32(rows, xf + (i * R + g.local) * lat, g.rows * lat));
      DITUNE_RETURN_IF_ERROR(k->Upload(rows, At(xb, (i * R + g.local) * lat), g.rows * lat));
    }
  }
  // Conditioning of every step, computed before the loop (the host never stalls the device).
  DITUNE_ASSIGN_OR_RETURN(void* cond, Scratch(Buf::kConditioning, S * H * eb));
  for (int s = 0; s < S; ++s) {
    const float sigma = 1.0f - static_cast<float>(s) / S;
    const Vec c = inputs->Conditioning(sigma * 1000.0f);
    DITUNE_RETURN_IF_ERROR(k->Upload(c.data(), At(cond, s * H), H));
  }
  DITUNE_ASSIGN_OR_RETURN(void* pred, Scratch(Buf::kPred, bmax * R * lat * eb));
  kv_pending.clear();
  fwd_pending.clear();
  back_pending.clear();
  fwd_pending.resize(static_cast<size_t>(std::max(1, work.steady.patches)));
  back_pending.resize(fwd_pending.size());
  kv_pending.resize(static_cast<size_t>(work.blocks));
  if (pipeline || distri_real || distri_in_turn) {
    // The K/V buffers start empty every generation (warm-up steps fill them).
    for (int i = 0; i < work.blocks; ++i) {
      const int64_t n_kv = bmax * KvRows(i, T, tokens.image_tokens()) * KvWidth();
      DITUNE_ASSIGN_OR_RETURN(void* kv, Scratch(Buf::kStaleKv, i, n_kv * eb));
      DITUNE_RETURN_IF_ERROR(k->Zero(kv, n_kv));
    }
  }
  const bool cfg_gather = parallel && work.config.cfg == 2;
  void* pred_all = nullptr;
  if (cfg_gather) {
    DITUNE_ASSIGN_OR_RETURN(pred_all, Scratch(Buf::kPredAll, 2 * bmax * R * lat * eb));
  }
  DITUNE_RETURN_IF_ERROR(d->stream()->Synchronize());

  EngineResult out;
  const double comm_before = CommSeconds();
  std::vector<std::unique_ptr<Event>> marks;
  DITUNE_ASSIGN_OR_RETURN(auto start, d->stream()->Record());
  for (int s = 0; s < S; ++s) {
    const bool warm = s < work.warmup_steps;
    const RankWork& rw = warm ? work.warmup : work.steady;
    const int patches = warm ? 1 : rw.patches;
    const int64_t b = rw.batch, ni = rw.img_tokens;
    kv_sync = warm;
    kv_gather_after = s + 1 < S;
    const void* c = At(cond, s * H);
    // Modulation of every block and the final layer for this step (shared by all sequences).
    const int64_t per_block = 6 * H + 6 * Ht;
    DITUNE_ASSIGN_OR_RETURN(void* mods_v,
                            Scratch(Buf::kModulation, (work.blocks * per_block + 2 * H) * 4));
    auto* mods = static_cast<float*>(mods_v);
    for (int i = 0; i < work.blocks; ++i) {
      auto& bw = blocks[i];
      float* mb = mods + i * per_block;
      const int64_t n = bw.family == BlockFamily::kSingle ? 3 * H : 6 * H;
      DITUNE_RETURN_IF_ERROR(Modulation(c, bw.p("mod"), n, mb));
      if (bw.family == BlockFamily::kJoint)
        DITUNE_RETURN_IF_ERROR(Modulation(c, bw.p("tmod"), 6 * Ht, mb + 6 * H));
    }
    float* fmod = mods + work.blocks * per_block;
    if (last_stage) DITUNE_RETURN_IF_ERROR(Modulation(c, io.at("fmod")->data(), 2 * H, fmod));
    // Text embedding of every sequence, and the cross blocks' text K/V, once per step.
    DITUNE_ASSIGN_OR_RETURN(void* ctx, Scratch(Buf::kText, b * T * Ht * eb));
    DITUNE_RETURN_IF_ERROR(Mm(emb, m->text_hidden, 0, io.at("text")->data(), Ht, ctx, Ht, 0, b * T,
                              m->text_hidden, Ht, 1));
    std::vector<void*> xkv(work.blocks, nullptr);
    for (int i = 0; i < work.blocks; ++i) {
      if (blocks[i].family != BlockFamily::kCross) continue;
      const int64_t Hl = H / rw.tp;
      DITUNE_ASSIGN_OR_RETURN(xkv[i], Scratch(Buf::kCrossKv, i, b * T * 2 * Hl * eb));
      DITUNE_RETURN_IF_ERROR(
          Mm(ctx, Ht, 0, blocks[i].p("xkv"), 2 * Hl, xkv[i], 2 * Hl, 0, b * T, Ht, 2 * Hl, 1));
    }
    for (int p = 0; p < patches; ++p) {
      // This forward's rows: its share of the text (all of it when the text is not split)
      // and of the image (sequence-parallel or DistriFusion index, then patch). PipeFusion's
      // patches carry no text but the first, which carries all of it; the later patches
      // attend over the text K/V the first left in the buffers (xDiT's scheme).
      RankWork fw = rw;
      if (pipeline && !warm) fw.txt_tokens = p == 0 ? work.warmup.txt_tokens : 0;
      const int64_t nt = HasText() ? fw.txt_tokens : 0;
      DITUNE_ASSIGN_OR_RETURN(Residual st, StreamFor(fw));
      text_row0 = nt < T ? (distri_in_turn ? p : seq_index) * nt : 0;
      fwd_row0 = p * ni;
      for (int64_t i = 0; i < b && nt > 0 && (first_stage || !pipeline); ++i) {
        DITUNE_RETURN_IF_ERROR(k->Copy(At(st.txt, i * st.txt_stride), unified ? H : Ht,
                                       At(ctx, (i * T + text_row0) * Ht), Ht, nt, Ht));
      }
      if (pipeline && first_stage && stages > 1 && s > 0) {
        // The latest latent rows from the last stage: the whole latent after a warm-up
        // step (received before the first patch), else this patch's rows.
        const bool prev_warm = s - 1 < work.warmup_steps;
        if (!prev_warm || p == 0) {
          const int64_t row0 = prev_warm ? 0 : p * ni, rows = prev_warm ? R : ni;
          for (int i = 0; i < P; ++i) {
            DITUNE_ASSIGN_OR_RETURN(auto r, pp_back->Irecv(At(xb, i * R * lat + row0 * lat),
                                                           rows * lat, stages - 1, kTagLatent));
            DITUNE_RETURN_IF_ERROR(r->Wait());
          }
        }
      }
      if (pipeline && !first_stage) {
        // This patch's activations from the previous stage.
        DITUNE_RETURN_IF_ERROR(Handoff(st, b, nt, ni, false, p));
      }
      if (first_stage) {
        // Patch embedding of this forward's rows, each branch of a prompt from the same latent.
        for (int j = 0; j < B; ++j) {
          DITUNE_RETURN_IF_ERROR(Mm(At(xb, p * ni * lat), lat, R * lat, io.at("patch")->data(), H,
                                    At(st.img, j * st.img_stride), H, B * st.img_stride, ni, lat, H,
                                    P));
        }
      }
      for (int i = 0; i < work.blocks; ++i) {
        auto& bw = blocks[i];
        const Dims x = DimsOf(fw, bw.family);
        float* mb = mods + i * per_block;
        cur_block = i;
        switch (bw.family) {
          case BlockFamily::kCross:
            DITUNE_RETURN_IF_ERROR(Cross(bw, mb, xkv[i], x, st));
            break;
          case BlockFamily::kJoint:
            DITUNE_RETURN_IF_ERROR(Joint(bw, mb, mb + 6 * H, x, st));
            break;
          case BlockFamily::kSingle:
            DITUNE_RETURN_IF_ERROR(Single(bw, mb, x, st));
            break;
          case BlockFamily::kSpatial:
          case BlockFamily::kTemporal:
            return Status::NotSupported("the engine has no spatial or temporal blocks");
        }
      }
      if (last_stage) {
        DITUNE_ASSIGN_OR_RETURN(void* h, Scratch(Buf::kNormOut, b * ni * H * eb));
        for (int64_t i = 0; i < b; ++i) {
          DITUNE_RETURN_IF_ERROR(
              Norm(At(st.img, i * st.img_stride), H, At(h, i * ni * H), H, ni, H, fmod, fmod + H));
        }
        DITUNE_RETURN_IF_ERROR(Mm(h, H, ni * H, io.at("out")->data(), lat, At(pred, p * ni * lat),
                                  lat, R * lat, ni, H, lat, b));
      }
      if (pipeline && !last_stage) DITUNE_RETURN_IF_ERROR(Handoff(st, b, nt, ni, true, p));
      if (pipeline && last_stage) {
        // The Euler step of this patch's rows as soon as they are done, then (several
        // stages, more steps to come) the rows back to the first stage.
        const float sigma = 1.0f - static_cast<float>(s) / S,
                    next = 1.0f - static_cast<float>(s + 1) / S;
        const int64_t row0 = p * ni;
        // The rows sent back last step must have left before they change (after a warm-up
        // step: the whole latent, sent from slot 0).
        const bool after_warm = s > 0 && s - 1 < work.warmup_steps;
        DITUNE_RETURN_IF_ERROR(Settle(&back_pending, warm || after_warm ? -1 : p));
        for (int i = 0; i < P; ++i) {
          float* xi = xf + i * R * lat + row0 * lat;
          void* xbi = At(xb, i * R * lat + row0 * lat);
          if (cfg_gather) {
            DITUNE_RETURN_IF_ERROR(
                cfg->AllGather(At(pred, i * R * lat + row0 * lat), pred_all, ni * lat));
            DITUNE_RETURN_IF_ERROR(k->EulerStep(xi, xbi, pred_all, ni * lat, ni * lat, true,
                                                opt.guidance, next - sigma, 1, ni * lat));
          } else {
            const void* cond_pred =
                At(pred, (i * B) * R * lat + row0 * lat);  // the unconditional R lat after it
            DITUNE_RETURN_IF_ERROR(k->EulerStep(xi, xbi, cond_pred, B * R * lat, R * lat, B == 2,
                                                opt.guidance, next - sigma, 1, ni * lat));
          }
        }
        if (stages > 1 && s + 1 < S) {
          auto group = std::make_unique<RequestGroup>();
          for (int i = 0; i < P; ++i) {
            DITUNE_ASSIGN_OR_RETURN(
                auto r, pp_back->Isend(At(xb, i * R * lat + row0 * lat), ni * lat, 0, kTagLatent));
            group->Add(std::move(r));
          }
          back_pending[static_cast<size_t>(p)] = std::move(group);
        }
      }
    }
    if (last_stage && !pipeline) {
      const float sigma = 1.0f - static_cast<float>(s) / S,
                  next = 1.0f - static_cast<float>(s + 1) / S;
      if (cfg_gather) {
        // The branches of each prompt from the CFG group: [conditional of every prompt;
        // unconditional].
        DITUNE_RETURN_IF_ERROR(cfg->AllGather(pred, pred_all, P * R * lat));
        DITUNE_RETURN_IF_ERROR(k->EulerStep(xf, xb, pred_all, R * lat, P * R * lat, true,
                                            opt.guidance, next - sigma, P, R * lat));
      } else {
        DITUNE_RETURN_IF_ERROR(k->EulerStep(xf, xb, pred, B * R * lat, R * lat, B == 2,
                                            opt.guidance, next - sigma, P, R * lat));
      }
    }
    if (distri_in_turn && !warm) {
      // Every share's fresh rows become the next step's stale ones.
      for (int i = 0; i < work.blocks; ++i) {
        std::swap(scratch[{Buf::kStaleKv, i}], scratch[{Buf::kFreshKv, i}]);
      }
    }
    DITUNE_ASSIGN_OR_RETURN(auto mark, d->stream()->Record());
    marks.push_back(std::move(mark));
  }
  DITUNE_RETURN_IF_ERROR(Settle(&fwd_pending, -1));
  DITUNE_RETURN_IF_ERROR(Settle(&back_pending, -1));
  DITUNE_RETURN_IF_ERROR(d->stream()->Synchronize());
  const Event* prev = start.get();
  for (const auto& e : marks) {
    DITUNE_ASSIGN_OR_RETURN(double sec, e->SecondsSince(*prev));
    out.step_seconds.push_back(sec);
    prev = e.get();
  }
  DITUNE_ASSIGN_OR_RETURN(out.dit_seconds, marks.back()->SecondsSince(*start));
  if (exact && !parallel) {
    for (int i = 0; i < P; ++i) {
      Mat x(R, lat);
      DITUNE_RETURN_IF_ERROR(k->DownloadF32(xf + i * R * lat, x.data(), x.size()));
      out.latents.push_back(std::move(x));
    }
  } else if (parallel) {
    DITUNE_ASSIGN_OR_RETURN(out.latents, GatherLatents(xf, tokens.image_tokens(), R, P));
  }
  out.comm_seconds = CommSeconds() - comm_before;
  out.peak_bytes = d->peak_bytes();
  return out;
}

StatusOr<std::unique_ptr<DitEngine>> DitEngine::Create(const ModelSpec& model,
                                                       const Workload& workload,
                                                       const EngineWork& work, Kernels* kernels,
                                                       const EngineOptions& options, Comm* world) {
  if (kernels == nullptr) return Status::InvalidArgument("the engine needs kernels");
  DITUNE_RETURN_IF_ERROR(ExecutorRunsModel(model));
  if (work.blocks < 1) return Status::InvalidArgument("the engine needs at least one block");
  const ParallelConfig& c = work.config;
  const int n = c.world_size();
  const bool parallel = world != nullptr && n > 1;
  if (world != nullptr && world->size() != n) {
    return Status::InvalidArgument(
        fmt::format("'{}' needs {} ranks; {} were launched", Label(c), n, world->size()));
  }
  if (parallel && world->rank() != work.rank) {
    return Status::Internal(
        fmt::format("engine work of rank {} on world rank {}", work.rank, world->rank()));
  }
  // PipeFusion for real (every block family; with sequence and tensor parallelism inside the
  // stages, CFG and data parallelism beside them) on one device or across the plan's ranks;
  // a rank of a multi-rank plan without a communicator is emulated.
  const bool pipelined = c.pipefusion > 1 || c.patches > 1;
  const bool real_pipeline = pipelined && (parallel || n == 1);
  std::unique_ptr<DitEngine> e(new DitEngine());
  e->impl_ = std::make_unique<Impl>();
  Impl& i = *e->impl_;
  i.m = &model;
  i.wl = workload;
  i.work = work;
  if (options.distrifusion_in_turn) {
    if (world != nullptr || c.distrifusion < 2) {
      return Status::InvalidArgument(
          "computing DistriFusion's shares in turn needs a DistriFusion plan and no communicator");
    }
    // The whole sequence on this device: synchronous steps run it at once; the others run
    // each rank's share (its RankWork) as a patch.
    DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(model, workload));
    i.work.warmup = ComputeRankWork(model, tokens, workload, ParallelConfig{});
    i.work.steady.patches = c.distrifusion;
    i.distri_in_turn = true;
  }
  i.k = kernels;
  i.eb = kernels->element_bytes();
  i.d = kernels->device();
  i.opt = options;
  i.extras = options.architecture_extras;
  if (model.head_dim * model.heads != model.hidden) {
    return Status::NotSupported(fmt::format("{}: heads x head_dim != hidden", model.id));
  }
  DITUNE_ASSIGN_OR_RETURN(RankLayout layout, RankLayout::Create(c, n));
  i.coords = layout.CoordsOf(work.rank);
  i.sp = c.sp();
  i.pipeline = real_pipeline && c.distrifusion == 1;
  i.distri_real = parallel && c.distrifusion > 1;
  i.seq_index = i.coords[Axis::kSp] + i.sp * i.coords[Axis::kDistriFusion];
  i.stages = c.pipefusion;
  i.stage = i.coords[Axis::kPipeFusion];
  i.exact = work.exact || parallel || i.pipeline || i.distri_in_turn;
  if (parallel) {
    i.parallel = true;
    i.world = world;
    // Every rank splits every axis in the same order (collective).
    auto group = [&](Axis a) -> StatusOr<std::unique_ptr<DeviceComm>> {
      DITUNE_ASSIGN_OR_RETURN(auto g, world->Split(layout.GroupOf(work.rank, a)));
      auto dc = std::make_unique<DeviceComm>(g.get(), kernels);
      i.owned_groups.push_back(std::move(g));
      return dc;
    };
    DITUNE_ASSIGN_OR_RETURN(i.ulysses, group(Axis::kUlysses));
    DITUNE_ASSIGN_OR_RETURN(i.ring, group(Axis::kRing));
    DITUNE_ASSIGN_OR_RETURN(i.tp, group(Axis::kTp));
    DITUNE_ASSIGN_OR_RETURN(i.cfg, group(Axis::kCfg));
    DITUNE_ASSIGN_OR_RETURN(i.distri, group(Axis::kDistriFusion));
    // Two communicators over the stages, one per direction, so that hand-offs forward and
    // latents back never queue behind each other (NCCL runs a communicator's transfers in
    // order on its stream).
    DITUNE_ASSIGN_OR_RETURN(i.pp_fwd, group(Axis::kPipeFusion));
    DITUNE_ASSIGN_OR_RETURN(i.pp_back, group(Axis::kPipeFusion));
  }
  DITUNE_RETURN_IF_ERROR(i.Load());
  return e;
}

DitEngine::~DitEngine() = default;

StatusOr<EngineResult> DitEngine::Generate() { return impl_->Generate(); }

int64_t DitEngine::weight_bytes() const { return impl_->weight_bytes; }

}  // namespace ditune::exec
