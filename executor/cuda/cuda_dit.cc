#include "executor/cuda/cuda_dit.h"

#include <map>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "executor/cuda/cuda_backend.h"
#include "executor/dit.h"

namespace ditune::exec::cuda {
namespace {

constexpr float kGuidance = 4.0f;  // as the CPU executor

// A bf16 tensor on the device (rows x cols, row-major).
struct DevMat {
  std::unique_ptr<Buffer> buf;
  int64_t rows = 0, cols = 0;
  void* data() { return buf->data(); }
  const void* data() const { return buf->data(); }
  // Row r's address.
  void* row(int64_t r) { return static_cast<char*>(buf->data()) + r * cols * 2; }
};

// An fp32 vector on the device.
struct DevVec {
  std::unique_ptr<Buffer> buf;
  float* data() { return static_cast<float*>(buf->data()); }
};

class GpuModel {
 public:
  GpuModel(Device* d, const DitModel& cpu) : d_(d), cpu_(cpu) {}

  StatusOr<DevMat> Zeros(int64_t rows, int64_t cols) {
    DevMat m;
    m.rows = rows;
    m.cols = cols;
    DITUNE_ASSIGN_OR_RETURN(m.buf, d_->Alloc(rows * cols * 2));
    DITUNE_RETURN_IF_ERROR(Zero(d_, m.data(), rows * cols * 2));
    return m;
  }
  StatusOr<DevMat> Upload(const Mat& host) {
    DITUNE_ASSIGN_OR_RETURN(DevMat m, Zeros(host.rows(), host.cols()));
    DITUNE_RETURN_IF_ERROR(UploadBf16(d_, host.data(), m.data(), host.size()));
    return m;
  }
  StatusOr<DevVec> UploadVec(const Vec& host) {
    DevVec v;
    DITUNE_ASSIGN_OR_RETURN(v.buf, d_->Alloc(host.size() * 4));
    DITUNE_RETURN_IF_ERROR(UploadF32(d_, host.data(), v.data(), host.size()));
    return v;
  }
  StatusOr<Mat> Download(const DevMat& m) {
    Mat h(m.rows, m.cols);
    DITUNE_RETURN_IF_ERROR(DownloadBf16(d_, m.data(), h.data(), h.size()));
    return h;
  }

  Status Load() {
    for (int b = 0; b < cpu_.num_blocks(); ++b) {
      std::map<std::string, DevMat> w;
      for (const auto& [name, m] : cpu_.weights(b).w) {
        if (name == "mod" || name == "tmod") continue;  // applied on the host (a vector)
        DITUNE_ASSIGN_OR_RETURN(w[name], Upload(m));
      }
      blocks_.push_back(std::move(w));
    }
    for (const char* name : {"patch", "out"}) {
      DITUNE_ASSIGN_OR_RETURN(io_[name], Upload(cpu_.io_weights().at(name)));
    }
    return Status::Ok();
  }

  // y (rows x n) = x (rows x k) W (k x n).
  StatusOr<DevMat> Mul(const DevMat& x, const DevMat& w) {
    DITUNE_ASSIGN_OR_RETURN(DevMat y, Zeros(x.rows, w.cols));
    DITUNE_RETURN_IF_ERROR(Gemm(d_, x.data(), w.data(), y.data(), x.rows, x.cols, w.cols));
    return y;
  }
  StatusOr<DevMat> NormMod(const DevMat& x, const Vec& shift, const Vec& scale) {
    DITUNE_ASSIGN_OR_RETURN(DevVec sh, UploadVec(shift));
    DITUNE_ASSIGN_OR_RETURN(DevVec sc, UploadVec(scale));
    DITUNE_ASSIGN_OR_RETURN(DevMat y, Zeros(x.rows, x.cols));
    DITUNE_RETURN_IF_ERROR(NormModulate(d_, x.data(), sh.data(), sc.data(), y.data(), x.rows, x.cols));
    return y;
  }
  Status AddGated(DevMat* x, const Vec& gate, const DevMat& y) {
    DITUNE_ASSIGN_OR_RETURN(DevVec g, UploadVec(gate));
    return GatedResidual(d_, x->data(), g.data(), y.data(), x->rows, x->cols);
  }
  StatusOr<DevMat> Attend(const DevMat& q, const DevMat& k, const DevMat& v) {
    DITUNE_ASSIGN_OR_RETURN(DevMat o, Zeros(q.rows, q.cols));
    DITUNE_RETURN_IF_ERROR(Attention(d_, q.data(), k.data(), v.data(), o.data(), q.rows, k.rows,
                                     cpu_.heads_local(), cpu_.spec().head_dim));
    return o;
  }
  StatusOr<DevMat> Mlp(const DevMat& h, const DevMat& w1, const DevMat& w2) {
    DITUNE_ASSIGN_OR_RETURN(DevMat a, Mul(h, w1));
    DITUNE_RETURN_IF_ERROR(Gelu(d_, a.data(), a.rows * a.cols));
    return Mul(a, w2);
  }

