#include "core/model_spec.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/enum_names.h"
#include "core/json_fields.h"

namespace ditune {

constexpr EnumName<BlockFamily> kBlockFamilyNames[] = {
    {BlockFamily::kCross, "cross"},
    {BlockFamily::kJoint, "joint"},
    {BlockFamily::kSingle, "single"},
    {BlockFamily::kSpatial, "spatial"},
    {BlockFamily::kTemporal, "temporal"},
};

std::string_view BlockFamilyName(BlockFamily f) { return NameIn(kBlockFamilyNames, f); }

bool AttendsOverText(BlockFamily f) { return f == BlockFamily::kJoint || f == BlockFamily::kSingle; }

int ModelSpec::num_blocks() const {
  int n = 0;
  for (const auto& g : blocks) n += g.count;
  return n;
}

int ModelSpec::num_blocks(BlockFamily family) const {
  int n = 0;
  for (const auto& g : blocks) n += g.family == family ? g.count : 0;
  return n;
}

BlockFamily ModelSpec::family_of(int index) const {
  for (const auto& g : blocks) {
    if (index < g.count) return g.family;
    index -= g.count;
  }
  return blocks.back().family;
}

double ModelSpec::text_encoder_params() const {
  double p = 0;
  for (const auto& e : text_encoders) p += e.params;
  return p;
}

std::string RuntimeRunsNoEntryMessage(const ModelSpec& model, std::string_view runtime) {
  std::string others;
  for (const auto& [id, s] : model.runtimes) others += id + ", ";
  return fmt::format("runtime '{}' runs no entry point for {}; runtimes that run it: {}ditune", runtime, model.id,
                     others);
}

Status ExecutorRunsModel(const ModelSpec& m) {
  if (!m.has_frame_blocks()) return Status::Ok();
  return Status::InvalidArgument(fmt::format(
      "ditune's executor runs cross, joint and single blocks; {}'s spatial and temporal blocks are priced by "
      "the planner but not executed yet: plan it for a runtime that runs it (--runtime xdit)",
      m.id));
}

StatusOr<ModelSpec> ParseModelSpec(const nlohmann::json& j, const std::string& origin) {
  constexpr int64_t kBig = 1 << 20;
  JsonFields f(j, origin);
  ModelSpec m;
  m.id = f.String("id");
  m.name = f.String("name");
  m.source = f.String("source");
  m.notes = f.String("notes");
  m.modality = f.Enum("modality", {"image", "video"}) == "video" ? Modality::kVideo
                                                                 : Modality::kImage;
  if (const nlohmann::json* blocks = f.Array("blocks")) {
    int i = 0;
    for (const auto& b : *blocks) {
      JsonFields bf(b, fmt::format("{}: blocks[{}]", origin, i++));
      BlockGroup g;
      std::string fam = bf.Enum("family", {"cross", "joint", "single", "spatial", "temporal"});
      for (BlockFamily bfam : kAllBlockFamilies) {
        if (fam == BlockFamilyName(bfam)) g.family = bfam;
      }
      g.count = static_cast<int>(bf.Int("count", 1, 1000));
      bf.RejectUnknownKeys();
      if (!bf.status().ok()) return bf.status();
      m.blocks.push_back(g);
    }
    if (m.blocks.empty()) f.Fail("field 'blocks' must list at least one block group");
  }
  // "blocks_repeat": N runs the listed groups N times over, in order (Latte's interleaved
  // spatial and temporal blocks).
  if (f.Has("blocks_repeat")) {
    const int repeat = static_cast<int>(f.Int("blocks_repeat", 1, 1000));
    const std::vector<BlockGroup> one = m.blocks;
    for (int r = 1; r < repeat; ++r) m.blocks.insert(m.blocks.end(), one.begin(), one.end());
  }
  m.hidden = static_cast<int>(f.Int("hidden", 1, kBig));
  m.heads = static_cast<int>(f.Int("heads", 1, 4096));
  m.head_dim = static_cast<int>(f.Int("head_dim", 1, 4096));
  m.mlp_hidden = static_cast<int>(f.Int("mlp_hidden", 1, kBig));
  m.mlp_gated = f.Bool("mlp_gated");
  m.attention = f.Enum("attention", {"softmax", "linear"}) == "linear" ? AttentionKind::kLinear
                                                                      : AttentionKind::kSoftmax;
  m.text_hidden = static_cast<int>(f.Int("text_hidden", 1, kBig));
  m.text_stream_hidden = static_cast<int>(f.Int("text_stream_hidden", 1, kBig));
  m.text_tokens = static_cast<int>(f.Int("text_tokens", 0, kBig));
  if (const nlohmann::json* p = f.Object("patch")) {
    JsonFields pf(*p, origin + ": patch");
    m.patch_spatial = static_cast<int>(pf.Int("spatial", 1, 64));
    m.patch_temporal = static_cast<int>(pf.Int("temporal", 1, 64));
    pf.RejectUnknownKeys();
    if (!pf.status().ok()) return pf.status();
  }
  m.latent_channels = static_cast<int>(f.Int("latent_channels", 1, 4096));
  if (const nlohmann::json* v = f.Object("vae")) {
    JsonFields vf(*v, origin + ": vae");
    m.vae_spatial = static_cast<int>(vf.Int("spatial", 1, 256));
    m.vae_temporal = static_cast<int>(vf.Int("temporal", 1, 64));
    if (vf.Has("frame_groups")) {
      if (const nlohmann::json* fg = vf.Object("frame_groups")) {
        JsonFields gf(*fg, origin + ": vae.frame_groups");
        m.frame_group = static_cast<int>(gf.Int("frames", 1, 1024));
        m.latent_frames_per_group = static_cast<int>(gf.Int("latent_frames", 1, 1024));
        gf.RejectUnknownKeys();
        if (!gf.status().ok()) return gf.status();
      }
    }
    m.vae_decoder_params = vf.Number("decoder_params", 0, 1e12);
    if (vf.Has("encoder_params")) m.vae_encoder_params = vf.Number("encoder_params", 0, 1e12);
    if (vf.Has("params_source")) (void)vf.String("params_source");  // where the parameter counts come from
    m.vae_decoder_flops_per_pixel = vf.Number("decoder_flops_per_pixel", 0, 1e12);
    if (vf.Has("decoder_attention_channels")) {
      m.vae_decoder_attention_channels = vf.Number("decoder_attention_channels", 0, 1e6);
    }
    if (vf.Has("decode_memory")) {
      if (const nlohmann::json* dm = vf.Object("decode_memory")) {
        JsonFields df(*dm, origin + ": vae.decode_memory");
        VaeDecodeMemory& d = m.vae_decode_memory;
        d.full_res_channels = df.Number("full_res_channels", 1, 1e5);
        d.live_maps = df.Number("live_maps", 1, 64);
        d.frames_at_once = static_cast<int>(df.Int("frames_at_once", 0, 100000));
        if (df.Has("cache_frames")) d.cache_frames = static_cast<int>(df.Int("cache_frames", 0, 64));
        if (df.Has("cached_channels")) {
          if (const nlohmann::json* cc = df.Array("cached_channels")) {
            int k = 0;
            for (const auto& one : *cc) {
              JsonFields sf(one, fmt::format("{}: vae.decode_memory.cached_channels[{}]", origin, k++));
              const int scale = static_cast<int>(sf.Int("scale", 1, 1024));
              const double channels = sf.Number("channels", 0, 1e7);
              sf.RejectUnknownKeys();
              if (!sf.status().ok()) return sf.status();
              d.cached_channels.push_back({scale, channels});
            }
          }
        }
        if (df.Has("tile_pixels")) d.tile_pixels = static_cast<int>(df.Int("tile_pixels", 16, 1 << 16));
        if (df.Has("tile_overlap")) d.tile_overlap = df.Number("tile_overlap", 0, 0.9);
        if (df.Has("tile_frames")) d.tile_frames = static_cast<int>(df.Int("tile_frames", 0, 100000));
        d.source = df.String("source");
        df.RejectUnknownKeys();
        if (!df.status().ok()) return df.status();
        if (d.source.empty()) {
          return Status::InvalidArgument(
              fmt::format("{}: vae.decode_memory.source is empty: every fact cites its source", origin));
        }
      }
    }
    vf.RejectUnknownKeys();
    if (!vf.status().ok()) return vf.status();
  }
  if (const nlohmann::json* encs = f.Array("text_encoders")) {
    int i = 0;
    for (const auto& e : *encs) {
      JsonFields ef(e, fmt::format("{}: text_encoders[{}]", origin, i++));
      TextEncoderSpec t;
      t.name = ef.String("name");
      t.params = ef.Number("params", 0, 1e13);
      if (ef.Has("unsplit_params")) t.unsplit_params = ef.Number("unsplit_params", 0, t.params);
      if (ef.Has("layers")) t.layers = static_cast<int>(ef.Int("layers", 1, 1000));
      t.image_encoder = ef.OptionalBool("image_encoder", false);
      if (ef.Has("source")) (void)ef.String("source");  // where its figures come from
      ef.RejectUnknownKeys();
      if (!ef.status().ok()) return ef.status();
      m.text_encoders.push_back(std::move(t));
    }
  }
  if (const nlohmann::json* cn = f.Has("control") ? f.Object("control") : nullptr) {
    JsonFields cf(*cn, origin + ": control");
    const std::string fam = cf.Enum("family", {"cross", "joint", "single", "spatial", "temporal"});
    for (BlockFamily bfam : kAllBlockFamilies) {
      if (fam == BlockFamilyName(bfam)) m.control.family = bfam;
    }
    m.control.blocks = static_cast<int>(cf.Int("blocks", 1, 1000));
    m.control.hints = static_cast<int>(cf.Int("hints", 1, 1000));
    m.control.gathers = static_cast<int>(cf.Int("gathers", 0, 1000));
    m.control.params = cf.Number("params", 1, 1e13);
    m.control.source = cf.String("source");
    cf.RejectUnknownKeys();
    if (!cf.status().ok()) return cf.status();
    if (m.control.gathers > m.num_blocks()) {
      return Status::InvalidArgument(fmt::format("{}: control.gathers {} exceeds the DiT's {} blocks", origin,
                                                 m.control.gathers, m.num_blocks()));
    }
  }
  if (const nlohmann::json* eh = f.Has("eager_host_ops") ? f.Object("eager_host_ops") : nullptr) {
    JsonFields ef(*eh, origin + ": eager_host_ops");
    for (BlockFamily bfam : kAllBlockFamilies) {
      const std::string name(BlockFamilyName(bfam));
      if (!ef.Has(name)) continue;
      if (m.num_blocks(bfam) == 0) {
        return Status::InvalidArgument(fmt::format("{}: eager_host_ops.{} is given but the model has no {} blocks",
                                                   origin, name, name));
      }
      m.eager_host_ops.by_family[static_cast<int>(bfam)] = ef.Number(name.c_str(), 1, 100000);
    }
    m.eager_host_ops.source = ef.String("source");
    ef.RejectUnknownKeys();
    if (!ef.status().ok()) return ef.status();
  }
  if (const nlohmann::json* sh = f.Has("step_host_ops") ? f.Object("step_host_ops") : nullptr) {
    JsonFields sf(*sh, origin + ": step_host_ops");
    m.step_host_ops.outside = sf.Number("outside", 1, 100000);
    m.step_host_ops.scheduler = sf.Number("scheduler", 1, 100000);
    m.step_host_ops.source = sf.String("source");
    sf.RejectUnknownKeys();
    if (!sf.status().ok()) return sf.status();
  }
  m.uses_cfg = f.Bool("uses_cfg");
  if (f.Has("guidance_branches")) {
    m.guidance_branches = static_cast<int>(f.Int("guidance_branches", 2, 3));
    if (!m.uses_cfg && f.status().ok()) {
      return Status::InvalidArgument(
          fmt::format("{}: guidance_branches is given but uses_cfg is false: a model without classifier-free "
                      "guidance runs one forward a step; drop guidance_branches or set uses_cfg true",
                      origin));
    }
  }
  m.skip_connections = f.Bool("skip_connections");
  m.joint_shared_weights = f.OptionalBool("joint_shared_weights", false);
  m.shared_modulation = f.OptionalBool("shared_modulation", false);
  m.encoders_remote = f.OptionalBool("encoders_remote", false);
  m.published_params = f.Number("published_params", 0, 1e13);
  if (f.Has("experts")) m.experts = static_cast<int>(f.Int("experts", 1, 64));
  m.default_steps = static_cast<int>(f.Int("default_steps", 1, 10000));
  if (const nlohmann::json* r = f.Object("default_resolution")) {
    JsonFields rf(*r, origin + ": default_resolution");
    m.default_height = static_cast<int>(rf.Int("height", 1, kBig));
    m.default_width = static_cast<int>(rf.Int("width", 1, kBig));
    m.default_frames = static_cast<int>(rf.Int("frames", 1, kBig));
    rf.RejectUnknownKeys();
    if (!rf.status().ok()) return rf.status();
  }
  if (f.Has("xdit")) {
    if (const nlohmann::json* x = f.Object("xdit")) {
      auto xs = ParseRuntimeSupport(*x, origin + ": xdit", "xdit", "xDiT");
      if (!xs.ok()) return xs.status();
      m.runtimes.emplace("xdit", std::move(*xs));
    }
  }
  f.RejectUnknownKeys();
  if (!f.status().ok()) return f.status();

  // Cross-checks a careless edit would break.
  if (m.hidden != m.heads * m.head_dim) {
    return Status::InvalidArgument(fmt::format("{}: hidden {} != heads {} x head_dim {}", origin,
                                               m.hidden, m.heads, m.head_dim));
  }
  if (m.modality == Modality::kImage && (m.vae_temporal != 1 || m.default_frames != 1)) {
    return Status::InvalidArgument(
        fmt::format("{}: an image model needs vae.temporal = 1 and default frames = 1", origin));
  }
  if ((m.num_blocks(BlockFamily::kSpatial) + m.num_blocks(BlockFamily::kTemporal) > 0) !=
      (m.modality == Modality::kVideo && m.num_blocks(BlockFamily::kSpatial) > 0 &&
       m.num_blocks(BlockFamily::kTemporal) > 0)) {
    return Status::InvalidArgument(fmt::format(
        "{}: spatial and temporal blocks come together, in a video model", origin));
  }
  if (m.num_blocks(BlockFamily::kJoint) + m.num_blocks(BlockFamily::kSingle) > 0 &&
      m.text_tokens == 0) {
    return Status::InvalidArgument(
        fmt::format("{}: joint and single blocks attend over text: text_tokens must be > 0", origin));
  }
  return m;
}

}  // namespace ditune
