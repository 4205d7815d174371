// A Kernels that forwards every call to another and, while recording, times each compute
// kernel on the device (an event before and after it on the stream) and sums the times per
// kernel (costmodels/dit_ops.h kernel_names, plus "zero", "fill_random", "euler_step" and
// "transfer" for the loop's bookkeeping). What `ditune run --profile` prints against the
// cost model's price of the same kernels.
//
// Events around every call cost the host a little and keep a GPU's queue shallower: time a
// run without recording, and record one further iteration for the breakdown.
#ifndef DITUNE_EXECUTOR_PROFILING_KERNELS_H_
#define DITUNE_EXECUTOR_PROFILING_KERNELS_H_

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodels/measurement.h"
#include "executor/kernels.h"

namespace ditune::exec {

struct KernelProfileRow {
  std::string kernel;
  int64_t calls = 0;
  double seconds = 0;  // device time, summed over the calls
  double flops = 0;    // GEMMs and attention: the work the calls did
  double bytes = 0;    // bytes read and written (bf16 activations and weights)
};

// One call on the device's timeline, seconds from the start of the recording, with the work
// it did in the cost model's units (dit_ops.cc: FLOPs; bytes as passes x elements).
struct KernelEvent {
  const char* kernel = "";
  double start_s = 0;
  double seconds = 0;
  double flops = 0;
  double bytes = 0;
  int head_dim = 0;  // attention
};

struct KernelProfile {
  std::vector<KernelProfileRow> rows;  // per kernel, in decreasing time
  std::vector<KernelEvent> events;     // every call, in issue order
};

class ProfilingKernels : public Kernels {
 public:
  // `inner` must outlive this object.
  explicit ProfilingKernels(Kernels* inner);
  ~ProfilingKernels() override;

  // Starts recording (forgetting what an earlier recording held).
  void Start();
  // Stops recording, waits for the device and returns one row per kernel that ran and every
  // call's place on the timeline.
  StatusOr<KernelProfile> Stop();

  std::string_view name() const override { return inner_->name(); }
  int64_t element_bytes() const override { return inner_->element_bytes(); }
  Device* device() override { return inner_->device(); }
  Status Gemm(const GemmArgs& a) override;
  Status Attention(const AttentionArgs& a) override;
  Status MergeAttention(const AttentionMergeArgs& a) override;
  Status NormModulate(const NormArgs& a) override;
  Status GatedResidual(void* x, int64_t ldx, const float* gate, const void* y, int64_t ldy,
                       int64_t rows, int64_t cols) override;
  Status Activate(Activation kind, const void* in, int64_t ld_in, void* out, int64_t ld_out,
                  int64_t rows, int64_t cols) override;
  Status QkNormRope(void* qk, int64_t ld, int64_t rows, int heads, int head_dim,
                    int64_t first_position) override;
  Status Copy(void* dst, int64_t ld_dst, const void* src, int64_t ld_src, int64_t rows,
              int64_t cols) override;
  Status Zero(void* data, int64_t count) override;
  Status FillRandom(void* data, int64_t count, float stddev, uint64_t seed,
                    uint64_t stream) override;
  Status EulerStep(float* x, void* xb, const void* pred, int64_t pred_stride, int64_t uncond_offset,
                   bool guidance_on, float guidance, float dt, int prompts, int64_t count) override;
  Status Upload(const float* host, void* dev, int64_t count) override;
  Status UploadF32(const float* host, float* dev, int64_t count) override;
  Status Download(const void* dev, float* host, int64_t count) override;
  Status DownloadF32(const float* dev, float* host, int64_t count) override;

 private:
  template <typename F>
  Status Timed(const char* kernel, double flops, double bytes, F&& call, int head_dim = 0);

  struct Impl;
  std::unique_ptr<Impl> impl_;
  Kernels* inner_;
};

// The calls of a profiled loop as measurements for the store (source executor, kind op): one
// per kernel and shape (same FLOPs and bytes), its median, p10 and p90 over the calls, for
// the kernels the cost model prices (GEMMs, with params.kernel "gemm_gelu" for the epilogue
// ones; attention with params.head_dim; the engine's elementwise kernels with params.kernel),
// each with `params` added. Fitting them with the sweep's prices ops at the shapes real runs
// have: every profiled run refines the kernel curves.
std::vector<Measurement> KernelMeasurements(const std::vector<KernelEvent>& events, const std::string& backend,
                                            const std::string& device, const std::string& run_id,
                                            const nlohmann::json& params);

// Writes `events` as a Chrome trace (Perfetto opens it): process `rank`, one thread for the
// device's stream, a slice per call. InvalidArgument naming the path when it cannot be
// written there.
Status WriteKernelTrace(const std::vector<KernelEvent>& events, int rank, const std::string& path);

// The trace file of `rank` for a run of `ranks` processes: `path` itself for one, else
// "<stem>.rank<R><extension>" beside it.
std::string RankTracePath(const std::string& path, int rank, int ranks);

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_PROFILING_KERNELS_H_