  // One block; `seq` holds [text; image] rows (text first), `T` of them text.
  Status Block(int b, const Vec& c, DevMat* seq, int64_t T) {
    const auto& host = cpu_.weights(b);
    auto& w = blocks_[b];
    const int64_t H = cpu_.spec().hidden, Ht = cpu_.spec().text_stream_hidden;
    const int64_t n = seq->rows - T;
    auto chunk = [](const Vec& v, int i, int64_t width) { return Vec(v.segment(i * width, width)); };
    // Views of the text and image rows as separate device matrices share seq's memory, so
    // they are copied out and back where the families treat them apart.
    switch (host.family) {
      case BlockFamily::kCross: {
        // seq = [ctx; x]: the image rows are what the block updates.
        const Vec m = c * host.w.at("mod");
        DITUNE_ASSIGN_OR_RETURN(DevMat x, Slice(*seq, T, n));
        DITUNE_ASSIGN_OR_RETURN(DevMat ctx, Slice(*seq, 0, T));
        DITUNE_ASSIGN_OR_RETURN(DevMat h, NormMod(x, chunk(m, 0, H), chunk(m, 1, H)));
        DITUNE_ASSIGN_OR_RETURN(DevMat q, Mul(h, w["wq"]));
        DITUNE_ASSIGN_OR_RETURN(DevMat k, Mul(h, w["wk"]));
        DITUNE_ASSIGN_OR_RETURN(DevMat v, Mul(h, w["wv"]));
        DITUNE_ASSIGN_OR_RETURN(DevMat o, Attend(q, k, v));
        DITUNE_ASSIGN_OR_RETURN(DevMat y, Mul(o, w["wo"]));
        DITUNE_RETURN_IF_ERROR(AddGated(&x, chunk(m, 2, H), y));
        DITUNE_ASSIGN_OR_RETURN(DevMat h2, NormMod(x, Vec::Zero(H), Vec::Zero(H)));
        DITUNE_ASSIGN_OR_RETURN(DevMat q2, Mul(h2, w["xq"]));
        DITUNE_ASSIGN_OR_RETURN(DevMat k2, Mul(ctx, w["xk"]));
        DITUNE_ASSIGN_OR_RETURN(DevMat v2, Mul(ctx, w["xv"]));
        DITUNE_ASSIGN_OR_RETURN(DevMat o2, Attend(q2, k2, v2));
        DITUNE_ASSIGN_OR_RETURN(DevMat y2, Mul(o2, w["xo"]));
        DITUNE_RETURN_IF_ERROR(AddGated(&x, Vec::Ones(H), y2));
        DITUNE_ASSIGN_OR_RETURN(DevMat h3, NormMod(x, chunk(m, 3, H), chunk(m, 4, H)));
        DITUNE_ASSIGN_OR_RETURN(DevMat y3, Mlp(h3, w["w1"], w["w2"]));
        DITUNE_RETURN_IF_ERROR(AddGated(&x, chunk(m, 5, H), y3));
        return Unslice(x, seq, T);
      }
      case BlockFamily::kJoint: {
        const Vec m = c * host.w.at("mod");
        const Vec mt = c * host.w.at("tmod");
        DITUNE_ASSIGN_OR_RETURN(DevMat x, Slice(*seq, T, n));
        DITUNE_ASSIGN_OR_RETURN(DevMat ctx, Slice(*seq, 0, T));
        DITUNE_ASSIGN_OR_RETURN(DevMat hi, NormMod(x, chunk(m, 0, H), chunk(m, 1, H)));
        DITUNE_ASSIGN_OR_RETURN(DevMat ht, NormMod(ctx, chunk(mt, 0, Ht), chunk(mt, 1, Ht)));
        DevMat q, k, v;
        for (auto [out, wi, wt] : {std::tuple{&q, "wq", "tq"}, std::tuple{&k, "wk", "tk"}, std::tuple{&v, "wv", "tv"}}) {
          DITUNE_ASSIGN_OR_RETURN(*out, Zeros(T + n, w[wi].cols));
          DITUNE_RETURN_IF_ERROR(Gemm(d_, ht.data(), w[wt].data(), out->row(0), T, Ht, w[wt].cols));
          DITUNE_RETURN_IF_ERROR(Gemm(d_, hi.data(), w[wi].data(), out->row(T), n, H, w[wi].cols));
        }
        DITUNE_ASSIGN_OR_RETURN(DevMat o, Attend(q, k, v));
        DITUNE_ASSIGN_OR_RETURN(DevMat ot, Slice(o, 0, T));
        DITUNE_ASSIGN_OR_RETURN(DevMat oi, Slice(o, T, n));
        DITUNE_ASSIGN_OR_RETURN(DevMat yi, Mul(oi, w["wo"]));
        DITUNE_ASSIGN_OR_RETURN(DevMat yt, Mul(ot, w["to"]));
        DITUNE_RETURN_IF_ERROR(AddGated(&x, chunk(m, 2, H), yi));
        DITUNE_RETURN_IF_ERROR(AddGated(&ctx, chunk(mt, 2, Ht), yt));
        DITUNE_ASSIGN_OR_RETURN(DevMat hi2, NormMod(x, chunk(m, 3, H), chunk(m, 4, H)));
        DITUNE_ASSIGN_OR_RETURN(DevMat fi, Mlp(hi2, w["w1"], w["w2"]));
        DITUNE_ASSIGN_OR_RETURN(DevMat ht2, NormMod(ctx, chunk(mt, 3, Ht), chunk(mt, 4, Ht)));
        DITUNE_ASSIGN_OR_RETURN(DevMat ft, Mlp(ht2, w["t1"], w["t2"]));
        DITUNE_RETURN_IF_ERROR(AddGated(&x, chunk(m, 5, H), fi));
        DITUNE_RETURN_IF_ERROR(AddGated(&ctx, chunk(mt, 5, Ht), ft));
        DITUNE_RETURN_IF_ERROR(Unslice(ctx, seq, 0));
        return Unslice(x, seq, T);
      }
      case BlockFamily::kSingle: {
        const Vec m = c * host.w.at("mod");
        DITUNE_ASSIGN_OR_RETURN(DevMat h, NormMod(*seq, chunk(m, 0, H), chunk(m, 1, H)));
        DITUNE_ASSIGN_OR_RETURN(DevMat q, Mul(h, w["wq"]));
        DITUNE_ASSIGN_OR_RETURN(DevMat k, Mul(h, w["wk"]));
        DITUNE_ASSIGN_OR_RETURN(DevMat v, Mul(h, w["wv"]));
        DITUNE_ASSIGN_OR_RETURN(DevMat a, Mul(h, w["w1"]));
        DITUNE_RETURN_IF_ERROR(Gelu(d_, a.data(), a.rows * a.cols));
        DITUNE_ASSIGN_OR_RETURN(DevMat o, Attend(q, k, v));
        DITUNE_ASSIGN_OR_RETURN(DevMat y, Mul(o, w["oa"]));
        DITUNE_RETURN_IF_ERROR(GemmAdd(d_, a.data(), w["om"].data(), y.data(), a.rows, a.cols, w["om"].cols));
        return AddGated(seq, chunk(m, 2, H), y);
      }
    }
    return Status::Internal("unknown block family");
  }

  // The prediction for `latent` (n x C p^2, host) with projected text `ctx_host`.
  StatusOr<Mat> Predict(const Mat& latent, const Vec& c, const Mat& ctx_host) {
    const int64_t T = ctx_host.rows(), n = latent.rows(), H = cpu_.spec().hidden;
    DITUNE_ASSIGN_OR_RETURN(DevMat lat, Upload(latent));
    DITUNE_ASSIGN_OR_RETURN(DevMat x, Mul(lat, io_["patch"]));
    // Cross models keep text at its own width; joint and single run [text; image] at H.
    if (ctx_host.cols() != H) return Status::NotSupported("text-stream width differs from hidden");
    DITUNE_ASSIGN_OR_RETURN(DevMat seq, Upload(Mat::Zero(T + n, H)));
    DITUNE_ASSIGN_OR_RETURN(DevMat ctx, Upload(ctx_host));
    DITUNE_RETURN_IF_ERROR(Unslice(ctx, &seq, 0));
    DITUNE_RETURN_IF_ERROR(Unslice(x, &seq, T));
    for (int b = 0; b < cpu_.num_blocks(); ++b) DITUNE_RETURN_IF_ERROR(Block(b, c, &seq, T));
    DITUNE_ASSIGN_OR_RETURN(DevMat xi, Slice(seq, T, n));
    const Vec fm = c * cpu_.io_weights().at("fmod");
    DITUNE_ASSIGN_OR_RETURN(DevMat h, NormMod(xi, fm.segment(0, H), fm.segment(H, H)));
    DITUNE_ASSIGN_OR_RETURN(DevMat v, Mul(h, io_["out"]));
    return Download(v);
  }

 private:
  // Copies rows [r0, r0 + n) of m into a new (zeroed) matrix, and back.
  StatusOr<DevMat> Slice(DevMat& m, int64_t r0, int64_t n) {
    DITUNE_ASSIGN_OR_RETURN(DevMat s, Zeros(n, m.cols));
    // A gated residual with gate 1 onto zeros is a copy on the device's stream.
    DITUNE_ASSIGN_OR_RETURN(DevVec one, UploadVec(Vec::Ones(m.cols)));
    DITUNE_RETURN_IF_ERROR(GatedResidual(d_, s.data(), one.data(), m.row(r0), n, m.cols));
    return s;
  }
  Status Unslice(DevMat& part, DevMat* into, int64_t r0) {
    DITUNE_ASSIGN_OR_RETURN(DevMat zero, Zeros(part.rows, part.cols));
    DITUNE_ASSIGN_OR_RETURN(DevVec minus, UploadVec(Vec::Constant(part.cols, -1.0f)));
    DITUNE_ASSIGN_OR_RETURN(DevVec one, UploadVec(Vec::Ones(part.cols)));
    // into[r0..] = into[r0..] - into[r0..] + part, elementwise on the device.
    DITUNE_ASSIGN_OR_RETURN(DevMat old, Slice(*into, r0, part.rows));
    DITUNE_RETURN_IF_ERROR(GatedResidual(d_, into->row(r0), minus.data(), old.data(), part.rows, part.cols));
    return GatedResidual(d_, into->row(r0), one.data(), part.data(), part.rows, part.cols);
  }

  Device* d_;
  const DitModel& cpu_;
  std::vector<std::map<std::string, DevMat>> blocks_;
  std::map<std::string, DevMat> io_;
};

}  // namespace

StatusOr<GpuGeneration> GenerateOnGpu(Device* device, const ModelSpec& model, const Workload& workload, uint64_t seed) {
  if (device == nullptr || device->props().backend != "cuda") {
    return Status::InvalidArgument("GenerateOnGpu needs a device of the cuda backend");
  }
  DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(model, workload));
  DitModel cpu(model, seed, 0, model.num_blocks(), 1, 0);
  GpuModel gpu(device, cpu);
  DITUNE_RETURN_IF_ERROR(gpu.Load());
  GpuGeneration out;
  const int S = workload.steps;
  for (int p = 0; p < workload.batch; ++p) {
    Mat x = RandomMat(tokens.image_tokens(), cpu.latent_width(), 1.0f, seed, 1000 + static_cast<uint64_t>(p));
    std::vector<Mat> ctx = {cpu.ProjectText(PromptEmbedding(model, seed, p, false), nullptr)};
    if (model.uses_cfg) ctx.push_back(cpu.ProjectText(PromptEmbedding(model, seed, p, true), nullptr));
    DITUNE_ASSIGN_OR_RETURN(auto start, device->stream()->Record());
    for (int k = 0; k < S; ++k) {
      const float sigma = 1.0f - static_cast<float>(k) / S, next = 1.0f - static_cast<float>(k + 1) / S;
      const Vec c = cpu.Conditioning(sigma * 1000.0f, nullptr);
      std::vector<Mat> v;
      for (const auto& t : ctx) {
        DITUNE_ASSIGN_OR_RETURN(Mat pred, gpu.Predict(x, c, t));
        v.push_back(std::move(pred));
      }
      const Mat g = model.uses_cfg ? Mat(v[1] + kGuidance * (v[0] - v[1])) : v[0];
      x += (next - sigma) * g;
    }
    DITUNE_RETURN_IF_ERROR(device->stream()->Synchronize());
    DITUNE_ASSIGN_OR_RETURN(auto stop, device->stream()->Record());
    DITUNE_ASSIGN_OR_RETURN(double seconds, stop->SecondsSince(*start));
    out.dit_seconds += seconds;
    out.latents.push_back(std::move(x));
  }
  out.peak_bytes = device->peak_bytes();
  return out;
}

}  // namespace ditune::exec::cuda
