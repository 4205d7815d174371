#include "ingest/ingest.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "calibration/op_fits.h"
#include "core/parallel_config.h"
#include "costmodels/calibration.h"
#include "costmodels/comm_model.h"
#include "ingest/ingest_impl.h"

namespace ditune {
namespace {

// The 1-based number of the first line of `text` that contains `needle` (0 if none).
int LineOf(std::string_view text, std::string_view needle) {
  int line = 1;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    if (text.substr(pos, eol - pos).find(needle) != std::string_view::npos) return line;
    pos = eol + 1;
    ++line;
  }
  return 0;
}

// Expects an InvalidArgument whose message contains every one of `parts`.
template <typename T>
void ExpectInvalid(const StatusOr<T>& result, std::initializer_list<std::string_view> parts) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), Status::Code::kInvalidArgument) << result.status().ToString();
  for (std::string_view part : parts) {
    EXPECT_NE(result.status().message().find(part), std::string::npos)
        << "message: " << result.status().message() << "\nexpected to contain: " << part;
  }
}

// ---------------------------------------------------------------------------------------------
// Samples in the tools' exact formats.

// all_reduce_perf on one 8-GPU node, single process (older nccl-tests: no version line).
constexpr std::string_view kAllReduce =
    R"NCCL(+ mpirun -np 1 ./build/all_reduce_perf -b 8 -e 128M -f 8 -g 8
# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 8(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  41818 on   node-001 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  41818 on   node-001 device  1 [0x2a] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  41818 on   node-001 device  2 [0x3a] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  41818 on   node-001 device  3 [0x5d] NVIDIA H100 80GB HBM3
#  Rank  4 Group  0 Pid  41818 on   node-001 device  4 [0x9a] NVIDIA H100 80GB HBM3
#  Rank  5 Group  0 Pid  41818 on   node-001 device  5 [0xab] NVIDIA H100 80GB HBM3
#  Rank  6 Group  0 Pid  41818 on   node-001 device  6 [0xba] NVIDIA H100 80GB HBM3
#  Rank  7 Group  0 Pid  41818 on   node-001 device  7 [0xdb] NVIDIA H100 80GB HBM3
NCCL version 2.18.5+cuda12.2
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
           8             2     float     sum      -1    27.36    0.00    0.00      0    26.81    0.00    0.00      0
          64            16     float     sum      -1    26.95    0.00    0.00      0    26.88    0.00    0.00      0
         512           128     float     sum      -1    26.71    0.02    0.03      0    26.42    0.02    0.03      0
        4096          1024     float     sum      -1    26.52    0.15    0.27      0    26.44    0.15    0.27      0
       32768          8192     float     sum      -1    26.67    1.23    2.15      0    26.59    1.23    2.16      0
      262144         65536     float     sum      -1    27.88    9.40   16.45      0    27.80    9.43   16.50      0
     2097152        524288     float     sum      -1    37.54   55.86   97.76      0    37.43   56.03   98.05      0
    16777216       4194304     float     sum      -1    114.8  146.14  255.75      0    114.5  146.53  256.42      0
   134217728      33554432     float     sum      -1    732.9  183.13  320.48      0    730.7  183.68  321.45      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 77.6167 
#
)NCCL";

// all_gather_perf over MPI, one GPU per process (newer nccl-tests: version and test name).
constexpr std::string_view kAllGather =
    R"NCCL(# nccl-tests version 2.13.9 nccl-headers=21903 nccl-library=21903
# Collective test starting: all_gather_perf
# nThread 1 nGpus 1 minBytes 1024 maxBytes 1073741824 step: 16(factor) warmup iters: 5 iters: 50 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  51201 on   node-002 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  51202 on   node-002 device  1 [0000:2a:00] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  51203 on   node-002 device  2 [0000:3a:00] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  51204 on   node-002 device  3 [0000:5d:00] NVIDIA H100 80GB HBM3
#  Rank  4 Group  0 Pid  51205 on   node-002 device  4 [0000:9a:00] NVIDIA H100 80GB HBM3
#  Rank  5 Group  0 Pid  51206 on   node-002 device  5 [0000:ab:00] NVIDIA H100 80GB HBM3
#  Rank  6 Group  0 Pid  51207 on   node-002 device  6 [0000:ba:00] NVIDIA H100 80GB HBM3
#  Rank  7 Group  0 Pid  51208 on   node-002 device  7 [0000:db:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong 
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         
        1024           512  bfloat16    none      -1    12.00    0.09    0.07       0    11.97    0.09    0.07       0
       16384          8192  bfloat16    none      -1    12.05    1.36    1.19       0    12.01    1.36    1.19       0
      262144        131072  bfloat16    none      -1    12.73   20.59   18.02       0    12.69   20.66   18.08       0
     4194304       2097152  bfloat16    none      -1    23.65  177.35  155.18       0    23.58  177.88  155.64       0
    67108864      33554432  bfloat16    none      -1   198.41  338.23  295.95       0   197.82  339.24  296.84       0
  1073741824     536870912  bfloat16    none      -1  2994.62  358.56  313.74       0  2985.63  359.64  314.68       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 130.658 
#
# Collective test concluded: all_gather_perf
)NCCL";

// alltoall_perf with validation off: #wrong is N/A.
constexpr std::string_view kAllToAll =
    R"NCCL(# nThread 1 nGpus 8 minBytes 256 maxBytes 268435456 step: 16(factor) warmup iters: 5 iters: 100 agg iters: 1 validation: 0 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   7311 on    gpu-a07 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   7311 on    gpu-a07 device  1 [0x2a] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid   7311 on    gpu-a07 device  2 [0x3a] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid   7311 on    gpu-a07 device  3 [0x5d] NVIDIA H100 80GB HBM3
#  Rank  4 Group  0 Pid   7311 on    gpu-a07 device  4 [0x9a] NVIDIA H100 80GB HBM3
#  Rank  5 Group  0 Pid   7311 on    gpu-a07 device  5 [0xab] NVIDIA H100 80GB HBM3
#  Rank  6 Group  0 Pid   7311 on    gpu-a07 device  6 [0xba] NVIDIA H100 80GB HBM3
#  Rank  7 Group  0 Pid   7311 on    gpu-a07 device  7 [0xdb] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
         256           128      half    none      -1    35.00    0.01    0.01    N/A    34.90    0.01    0.01    N/A
        4096          2048      half    none      -1    35.01    0.12    0.10    N/A    34.91    0.12    0.10    N/A
       65536         32768      half    none      -1    35.20    1.86    1.63    N/A    35.10    1.87    1.63    N/A
     1048576        524288      half    none      -1    38.28   27.39   23.97    N/A    38.16   27.48   24.04    N/A
    16777216       8388608      half    none      -1    87.43  191.89  167.91    N/A    87.17  192.47  168.41    N/A
   268435456     134217728      half    none      -1   873.86  307.18  268.79    N/A   871.24  308.11  269.59    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 77.0683 
#
)NCCL";

// sendrecv_perf between two nodes, one GPU each, over InfiniBand.
constexpr std::string_view kSendRecv =
    R"NCCL(# nThread 1 nGpus 1 minBytes 4096 maxBytes 1073741824 step: 8(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  90114 on   node-011 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  88321 on   node-012 device  0 [0x18] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
        4096          1024     float     sum      -1    18.09    0.23    0.23      0    18.03    0.23    0.23      0
       32768          8192     float     sum      -1    18.71    1.75    1.75      0    18.66    1.76    1.76      0
      262144         65536     float     sum      -1    23.70   11.06   11.06      0    23.63   11.09   11.09      0
     2097152        524288     float     sum      -1    63.59   32.98   32.98      0    63.40   33.08   33.08      0
    16777216       4194304     float     sum      -1   382.72   43.84   43.84      0   381.57   43.97   43.97      0
   134217728      33554432     float     sum      -1  2935.78   45.72   45.72      0  2926.97   45.86   45.86      0
  1073741824     268435456     float     sum      -1  23360.2   45.96   45.96      0  23290.1   46.10   46.10      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 26.1571 
#
)NCCL";

// An xDiT run launched with torchrun: logger prefixes, torchrun's --tee prefix, three timings.
constexpr std::string_view kXditLog =
    R"XDIT(W0827 11:30:58.412000 140213 torch/distributed/run.py:779] Setting OMP_NUM_THREADS environment variable for each process to be 1
WARNING 08-27 11:31:02 [args.py:354] Distributed environment is not initialized. Initializing...
[Rank 0] 2024-08-27 11:31:05 - INFO - Initializing distributed environment with world_size=8
[Rank 7] 2024-08-27 11:31:40 - INFO - Pipeline warmup done
[Rank 7] 2024-08-27 11:32:10 - INFO - epoch time: 6.71 sec, parameter memory: 33.85 GB, memory: 35.12 GB
[default7]:epoch time: 6.69 sec, parameter memory: 33.85 GB, memory: 35.12 GB
epoch time: 6.74 sec
[Rank 0] 2024-08-27 11:32:40 - INFO - destroying distributed environment
)XDIT";

IngestContext NvlinkContext() {
  IngestContext ctx;
  ctx.device = "h100-sxm5-80gb";
  ctx.link = "nvlink4";
  ctx.run_id = "nccl-2024-08-27";
  return ctx;
}

IngestContext XditContext() {
  IngestContext ctx;
  ctx.device = "h100-sxm5-80gb";
  ctx.run = {{"model", "flux.1-dev"}, {"height", 1024}, {"width", 1024},
             {"frames", 1},           {"steps", 28},    {"batch", 1},
             {"config", "ulysses=8"}, {"gpus", 8},      {"output_type", "decoded"},
             {"scope", "e2e"}};
  ctx.run_id = "xdit-flux-8";
  return ctx;
}

// ---------------------------------------------------------------------------------------------
// Format detection and dispatch.

TEST(IngestDetectTest, RecognisesEachFormat) {
  EXPECT_EQ(*DetectIngestFormat("source,kind,op,device,median_s\n", "a"), IngestFormat::kCsv);
  EXPECT_EQ(*DetectIngestFormat("# ditune export\n\nmedian_s,op,kind,source,device\n", "a"),
            IngestFormat::kCsv);
  EXPECT_EQ(*DetectIngestFormat(kAllReduce, "a"), IngestFormat::kNcclTests);
  EXPECT_EQ(*DetectIngestFormat(kAllGather, "a"), IngestFormat::kNcclTests);
  // Only the table header, no banner (a trimmed copy-paste).
  EXPECT_EQ(*DetectIngestFormat("#       size         count      type   redop    root     time\n"
                                "  8  2  float  sum  -1  27.36  0.00  0.00  0\n",
                                "a"),
            IngestFormat::kNcclTests);
  EXPECT_EQ(*DetectIngestFormat(kXditLog, "a"), IngestFormat::kXditLog);
}

TEST(IngestDetectTest, UnknownContentListsTheFormats) {
  ExpectInvalid(DetectIngestFormat("hello,world\n1,2\n", "notes.txt"),
                {"notes.txt:", "--format", "csv", "nccl-tests", "xdit-log"});
  ExpectInvalid(DetectIngestFormat("", "empty.txt"), {"empty.txt", "--format"});
}

TEST(IngestDetectTest, ParseIngestDispatches) {
  auto csv = ParseIngest("source,kind,op,device,median_s\nimport,e2e,dit,h100-sxm5-80gb,4.2\n",
                         IngestFormat::kAuto, IngestContext{}, "m.csv");
  ASSERT_TRUE(csv.ok()) << csv.status().ToString();
  EXPECT_EQ(csv->size(), 1u);

  auto nccl = ParseIngest(kAllReduce, IngestFormat::kAuto, NvlinkContext(), "all_reduce_perf.txt");
  ASSERT_TRUE(nccl.ok()) << nccl.status().ToString();
  EXPECT_EQ(nccl->size(), 9u);

  auto xdit = ParseIngest(kXditLog, IngestFormat::kXditLog, XditContext(), "flux.log");
  ASSERT_TRUE(xdit.ok()) << xdit.status().ToString();
  EXPECT_EQ(xdit->size(), 3u);

  // A forced format is honoured: this log is not a CSV.
  ExpectInvalid(ParseIngest(kXditLog, IngestFormat::kCsv, XditContext(), "flux.log"),
                {"flux.log:1:"});
}

// ---------------------------------------------------------------------------------------------
// ditune measurement CSV.

TEST(IngestCsvTest, ReadsEveryColumnWithQuotedJsonParams) {
  constexpr std::string_view kCsv =
      R"CSV(# measurements exported by ditune
source,kind,op,backend,device,ranks,link,bytes,flops,median_s,p10_s,p90_s,samples,params,run_id

microbench,op,gemm,cuda,h100-sxm5-80gb,1,,,2.5e12,0.00412,0.0040,0.0043,50,"{""m"": 4096, ""n"": 3072, ""k"": 3072, ""dtype"": ""bf16""}",mb-0827
microbench,collective,all_to_all,nccl,h100-sxm5-80gb,8,nvlink4,134217728,,0.00061,,,20,"{""note"": ""a, b"", ""quote"": ""say \""hi\""""}",mb-0827
)CSV";
  auto result = ParseMeasurementCsv(kCsv, "m.csv");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->size(), 2u);

  const Measurement& gemm = (*result)[0];
  EXPECT_EQ(gemm.source, MeasurementSource::kMicrobench);
  EXPECT_EQ(gemm.kind, MeasurementKind::kOp);
  EXPECT_EQ(gemm.op, "gemm");
  EXPECT_EQ(gemm.backend, "cuda");
  EXPECT_EQ(gemm.device, "h100-sxm5-80gb");
  EXPECT_EQ(gemm.ranks, 1);
  EXPECT_EQ(gemm.link, "");
  EXPECT_DOUBLE_EQ(gemm.bytes.value(), 0.0);
  EXPECT_DOUBLE_EQ(gemm.flops.value(), 2.5e12);
  EXPECT_DOUBLE_EQ(gemm.median.value(), 0.00412);
  EXPECT_DOUBLE_EQ(gemm.p10.value(), 0.0040);
  EXPECT_DOUBLE_EQ(gemm.p90.value(), 0.0043);
  EXPECT_EQ(gemm.samples, 50);
  EXPECT_EQ(gemm.params,
            (nlohmann::json{{"m", 4096}, {"n", 3072}, {"k", 3072}, {"dtype", "bf16"}}));
  EXPECT_EQ(gemm.run_id, "mb-0827");

  const Measurement& a2a = (*result)[1];
  EXPECT_EQ(a2a.kind, MeasurementKind::kCollective);
  EXPECT_EQ(a2a.ranks, 8);
  EXPECT_EQ(a2a.link, "nvlink4");
  EXPECT_DOUBLE_EQ(a2a.bytes.value(), 134217728.0);
  // Empty p10/p90 fall back to the median.
  EXPECT_DOUBLE_EQ(a2a.p10.value(), 0.00061);
  EXPECT_DOUBLE_EQ(a2a.p90.value(), 0.00061);
  EXPECT_EQ(a2a.params.at("note"), "a, b");
  EXPECT_EQ(a2a.params.at("quote"), "say \"hi\"");
}

TEST(IngestCsvTest, RequiredColumnsOnlyAnyOrderCrlf) {
  auto result = ParseMeasurementCsv(
      "median_s,op,kind,source,device\r\n0.5,dit,e2e,import,h100-sxm5-80gb\r\n\r\n"
      "1.25 , total , e2e , executor , l40s-48gb\r\n",
      "m.csv");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->size(), 2u);
  const Measurement& m = (*result)[0];
  EXPECT_EQ(m.source, MeasurementSource::kImport);
  EXPECT_EQ(m.kind, MeasurementKind::kE2e);
  EXPECT_EQ(m.op, "dit");
  EXPECT_EQ(m.device, "h100-sxm5-80gb");
  EXPECT_DOUBLE_EQ(m.median.value(), 0.5);
  EXPECT_DOUBLE_EQ(m.p10.value(), 0.5);
  EXPECT_DOUBLE_EQ(m.p90.value(), 0.5);
  EXPECT_EQ(m.samples, 1);
  EXPECT_EQ(m.ranks, 1);
  EXPECT_EQ(m.params, nlohmann::json::object());
  EXPECT_EQ((*result)[1].op, "total");
  EXPECT_EQ((*result)[1].device, "l40s-48gb");
  EXPECT_EQ((*result)[1].source, MeasurementSource::kExecutor);

  // A UTF-8 byte-order mark, as spreadsheet programs write, is not part of the first column.
  constexpr std::string_view kBom =
      "\xEF\xBB\xBFsource,kind,op,device,median_s\nimport,e2e,dit,h100-sxm5-80gb,4.2\n";
  EXPECT_EQ(*DetectIngestFormat(kBom, "m.csv"), IngestFormat::kCsv);
  auto bom = ParseMeasurementCsv(kBom, "m.csv");
  ASSERT_TRUE(bom.ok()) << bom.status().ToString();
  EXPECT_EQ(bom->front().source, MeasurementSource::kImport);
}

TEST(IngestCsvTest, QuotedFieldMaySpanLinesAndLaterLinesKeepTheirNumbers) {
  constexpr std::string_view kCsv =
      "source,kind,op,device,median_s,params\n"
      "executor,step,dit,h100-sxm5-80gb,0.2,\"{\"\"a\"\": 1,\n"
      " \"\"b\"\": 2}\"\n"
      "executor,step,dit,h100-sxm5-80gb,oops,\n";
  ExpectInvalid(ParseMeasurementCsv(kCsv, "m.csv"), {"m.csv:4:", "median_s", "'oops'"});
  auto ok = ParseMeasurementCsv(kCsv.substr(0, kCsv.rfind("executor")), "m.csv");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)[0].params, (nlohmann::json{{"a", 1}, {"b", 2}}));
}

TEST(IngestCsvTest, HeaderErrors) {
  ExpectInvalid(ParseMeasurementCsv("source,kind,op,device,median_s,latency\n", "m.csv"),
                {"m.csv:1:", "unknown column 'latency'", "valid:", "median_s", "run_id"});
  ExpectInvalid(ParseMeasurementCsv("# comment\nsource,kind,op,median_s\n", "m.csv"),
                {"m.csv:2:", "device", "required"});
  ExpectInvalid(ParseMeasurementCsv("source,kind,op,device,median_s,op\n", "m.csv"),
                {"m.csv:1:", "'op' appears twice"});
  ExpectInvalid(ParseMeasurementCsv("source,kind,op,device,median_s\n", "m.csv"),
                {"m.csv", "no measurement rows"});
  ExpectInvalid(ParseMeasurementCsv("# nothing\n\n", "m.csv"), {"m.csv", "header"});
}

TEST(IngestCsvTest, RowErrorsNameTheLine) {
  const std::string header = "source,kind,op,device,median_s,p10_s,ranks,params\n";
  const std::string good = "import,e2e,dit,h100-sxm5-80gb,4.2,4.1,8,\n";
  auto parse = [&](const std::string& bad) {
    return ParseMeasurementCsv(header + good + "\n" + bad, "m.csv");
  };
  // Line 4: the bad row follows the header, a good row and a blank line.
  ExpectInvalid(parse("import,e2e,dit,h100-sxm5-80gb,4.2\n"), {"m.csv:4:", "5 fields", "8"});
  ExpectInvalid(parse("import,e2e,dit,h100-sxm5-80gb,abc,,,\n"),
                {"m.csv:4:", "median_s", "'abc' is not a number"});
  ExpectInvalid(parse("import,e2e,dit,h100-sxm5-80gb,1.5x,,,\n"), {"m.csv:4:", "'1.5x'"});
  ExpectInvalid(parse("import,e2e,dit,h100-sxm5-80gb,nan,,,\n"), {"m.csv:4:", "'nan'"});
  ExpectInvalid(parse("import,e2e,dit,h100-sxm5-80gb,4.2,,eight,\n"),
                {"m.csv:4:", "ranks", "'eight'"});
  ExpectInvalid(parse("import,e2e,dit,h100-sxm5-80gb,4.2,,0,\n"), {"m.csv:4:", "ranks", "'0'"});
  ExpectInvalid(parse("bench,e2e,dit,h100-sxm5-80gb,4.2,,,\n"),
                {"m.csv:4:", "'bench'", "valid: executor, microbench, import"});
  ExpectInvalid(parse("import,kernel,dit,h100-sxm5-80gb,4.2,,,\n"),
                {"m.csv:4:", "'kernel'", "valid: op, collective, step, e2e"});
  ExpectInvalid(parse("import,e2e,,h100-sxm5-80gb,4.2,,,\n"), {"m.csv:4:", "'op' is empty"});
  ExpectInvalid(parse("import,e2e,dit,h100-sxm5-80gb,4.2,,,\"{\"\"m\"\": }\"\n"),
                {"m.csv:4:", "params", "not a JSON object"});
  ExpectInvalid(parse("import,e2e,dit,h100-sxm5-80gb,4.2,,,\"[1, 2]\"\n"),
                {"m.csv:4:", "params", "not a JSON object"});
  // Measurement::Validate() failures.
  ExpectInvalid(parse("import,e2e,dit,h100-sxm5-80gb,4.2,4.3,,\n"),
                {"m.csv:4:", "p10 <= median <= p90"});
  ExpectInvalid(parse("import,e2e,dit,h100-sxm5-80gb,-1,,,\n"), {"m.csv:4:", "> 0"});
  // Quoting errors.
  ExpectInvalid(parse("import,e2e,dit,h100-sxm5-80gb,4.2,,,{\"m\": 1}\n"),
                {"m.csv:4:", "unquoted field", "double quotes"});
  ExpectInvalid(parse("import,e2e,dit,h100-sxm5-80gb,4.2,,,\"{}\n"), {"m.csv:4:", "never closed"});
  ExpectInvalid(parse("import,e2e,dit,h100-sxm5-80gb,4.2,,,\"{}\"x\n"),
                {"m.csv:4:", "after the closing quote"});
}

TEST(IngestCsvTest, PhysicallyAbsurdRowsAreRefusedNamingLineFieldAndRange) {
  // Finite and positive, but no fit could take them: one would disable every later
  // `calibrate fit` of the store.
  const std::string header = "source,kind,op,device,median_s,bytes,flops,ranks,link\n";
  const std::string good = "microbench,op,gemm,h100-sxm5-80gb,0.001,,2e12,,\n";
  auto parse = [&](const std::string& bad) { return ParseMeasurementCsv(header + good + bad, "m.csv"); };
  ASSERT_TRUE(parse("").ok()) << parse("").status().ToString();
  // A GEMM of 1e12 FLOPs in 1e-200 s.
  ExpectInvalid(parse("microbench,op,gemm,h100-sxm5-80gb,1e-200,,1e12,,\n"),
                {"m.csv:3:", "median_s", "1e-200", "physical range", "1e-09", "1000000 seconds"});
  ExpectInvalid(parse("microbench,op,gemm,h100-sxm5-80gb,2e6,,1e12,,\n"), {"m.csv:3:", "median_s", "2000000"});
  // A collective of 1e300 bytes.
  ExpectInvalid(parse("import,collective,all_reduce,h100-sxm5-80gb,0.01,1e300,,8,nvlink4\n"),
                {"m.csv:3:", "bytes", "1e+300", "0 to 1e+18 bytes"});
  ExpectInvalid(parse("microbench,op,gemm,h100-sxm5-80gb,1,,1e22,,\n"), {"m.csv:3:", "flops", "1e+21 FLOPs"});
  // Each bound alone holds, their ratio does not: 1e20 FLOP/s.
  ExpectInvalid(parse("microbench,op,gemm,h100-sxm5-80gb,1,,1e20,,\n"),
                {"m.csv:3:", "flops / median_s", "1e+20 FLOP/s", "at most 1e+18 per second"});
  ExpectInvalid(parse("import,collective,all_reduce,h100-sxm5-80gb,1e-9,1e12,,8,nvlink4\n"),
                {"m.csv:3:", "bytes / median_s", "B/s"});
  // A whole generation may count more than one GPU does per second: no rate bound there.
  EXPECT_TRUE(parse("import,e2e,dit,h100-sxm5-80gb,10,,1e20,,\n").ok());
}

// ---------------------------------------------------------------------------------------------
// nccl-tests output.

TEST(IngestNcclTestsTest, AllReduceRowsInSecondsAndBytes) {
  auto result = ParseNcclTests(kAllReduce, NvlinkContext(), "runs/all_reduce_perf.txt");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->size(), 9u);

  const Measurement& first = result->front();
  EXPECT_EQ(first.source, MeasurementSource::kImport);
  EXPECT_EQ(first.kind, MeasurementKind::kCollective);
  EXPECT_EQ(first.op, "all_reduce");
  EXPECT_EQ(first.backend, "nccl");
  EXPECT_EQ(first.device, "h100-sxm5-80gb");
  EXPECT_EQ(first.link, "nvlink4");
  EXPECT_EQ(first.ranks, 8);  // the "#  Rank" lines
  EXPECT_EQ(first.samples, 20);
  EXPECT_EQ(first.run_id, "nccl-2024-08-27");
  EXPECT_DOUBLE_EQ(first.bytes.value(), 8.0);
  EXPECT_DOUBLE_EQ(first.median.value(), 27.36e-6);
  EXPECT_DOUBLE_EQ(first.p10.value(), 27.36e-6);
  EXPECT_DOUBLE_EQ(first.p90.value(), 27.36e-6);
  EXPECT_EQ(first.params.at("count"), 2);
  EXPECT_EQ(first.params.at("type"), "float");
  EXPECT_DOUBLE_EQ(first.params.at("in_place_s").get<double>(), 26.81e-6);

  const Measurement& last = result->back();
  EXPECT_DOUBLE_EQ(last.bytes.value(), 134217728.0);
  EXPECT_DOUBLE_EQ(last.median.value(), 732.9e-6);
  EXPECT_DOUBLE_EQ(last.params.at("algbw_gbps").get<double>(), 183.13);
  EXPECT_DOUBLE_EQ(last.params.at("busbw_gbps").get<double>(), 320.48);
  EXPECT_DOUBLE_EQ(last.params.at("in_place_s").get<double>(), 730.7e-6);
  EXPECT_EQ(last.params.at("count"), 33554432);

  // Two runs in one file: each banner starts over.
  auto twice = ParseNcclTests(std::string(kAllReduce) + std::string(kAllReduce), NvlinkContext(),
                              "runs/all_reduce_perf.txt");
  ASSERT_TRUE(twice.ok()) << twice.status().ToString();
  EXPECT_EQ(twice->size(), 18u);
  EXPECT_EQ(twice->back().ranks, 8);
}

TEST(IngestNcclTestsTest, AllGatherNamedByItsCollectiveTestLine) {
  // The file name says nothing; "# Collective test starting: all_gather_perf" does.
  auto result = ParseNcclTests(kAllGather, NvlinkContext(), "logs/run-17.log");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->size(), 6u);
  for (const Measurement& m : *result) {
    EXPECT_EQ(m.op, "all_gather");
    EXPECT_EQ(m.ranks, 8);
    EXPECT_EQ(m.samples, 50);
    EXPECT_EQ(m.params.at("type"), "bfloat16");
  }
  EXPECT_DOUBLE_EQ(result->back().bytes.value(), 1073741824.0);
  EXPECT_DOUBLE_EQ(result->back().median.value(), 2994.62e-6);
  EXPECT_DOUBLE_EQ(result->back().params.at("busbw_gbps").get<double>(), 313.74);
}

TEST(IngestNcclTestsTest, AllToAllWithoutValidationFromFileName) {
  auto result = ParseNcclTests(kAllToAll, NvlinkContext(), "results/alltoall_perf_8x_h100.txt");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->size(), 6u);
  const Measurement& m = (*result)[4];
  EXPECT_EQ(m.op, "all_to_all");
  EXPECT_EQ(m.ranks, 8);
  EXPECT_EQ(m.samples, 100);
  EXPECT_DOUBLE_EQ(m.bytes.value(), 16777216.0);
  EXPECT_DOUBLE_EQ(m.median.value(), 87.43e-6);
  EXPECT_DOUBLE_EQ(m.params.at("algbw_gbps").get<double>(), 191.89);
  EXPECT_EQ(m.params.at("count"), 8388608);
  EXPECT_EQ(m.params.at("type"), "half");
}

TEST(IngestNcclTestsTest, SendRecvAcrossNodesWithCollectiveFlag) {
  IngestContext ctx = NvlinkContext();
  ctx.link = "ib-ndr";
  ctx.collective = "sendrecv";
  auto result = ParseNcclTests(kSendRecv, ctx, "ib/out.txt");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->size(), 7u);
  const Measurement& m = result->back();
  EXPECT_EQ(m.op, "sendrecv");
  EXPECT_EQ(m.link, "ib-ndr");
  EXPECT_EQ(m.ranks, 2);
  EXPECT_DOUBLE_EQ(m.bytes.value(), 1073741824.0);
  EXPECT_DOUBLE_EQ(m.median.value(), 23360.2e-6);
  EXPECT_DOUBLE_EQ(m.params.at("busbw_gbps").get<double>(), 45.96);

  // nccl-tests' own spelling is accepted too.
  ctx.collective = "sendrecv_perf";
  EXPECT_TRUE(ParseNcclTests(kSendRecv, ctx, "ib/out.txt").ok());
}

TEST(IngestNcclTestsTest, BusBandwidthCheckCatchesWrongRanks) {
  IngestContext ctx = NvlinkContext();
  ctx.ranks = 4;  // the run had 8: busbw = algbw x 1.75, not x 1.5
  const int line = LineOf(kAllReduce, "        4096          1024");
  ASSERT_EQ(line, 21);
  ExpectInvalid(ParseNcclTests(kAllReduce, ctx, "all_reduce_perf.txt"),
                {fmt::format("all_reduce_perf.txt:{}:", line), "busbw 0.27", "4 ranks", "--ranks"});
  // The right --ranks passes.
  ctx.ranks = 8;
  EXPECT_TRUE(ParseNcclTests(kAllReduce, ctx, "all_reduce_perf.txt").ok());
}

TEST(IngestNcclTestsTest, BusBandwidthCheckCatchesMislabelledCollective) {
  IngestContext ctx = NvlinkContext();
  ctx.collective = "all_gather";  // it is all_reduce output: busbw = 2(n-1)/n algbw
  const int line = LineOf(kAllReduce, "         512           128");
  ExpectInvalid(ParseNcclTests(kAllReduce, ctx, "perf.txt"),
                {fmt::format("perf.txt:{}:", line), "busbw", "all_gather", "--collective"});
  // A --collective that contradicts the output's own "Collective test starting" line.
  ctx.collective = "all_reduce";
  ExpectInvalid(ParseNcclTests(kAllGather, ctx, "perf.txt"),
                {"--collective all_reduce", "all_gather"});
}

TEST(IngestNcclTestsTest, ContextErrorsAskForTheFlag) {
  IngestContext ctx = NvlinkContext();
  // kAllToAll names its program nowhere (kAllReduce's "+ mpirun ... all_reduce_perf" does).
  ExpectInvalid(ParseNcclTests(kAllToAll, ctx, "results.txt"),
                {"results.txt", "--collective", "all_to_all, all_gather, all_reduce, sendrecv"});
  ctx.collective = "broadcast";
  ExpectInvalid(ParseNcclTests(kAllReduce, ctx, "results.txt"),
                {"--collective 'broadcast'", "all_to_all, all_gather, all_reduce, sendrecv"});
  ctx.collective = "all_reduce";
  ctx.device.clear();
  ExpectInvalid(ParseNcclTests(kAllReduce, ctx, "results.txt"), {"--gpu"});
  ctx.device = "h100-sxm5-80gb";
  ctx.link.clear();
  ExpectInvalid(ParseNcclTests(kAllReduce, ctx, "results.txt"), {"--link"});
  // broadcast_perf is not a collective ditune models.
  ExpectInvalid(ParseNcclTests("# Collective test starting: broadcast_perf\n", NvlinkContext(),
                               "all_reduce_perf.txt"),
                {"all_reduce_perf.txt:1:", "broadcast_perf", "does not model"});
  // Two different collectives concatenated into one file: each is read as its own.
  const std::string two = std::string(kAllGather) +
                          "# Collective test starting: all_reduce_perf\n" + std::string(kAllReduce);
  auto both = ParseNcclTests(two, NvlinkContext(), "both.txt");
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  ASSERT_EQ(both->size(), 15u);
  EXPECT_EQ(both->front().op, "all_gather");
  EXPECT_EQ(both->back().op, "all_reduce");
}

TEST(IngestNcclTestsTest, RanksUnknownWithoutRankLinesOrFlag) {
  // No banner, no "# Rank" lines, no table header: the default column layout still applies.
  constexpr std::string_view kBare =
      "        1024           256     float     sum      -1    20.00    0.05    0.09      0    "
      "20.00    0.05    0.09      0\n";
  ExpectInvalid(ParseNcclTests(kBare, NvlinkContext(), "all_reduce_perf.txt"),
                {"all_reduce_perf.txt:1:", "--ranks"});
  IngestContext ctx = NvlinkContext();
  ctx.ranks = 8;
  auto result = ParseNcclTests(kBare, ctx, "all_reduce_perf.txt");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->front().ranks, 8);
  EXPECT_EQ(result->front().samples, 1);  // no banner: no iters
  EXPECT_DOUBLE_EQ(result->front().median.value(), 20e-6);
}

TEST(IngestNcclTestsTest, MalformedDataLinesNameTheLine) {
  const std::string head =
      "# nThread 1 nGpus 2 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 5 iters: 20 "
      "agg iters: 1 validation: 1 graph: 0\n"
      "#  Rank  0 Group  0 Pid  100 on node-1 device  0 [0x18] NVIDIA H100 80GB HBM3\n"
      "#  Rank  1 Group  0 Pid  100 on node-1 device  1 [0x2a] NVIDIA H100 80GB HBM3\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong\n";
  const std::string good =
      "        1024           256     float     sum      -1    20.00    0.05    0.05      0    "
      "20.00    0.05    0.05      0\n";
  auto parse = [&](const std::string& bad) {
    return ParseNcclTests(head + good + bad, NvlinkContext(), "all_reduce_perf.txt");
  };
  ASSERT_TRUE(parse("").ok()) << parse("").status().ToString();
  ExpectInvalid(parse("        2048           512     float     sum      -1    abc    0.10    0.10"
                      "      0    20.00    0.10    0.10      0\n"),
                {"all_reduce_perf.txt:6:", "'abc'"});
  ExpectInvalid(parse("        2048           512     float     sum      -1    20.00\n"),
                {"all_reduce_perf.txt:6:", "6 columns", "13"});
  // Wrong results are not an error of the file: the row is left out, with a warning
  // (IngestNcclTestsTest.RowsWithWrongResultsAreDroppedWithAWarning).
  auto wrong = parse("        2048           512     float     sum      -1    20.00    0.10    0.10"
                     "      3    20.00    0.10    0.10      3\n");
  ASSERT_TRUE(wrong.ok()) << wrong.status().ToString();
  EXPECT_EQ(wrong->size(), 1u);
  // Times and rates beyond the physical bounds: 1e-4 us; 1e10 B in 1 ns.
  ExpectInvalid(parse("        2048           512     float     sum      -1    0.0001    0.10    0.10"
                      "      0    20.00    0.10    0.10      0\n"),
                {"all_reduce_perf.txt:6:", "time is 0.0001 us", "physical range", "0.001 to"});
  ExpectInvalid(parse("  10000000000    2500000000     float     sum      -1    0.001    1e7    1.75e7"
                      "      0    0.001    1e7    1.75e7      0\n"),
                {"all_reduce_perf.txt:6:", "size / time", "1e+19 B/s", "at most 1e+18"});
  // algbw that is not size / time.
  ExpectInvalid(
      parse("        2048           512     float     sum      -1    20.00    9.10    9.10"
            "      0    20.00    0.10    0.10      0\n"),
      {"all_reduce_perf.txt:6:", "algbw 9.10"});
}

TEST(IngestNcclTestsTest, NoDataLines) {
  constexpr std::string_view kBannerOnly =
      "# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: "
      "20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n";
  ExpectInvalid(ParseNcclTests(kBannerOnly, NvlinkContext(), "all_reduce_perf.txt"),
                {"all_reduce_perf.txt", "no nccl-tests result lines"});
}

// ---------------------------------------------------------------------------------------------
// xDiT logs.

TEST(IngestXditLogTest, EachEpochTimeLineIsOneMeasurement) {
  auto result = ParseXditLog(kXditLog, XditContext(), "logs/flux_ulysses8.log");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->size(), 3u);

  const Measurement& m = result->front();
  EXPECT_EQ(m.source, MeasurementSource::kImport);
  EXPECT_EQ(m.kind, MeasurementKind::kE2e);
  EXPECT_EQ(m.op, "total");  // output_type decoded: text encoding + DiT + VAE
  EXPECT_EQ(m.backend, "xdit");
  EXPECT_EQ(m.device, "h100-sxm5-80gb");
  EXPECT_EQ(m.ranks, 8);
  EXPECT_EQ(m.link, "");
  EXPECT_EQ(m.samples, 1);
  EXPECT_EQ(m.run_id, "xdit-flux-8");
  EXPECT_DOUBLE_EQ(m.median.value(), 6.71);
  EXPECT_DOUBLE_EQ(m.p10.value(), 6.71);
  EXPECT_DOUBLE_EQ(m.p90.value(), 6.71);
  EXPECT_DOUBLE_EQ(m.params.at("parameter_memory_gb").get<double>(), 33.85);
  EXPECT_DOUBLE_EQ(m.params.at("peak_memory_gb").get<double>(), 35.12);
  EXPECT_EQ(m.params.at("model"), "flux.1-dev");
  EXPECT_EQ(m.params.at("config"), "ulysses=8");
  EXPECT_EQ(m.params.at("steps"), 28);

  EXPECT_DOUBLE_EQ((*result)[1].median.value(), 6.69);  // "[default7]:" prefix
  // A line with only the epoch time: no memory figures.
  const Measurement& bare = (*result)[2];
  EXPECT_DOUBLE_EQ(bare.median.value(), 6.74);
  EXPECT_FALSE(bare.params.contains("parameter_memory_gb"));
  EXPECT_FALSE(bare.params.contains("peak_memory_gb"));
}

TEST(IngestXditLogTest, LatentOutputIsTheDitAlone) {
  IngestContext ctx = XditContext();
  ctx.run["output_type"] = "latent";
  // Some xDiT examples print the peak memory unrounded and without the parameter memory.
  auto result = ParseXditLog("epoch time: 5.94 sec, memory: 35.123456789 GB\n", ctx, "hunyuan.log");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->size(), 1u);
  EXPECT_EQ(result->front().op, "dit");
  EXPECT_DOUBLE_EQ(result->front().median.value(), 5.94);
  EXPECT_DOUBLE_EQ(result->front().params.at("peak_memory_gb").get<double>(), 35.123456789);
  EXPECT_FALSE(result->front().params.contains("parameter_memory_gb"));
}

TEST(IngestXditLogTest, BadLinesNameTheLine) {
  const std::string head = "[Rank 0] starting\n[Rank 7] epoch time: 6.71 sec\n";
  auto parse = [&](const std::string& bad) {
    return ParseXditLog(head + bad, XditContext(), "x.log");
  };
  ExpectInvalid(parse("[Rank 7] epoch time: abc sec\n"), {"x.log:3:", "number of seconds"});
  ExpectInvalid(parse("[Rank 7] epoch time: nan sec\n"), {"x.log:3:", "number of seconds"});
  ExpectInvalid(parse("epoch time: 6710 ms\n"), {"x.log:3:", "'ms'", "seconds"});
  ExpectInvalid(parse("epoch time: 6.71 sec, parameter memory: ?? GB, memory: 35.12 GB\n"),
                {"x.log:3:", "parameter memory:"});
  ExpectInvalid(parse("epoch time: 6.71 sec, parameter memory: 33.85 GB, memory: 35.12 GiB\n"),
                {"x.log:3:", "'GiB'"});
  ExpectInvalid(parse("epoch time: 0.00 sec\n"), {"x.log:3:", "> 0"});
}

TEST(IngestXditLogTest, MissingContextOrTiming) {
  ExpectInvalid(ParseXditLog("[Rank 0] loading\n[Rank 0] done\n", XditContext(), "x.log"),
                {"x.log", "epoch time: 6.71 sec"});
  IngestContext ctx = XditContext();
  ctx.device.clear();
  ExpectInvalid(ParseXditLog(kXditLog, ctx, "x.log"), {"--gpu"});
  ctx = XditContext();
  ctx.run.erase("gpus");
  ExpectInvalid(ParseXditLog(kXditLog, ctx, "x.log"), {"gpus", "--ranks"});
  ctx.run["gpus"] = 0;
  ExpectInvalid(ParseXditLog(kXditLog, ctx, "x.log"), {"gpus"});
  ctx.run["gpus"] = "8";
  ExpectInvalid(ParseXditLog(kXditLog, ctx, "x.log"), {"gpus"});
}

// ---------------------------------------------------------------------------------------------
// Files as users have them (issue #19): the samples under tests/data/nccl and tests/data/xdit.

// tests/data, as CMake passes it.
std::filesystem::path IngestDataDir() { return DITUNE_TEST_INGEST_DATA_DIR; }

// The text of tests/data/<name>; fails the test when it cannot be read.
std::string ReadSample(const std::string& name) {
  std::ifstream in(IngestDataDir() / name, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << (IngestDataDir() / name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Parses a sample as nccl-tests output under its own name, collecting the warnings.
StatusOr<std::vector<Measurement>> ParseNcclSample(const std::string& name, IngestContext ctx,
                                                   std::vector<std::string>* warnings) {
  ctx.warnings = warnings;
  const std::string text = ReadSample("nccl/" + name);
  return ParseNcclTests(text, ctx, name);
}

// The number of warnings that contain every one of `parts`.
int CountWarnings(const std::vector<std::string>& warnings,
                  std::initializer_list<std::string_view> parts) {
  int n = 0;
  for (const std::string& w : warnings) {
    bool all = true;
    for (std::string_view p : parts) all = all && w.find(p) != std::string::npos;
    n += all ? 1 : 0;
  }
  return n;
}

std::string AllWarnings(const std::vector<std::string>& warnings) {
  return fmt::format("warnings:\n{}", fmt::join(warnings, "\n"));
}

TEST(IngestNcclTestsFilesTest, SeveralTestsInOneFileEachReadAsItsOwnCollective) {
  std::vector<std::string> warnings;
  auto result = ParseNcclSample("cluster_check.txt", NvlinkContext(), &warnings);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  // all_reduce (named by "=== all_reduce_perf ==="), all_gather ("Collective test starting"),
  // alltoall (its mpirun line), reduce_scatter; broadcast_perf is not modelled.
  ASSERT_EQ(result->size(), 16u) << AllWarnings(warnings);
  const std::vector<std::string> ops = {"all_reduce", "all_gather", "all_to_all", "reduce_scatter"};
  for (size_t i = 0; i < result->size(); ++i) {
    const Measurement& m = (*result)[i];
    EXPECT_EQ(m.op, ops[i / 4]) << "measurement " << i;
    EXPECT_EQ(m.ranks, 8);
    EXPECT_EQ(m.params.at("nodes"), 1);
  }
  EXPECT_EQ((*result)[4].samples, 50);  // all_gather's banner: iters: 50
  EXPECT_EQ((*result)[4].params.at("type"), "bfloat16");
  EXPECT_EQ((*result)[8].params.at("type"), "half");
  EXPECT_DOUBLE_EQ((*result)[15].bytes.value(), 268435456.0);
  const std::string text = ReadSample("nccl/cluster_check.txt");
  ASSERT_EQ(warnings.size(), 1u) << AllWarnings(warnings);
  EXPECT_EQ(warnings[0].find(
                fmt::format("cluster_check.txt:{}:", LineOf(text, "starting: broadcast_perf"))),
            0u)
      << warnings[0];
  EXPECT_NE(warnings[0].find("broadcast_perf"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("skipped the 2 rows"), std::string::npos) << warnings[0];
}

TEST(IngestNcclTestsFilesTest, MpirunTagOutputPrefixesAreStrippedAndNodesCounted) {
  std::vector<std::string> warnings;
  auto result = ParseNcclSample("all_reduce_perf_tag_output.txt", NvlinkContext(), &warnings);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->size(), 4u);
  EXPECT_TRUE(warnings.empty()) << AllWarnings(warnings);
  const Measurement& m = result->back();
  EXPECT_EQ(m.op, "all_reduce");
  EXPECT_EQ(m.ranks, 8);
  EXPECT_EQ(m.samples, 20);
  EXPECT_DOUBLE_EQ(m.bytes.value(), 536870912.0);
  EXPECT_EQ(m.params.at("nodes"), 2);
  EXPECT_EQ(m.params.at("hosts"), (nlohmann::json{"node-a01", "node-a02"}));
}

TEST(IngestNcclTestsFilesTest, LauncherPrefixes) {
  using ingest_internal::StripLauncherPrefix;
  EXPECT_EQ(StripLauncherPrefix("[1,0]<stdout>:#  Rank  0 Group  0"), "#  Rank  0 Group  0");
  EXPECT_EQ(StripLauncherPrefix("[1,12]<stderr>:     8388608   2097152"), "     8388608   2097152");
  EXPECT_EQ(StripLauncherPrefix("[3]      1024   256  float"), "     1024   256  float");  // MPICH
  EXPECT_EQ(StripLauncherPrefix("  0: # nThread 1 nGpus 1"), "# nThread 1 nGpus 1");  // srun -l
  // Not prefixes: a data row, NCCL's own "[dev]", a bracketed word.
  EXPECT_EQ(StripLauncherPrefix("        1024  256  float"), "        1024  256  float");
  EXPECT_EQ(StripLauncherPrefix("host:1:2 [0] NCCL INFO x"), "host:1:2 [0] NCCL INFO x");
  EXPECT_EQ(StripLauncherPrefix("[Rank 0] epoch time: 1 sec"), "[Rank 0] epoch time: 1 sec");
}

TEST(IngestNcclTestsFilesTest, NcclInfoGluedOntoRowsIsCutOffOrTheRowDropped) {
  std::vector<std::string> warnings;
  auto result = ParseNcclSample("all_reduce_perf_nccl_info.txt", NvlinkContext(), &warnings);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  const std::string text = ReadSample("nccl/all_reduce_perf_nccl_info.txt");
  // 32 MiB: log glued after its last column; 64 MiB: log split it over two lines, joined;
  // 128 MiB: cut before its out-of-place #wrong, dropped; 256 MiB: log glued in front.
  ASSERT_EQ(result->size(), 3u) << AllWarnings(warnings);
  EXPECT_DOUBLE_EQ((*result)[0].bytes.value(), 33554432.0);
  EXPECT_DOUBLE_EQ((*result)[0].median.value(), 479.4e-6);
  EXPECT_DOUBLE_EQ((*result)[0].params.at("in_place_s").get<double>(), 477.0e-6);
  EXPECT_DOUBLE_EQ((*result)[1].bytes.value(), 67108864.0);
  EXPECT_DOUBLE_EQ((*result)[1].median.value(), 898.9e-6);
  EXPECT_DOUBLE_EQ((*result)[2].bytes.value(), 268435456.0);
  for (const Measurement& m : *result) {
    EXPECT_EQ(m.ranks, 16);
    EXPECT_EQ(m.params.at("nodes"), 2);
  }
  ASSERT_EQ(warnings.size(), 4u) << AllWarnings(warnings);
  const int dropped = LineOf(text, "   134217728");
  EXPECT_EQ(CountWarnings(warnings, {fmt::format("all_reduce_perf_nccl_info.txt:{}:", dropped),
                                     "'busbw' column", "row dropped"}),
            1)
      << AllWarnings(warnings);
  EXPECT_EQ(CountWarnings(warnings, {fmt::format(":{}:", LineOf(text, "   33554432")),
                                     "ignored the log text", "NCCL INFO"}),
            1)
      << AllWarnings(warnings);
  EXPECT_EQ(CountWarnings(warnings, {fmt::format(":{}:", LineOf(text, "   67108864") + 1),
                                     "joined this line"}),
            1)
      << AllWarnings(warnings);
  EXPECT_EQ(CountWarnings(warnings, {fmt::format(":{}:", LineOf(text, "nRanks 16 nNodes 2")),
                                     "log text before the row"}),
            1)
      << AllWarnings(warnings);
}

TEST(IngestNcclTestsFilesTest, GluedTextVersusACorruptValue) {
  const std::string head =
      "#  Rank  0 Group  0 Pid  100 on node-1 device  0 [0x18] NVIDIA H100 80GB HBM3\n"
      "#  Rank  1 Group  0 Pid  100 on node-1 device  1 [0x2a] NVIDIA H100 80GB HBM3\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong\n";
  std::vector<std::string> warnings;
  IngestContext ctx = NvlinkContext();
  ctx.warnings = &warnings;
  // A Python traceback glued to the in-place #wrong: the row is whole before it.
  auto glued =
      ParseNcclTests(head +
                         "        1024           256     float     sum      -1    20.00    "
                         "0.05    0.05      0    20.00    0.05    0.05      0Traceback (most "
                         "recent call last):\n",
                     ctx, "all_reduce_perf.txt");
  ASSERT_TRUE(glued.ok()) << glued.status().ToString();
  EXPECT_EQ(glued->size(), 1u);
  EXPECT_EQ(CountWarnings(warnings, {"all_reduce_perf.txt:4:", "Traceback"}), 1)
      << AllWarnings(warnings);
  // A letter inside a number is a corrupt value, not log text: the file is refused.
  ExpectInvalid(
      ParseNcclTests(head + "        1024           256     float     sum      -1    2x.00    "
                            "0.05    0.05      0    20.00    0.05    0.05      0\n",
                     ctx, "all_reduce_perf.txt"),
      {"all_reduce_perf.txt:4:", "'time'", "'2x.00'"});
  // Log text that leaves no whole out-of-place result, and nothing else: refused, saying why.
  ExpectInvalid(
      ParseNcclTests(head + "        1024           256     float     sum      -1    20.00"
                            "node-1:100:100 [0] NCCL WARN Call to ibv_reg_mr failed\n",
                     ctx, "all_reduce_perf.txt"),
      {"all_reduce_perf.txt", "no usable", "line 4", "'time' column", "row dropped"});
}

TEST(IngestNcclTestsFilesTest, OldAlltoallWithABlankRedopColumn) {
  std::vector<std::string> warnings;
  auto result = ParseNcclSample("alltoall_perf_blank_redop.txt", NvlinkContext(), &warnings);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->size(), 5u);
  EXPECT_TRUE(warnings.empty()) << AllWarnings(warnings);
  const Measurement& m = result->back();
  EXPECT_EQ(m.op, "all_to_all");
  EXPECT_EQ(m.ranks, 8);
  EXPECT_DOUBLE_EQ(m.bytes.value(), 67108864.0);
  EXPECT_DOUBLE_EQ(m.median.value(), 323.6e-6);
  EXPECT_DOUBLE_EQ(m.params.at("in_place_s").get<double>(), 322.0e-6);
  EXPECT_EQ(m.params.at("type"), "float");

  // Older still: redop and root both blank (root printed blank when -1).
  IngestContext ctx = NvlinkContext();
  ctx.ranks = 8;
  auto both = ParseNcclTests(
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   "
      "algbw   busbw #wrong\n"
      "     4194304       1048576     float                    48.35   86.75   75.91       0    "
      "48.11   "
      "87.18   76.28       0\n"
      "    67108864      16777216     float                  23360   2.87    2.51       0    23291 "
      "  "
      "2.88    2.52       0\n",
      ctx, "alltoall_perf.txt");
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  ASSERT_EQ(both->size(), 2u);
  EXPECT_DOUBLE_EQ((*both)[0].median.value(), 48.35e-6);
  EXPECT_DOUBLE_EQ((*both)[1].median.value(), 23360e-6);  // a whole-number time (>= 10 ms)
}

TEST(IngestNcclTestsFilesTest, TableHeaderPastedWithoutItsHash) {
  std::vector<std::string> warnings;
  IngestContext ctx = NvlinkContext();
  ctx.link = "ib-ndr";
  // No Rank lines in the excerpt: the ranks are asked for, naming the first row.
  const std::string text = ReadSample("nccl/sendrecv_pasted_header.txt");
  ExpectInvalid(
      ParseNcclTests(text, ctx, "sendrecv_pasted_header.txt"),
      {fmt::format("sendrecv_pasted_header.txt:{}:", LineOf(text, "        4096")), "--ranks"});
  ctx.ranks = 2;
  auto result = ParseNcclSample("sendrecv_pasted_header.txt", ctx, &warnings);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->size(), 4u);
  EXPECT_TRUE(warnings.empty()) << AllWarnings(warnings);
  EXPECT_EQ(result->front().op, "sendrecv");
  EXPECT_DOUBLE_EQ(result->back().bytes.value(), 1073741824.0);
  EXPECT_FALSE(result->back().params.contains("nodes"));
}

TEST(IngestNcclTestsFilesTest, PreTwoLayoutNoRootAndAnErrorColumn) {
  std::vector<std::string> warnings;
  auto result = ParseNcclSample("all_reduce_perf_v1_error_column.txt", NvlinkContext(), &warnings);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  // "error" is nccl-tests' old largest deviation: 1e-07 for float sums is within its own
  // tolerance (1e-5 x (ranks - 1)); 3e-01 is not, and that row is dropped.
  ASSERT_EQ(result->size(), 4u) << AllWarnings(warnings);
  for (const Measurement& m : *result) {
    EXPECT_EQ(m.ranks, 4);     // "#   Rank  0 Pid ..." lines, without Group
    EXPECT_EQ(m.samples, 20);  // "# nThread: 1 ... warmupIters: 5 iters: 20"
    EXPECT_EQ(m.params.at("nodes"), 2);
  }
  EXPECT_DOUBLE_EQ(result->back().bytes.value(), 134217728.0);
  const std::string text = ReadSample("nccl/all_reduce_perf_v1_error_column.txt");
  ASSERT_EQ(warnings.size(), 1u) << AllWarnings(warnings);
  EXPECT_EQ(CountWarnings(warnings, {fmt::format(":{}:", LineOf(text, "    16777216")), "3e-01",
                                     "tolerance", "row dropped"}),
            1)
      << AllWarnings(warnings);
}

TEST(IngestNcclTestsFilesTest, CputimeAndItersColumns) {
  std::vector<std::string> warnings;
  IngestContext ctx = NvlinkContext();
  ctx.collective = "all_gather";
  auto result = ParseNcclSample("all_gather_perf_cputime_iters.txt", ctx, &warnings);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->size(), 3u);
  EXPECT_TRUE(warnings.empty()) << AllWarnings(warnings);
  EXPECT_EQ(result->back().samples, 20);  // the row's own #iters
  EXPECT_EQ(result->back().op, "all_gather");
}

TEST(IngestNcclTestsFilesTest, ReduceScatterIsACollective) {
  EXPECT_EQ(CollectiveName(Collective::kReduceScatter), "reduce_scatter");
  ASSERT_TRUE(ParseCollective("reduce_scatter").ok());
  EXPECT_EQ(*ParseCollective("reduce_scatter"), Collective::kReduceScatter);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kReduceScatter, 8), 7.0 / 8.0);

  std::vector<std::string> warnings;
  auto result = ParseNcclSample("reduce_scatter_perf.txt", NvlinkContext(), &warnings);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->size(), 4u);
  const Measurement& m = result->back();
  EXPECT_EQ(m.op, "reduce_scatter");
  EXPECT_EQ(m.ranks, 8);
  EXPECT_NEAR(m.params.at("busbw_gbps").get<double>() / m.params.at("algbw_gbps").get<double>(),
              7.0 / 8.0, 0.01);
  // As a flag too, and from a file name alone.
  IngestContext ctx = NvlinkContext();
  ctx.collective = "reduce_scatter_perf";
  EXPECT_TRUE(ParseNcclTests(ReadSample("nccl/reduce_scatter_perf.txt"), ctx, "x.txt").ok());
  ctx.collective = "all_reduce";  // its busbw factor is 2(n-1)/n: refused
  ExpectInvalid(ParseNcclTests(ReadSample("nccl/reduce_scatter_perf.txt"), ctx, "x.txt"),
                {"--collective all_reduce", "reduce_scatter"});
}

TEST(IngestNcclTestsFilesTest, RowsWithWrongResultsAreDroppedWithAWarning) {
  std::vector<std::string> warnings;
  auto result = ParseNcclSample("all_reduce_perf_wrong.txt", NvlinkContext(), &warnings);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->size(), 3u);
  EXPECT_DOUBLE_EQ((*result)[0].bytes.value(), 1024.0);
  EXPECT_DOUBLE_EQ((*result)[1].bytes.value(), 262144.0);
  EXPECT_DOUBLE_EQ((*result)[2].bytes.value(), 67108864.0);
  const std::string text = ReadSample("nccl/all_reduce_perf_wrong.txt");
  ASSERT_EQ(warnings.size(), 2u) << AllWarnings(warnings);
  EXPECT_EQ(CountWarnings(warnings, {fmt::format("all_reduce_perf_wrong.txt:{}:",
                                                 LineOf(text, "       16384")),
                                     "3 wrong elements", "in-place", "row dropped"}),
            1)
      << AllWarnings(warnings);
  EXPECT_EQ(CountWarnings(warnings, {fmt::format(":{}:", LineOf(text, "     4194304")),
                                     "1048576 wrong elements", "out-of-place"}),
            1)
      << AllWarnings(warnings);
}

TEST(IngestNcclTestsFilesTest, OneRankRefusedAloneSkippedBesideOthers) {
  const std::string one = ReadSample("nccl/all_reduce_perf_1rank.txt");
  ExpectInvalid(ParseNcclTests(one, NvlinkContext(), "all_reduce_perf_1rank.txt"),
                {fmt::format("all_reduce_perf_1rank.txt:{}:", LineOf(one, "# nThread")), "1 rank",
                 "nothing to calibrate"});
  std::vector<std::string> warnings;
  auto mixed = ParseNcclSample("all_reduce_perf_1_and_4_ranks.txt", NvlinkContext(), &warnings);
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  ASSERT_EQ(mixed->size(), 3u);
  for (const Measurement& m : *mixed) EXPECT_EQ(m.ranks, 4);
  ASSERT_EQ(warnings.size(), 1u) << AllWarnings(warnings);
  EXPECT_EQ(CountWarnings(warnings,
                          {"all_reduce_perf_1_and_4_ranks.txt:2:", "1 rank", "skipped its 3 rows"}),
            1)
      << AllWarnings(warnings);
}

TEST(IngestNcclTestsFilesTest, RanksAndNodesFromNcclInfoWithoutRankLines) {
  auto result = ParseNcclTests(
      "node7:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL "
      "0\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   "
      "algbw   busbw #wrong\n"
      "     4194304       1048576     float     sum      -1    60.00   69.91  131.08       0    "
      "60.00   "
      "69.91  131.08       0\n",
      NvlinkContext(), "all_reduce_perf.txt");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->size(), 1u);
  EXPECT_EQ(result->front().ranks, 16);
  EXPECT_EQ(result->front().params.at("nodes"), 2);
  EXPECT_FALSE(result->front().params.contains("hosts"));
}

TEST(IngestNcclTestsFilesTest, UnusableFilesNameTheLineAndWhy) {
  const std::string garbled = ReadSample("nccl/all_reduce_perf_garbled.txt");
  ExpectInvalid(ParseNcclTests(garbled, NvlinkContext(), "all_reduce_perf_garbled.txt"),
                {fmt::format("all_reduce_perf_garbled.txt:{}:", LineOf(garbled, "       16384")),
                 "('algbw')", "'0.?2'"});
  // Cut short mid-row (a killed run): the row, its last column and the header's columns.
  const std::string cut = ReadSample("nccl/reduce_scatter_perf.txt").substr(0, 1500);
  const int last = LineOf(cut, cut.substr(cut.rfind('\n') + 1));
  ExpectInvalid(ParseNcclTests(cut, NvlinkContext(), "reduce_scatter_perf.txt"),
                {fmt::format("reduce_scatter_perf.txt:{}:", last), "the row stops after",
                 "is the file cut short"});
  // Every row wrong: nothing usable, and the first reason.
  const std::string wrong = ReadSample("nccl/all_reduce_perf_wrong.txt");
  std::string all_wrong;
  for (const auto& line : ingest_internal::SplitLines(wrong)) {
    std::string l(line.text);
    if (l.size() > 2 && l.back() == '0' && l[0] == ' ') l.back() = '7';
    all_wrong += l + "\n";
  }
  ExpectInvalid(ParseNcclTests(all_wrong, NvlinkContext(), "all_reduce_perf.txt"),
                {"all_reduce_perf.txt: no usable nccl-tests result rows: all 5 were dropped",
                 "wrong elements"});
}

TEST(IngestDetectTest, RecognisersForWhatUsersHave) {
  using ingest_internal::LooksLikeNcclTests;
  using ingest_internal::LooksLikeXditLog;
  EXPECT_TRUE(LooksLikeNcclTests(ReadSample("nccl/all_reduce_perf_tag_output.txt")));
  EXPECT_TRUE(LooksLikeNcclTests(ReadSample("nccl/sendrecv_pasted_header.txt")));
  EXPECT_TRUE(LooksLikeNcclTests(ReadSample("nccl/all_reduce_perf_v1_error_column.txt")));
  EXPECT_FALSE(LooksLikeNcclTests(kXditLog));
  EXPECT_FALSE(LooksLikeNcclTests("source,kind,op,device,median_s\n"));
  EXPECT_TRUE(LooksLikeXditLog(ReadSample("xdit/runner_iterations.log")));
  EXPECT_TRUE(LooksLikeXditLog(ReadSample("xdit/runner_average_only.log")));
  EXPECT_TRUE(LooksLikeXditLog(ReadSample("xdit/timings.json")));
  EXPECT_TRUE(LooksLikeXditLog(ReadSample("xdit/usp_latency_test.log")));
  EXPECT_FALSE(LooksLikeXditLog(kAllReduce));
}

// ---------------------------------------------------------------------------------------------
// xDiT outputs.

StatusOr<std::vector<Measurement>> ParseXditSample(const std::string& name, IngestContext ctx,
                                                   std::vector<std::string>* warnings) {
  ctx.warnings = warnings;
  return ParseXditLog(ReadSample("xdit/" + name), ctx, name);
}

TEST(IngestXditFilesTest, UnifiedRunnerIterationLines) {
  IngestContext ctx = XditContext();
  ctx.run["config"] = "ulysses=4";
  ctx.run["gpus"] = 4;
  std::vector<std::string> warnings;
  auto result = ParseXditSample("runner_iterations.log", ctx, &warnings);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  // Three runs; their average is not a fourth.
  ASSERT_EQ(result->size(), 3u);
  EXPECT_DOUBLE_EQ((*result)[0].median.value(), 5.84);
  EXPECT_DOUBLE_EQ((*result)[2].median.value(), 5.81);  // "5.81s"
  for (size_t i = 0; i < 3; ++i) {
    const Measurement& m = (*result)[i];
    EXPECT_EQ(m.params.at("iteration"), i);
    EXPECT_EQ(m.ranks, 4);
    EXPECT_EQ(m.samples, 1);
    // "model memory: 33.91 GB, overall memory: 38.47 GB" on a line of its own.
    EXPECT_DOUBLE_EQ(m.params.at("parameter_memory_gb").get<double>(), 33.91);
    EXPECT_DOUBLE_EQ(m.params.at("peak_memory_gb").get<double>(), 38.47);
  }
  EXPECT_TRUE(warnings.empty()) << AllWarnings(warnings);
}

TEST(IngestXditFilesTest, UnifiedRunnerAverageAlone) {
  auto result = ParseXditSample("runner_average_only.log", XditContext(), nullptr);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->size(), 1u);
  EXPECT_DOUBLE_EQ(result->front().median.value(), 3.42);
  EXPECT_EQ(result->front().samples, 5);
  EXPECT_EQ(result->front().params.at("statistic"), "mean");
  ExpectInvalid(ParseXditLog("Average time over 0 runs: 1.0 s\n", XditContext(), "r.log"),
                {"r.log:1:", "0 runs"});
  ExpectInvalid(ParseXditLog("Iteration 1 completed in 900 ms\n", XditContext(), "r.log"),
                {"r.log:1:", "'ms'", "seconds"});
}

TEST(IngestXditFilesTest, TimingsJson) {
  IngestContext ctx = XditContext();
  auto result = ParseXditSample("timings.json", ctx, nullptr);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->size(), 3u);
  EXPECT_DOUBLE_EQ((*result)[1].median.value(), 5.86);
  // The document's own degrees replace --config's.
  EXPECT_EQ((*result)[1].params.at("config"), "ulysses=2,ring=2");
  EXPECT_EQ((*result)[1].ranks, 4);
  EXPECT_EQ((*result)[1].params.at("iteration"), 2);
  EXPECT_EQ((*result)[1].params.at("steps"), 28);

  auto list = ParseXditSample("timings_list.json", ctx, nullptr);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_DOUBLE_EQ((*list)[0].median.value(), 5.9124);  // "time_ms"
  EXPECT_EQ((*list)[0].params.at("config"), "ulysses=8");

  ExpectInvalid(ParseXditLog("{\"timings\": [5.9, \"fast\"]}", ctx, "t.json"),
                {"t.json", "\"timings\" entry 2", "\"fast\""});
  ExpectInvalid(ParseXditLog("{\"timings\": [5.9, -1]}", ctx, "t.json"),
                {"t.json", "\"timings\" entry 2", "> 0"});
  ExpectInvalid(ParseXditLog("{\"timings\": [5.9,", ctx, "t.json"), {"t.json", "not valid JSON"});
  ExpectInvalid(ParseXditLog("{\"model\": \"flux\"}", ctx, "t.json"),
                {"t.json", "per-run timings"});
}

TEST(IngestXditFilesTest, NewerMemoryLabels) {
  auto result = ParseXditSample("example_new_memory.log", XditContext(), nullptr);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->size(), 1u);
  EXPECT_DOUBLE_EQ(result->front().median.value(), 5.21);
  EXPECT_DOUBLE_EQ(result->front().params.at("parameter_memory_gb").get<double>(), 33.85);
  EXPECT_DOUBLE_EQ(result->front().params.at("peak_memory_gb").get<double>(), 36.02);
  ExpectInvalid(ParseXditLog("epoch time: 5.2 sec, model memory: 33 GiB\n", XditContext(), "m.log"),
                {"m.log:1:", "'model memory:'", "'GiB'"});
}

TEST(IngestXditFilesTest, EachResultBelongsToTheConfigurationAnnouncedBeforeIt) {
  std::vector<std::string> warnings;
  const std::string text = ReadSample("xdit/usp_latency_test.log");
  auto result = ParseXditSample("usp_latency_test.log", XditContext(), &warnings);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  // The ulysses=4 run failed: three results.
  ASSERT_EQ(result->size(), 3u);
  EXPECT_EQ((*result)[0].params.at("config"), "ring=8");
  EXPECT_EQ((*result)[1].params.at("config"), "ulysses=2,ring=4");
  EXPECT_EQ((*result)[2].params.at("config"), "ulysses=8");
  EXPECT_EQ((*result)[2].params.at("height"), 2048);
  EXPECT_EQ((*result)[2].params.at("width"), 2048);
  EXPECT_EQ((*result)[0].params.at("height"), 1024);
  EXPECT_EQ((*result)[1].params.at("config_line"), LineOf(text, "ulysses_degree 2, ring_degree 4"));
  for (const Measurement& m : *result) EXPECT_EQ(m.ranks, 8);
  EXPECT_DOUBLE_EQ((*result)[1].median.value(), 7.12);
  // --config ulysses=8 was given: said once, where the log first departs from it.
  ASSERT_EQ(warnings.size(), 1u) << AllWarnings(warnings);
  EXPECT_EQ(warnings[0].find("usp_latency_test.log:1:"), 0u) << warnings[0];

  // The single-node script's spelling: split batch, pp_degree, patches, warm-up steps.
  auto single = ParseXditSample("single_node_latency_test.log", XditContext(), nullptr);
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  ASSERT_EQ(single->size(), 2u);
  EXPECT_EQ((*single)[0].params.at("config"), "ulysses=8");
  auto hybrid = ParseParallelConfig("ulysses=2,pipefusion=2,patches=4,warmup=1,cfg=2");
  ASSERT_TRUE(hybrid.ok());
  EXPECT_EQ((*single)[1].params.at("config"), ToString(*hybrid));
  EXPECT_EQ((*single)[1].ranks, 8);

  // Without --config or --ranks, the announcement alone gives the GPUs; a result before any
  // announcement has none.
  IngestContext bare = XditContext();
  bare.run.erase("gpus");
  bare.run.erase("config");
  auto announced = ParseXditLog(text, bare, "u.log");
  ASSERT_TRUE(announced.ok()) << announced.status().ToString();
  EXPECT_EQ(announced->size(), 3u);
  ExpectInvalid(ParseXditLog("epoch time: 5.0 sec\n" + text, bare, "u.log"),
                {"u.log:1:", "--ranks"});
  ExpectInvalid(
      ParseXditLog("Running test for size 1024, ulysses_degree two\nepoch time: 5.0 sec\n", bare,
                   "u.log"),
      {"u.log:1:", "ulysses_degree two", "whole number"});
}

// ---------------------------------------------------------------------------------------------
// PyTorch profiler traces: the samples under tests/data/trace (make_samples.py writes them and
// lists their timings: one Ulysses step of two ranks, 16 launches in ProfilerStep#3).

IngestContext TraceContext() {
  IngestContext ctx;
  ctx.device = "h100-sxm5-80gb";
  ctx.link = "nvlink4";
  return ctx;
}

StatusOr<std::vector<Measurement>> ParseTraceSample(const std::string& name, IngestContext ctx,
                                                    std::vector<std::string>* warnings) {
  ctx.warnings = warnings;
  return ParseTorchTrace(ReadSample("trace/" + name), ctx, name);
}

// The measurements of `kind` and `op`.
std::vector<Measurement> Select(const std::vector<Measurement>& all, MeasurementKind kind,
                                std::string_view op) {
  std::vector<Measurement> out;
  for (const Measurement& m : all) {
    if (m.kind == kind && m.op == op) out.push_back(m);
  }
  return out;
}

// A trace of the given events, as Kineto lays it out.
std::string InlineTrace(const std::vector<nlohmann::json>& events) {
  nlohmann::json doc = {{"schemaVersion", 1}, {"traceEvents", events}};
  return doc.dump();
}

// A launch on the main thread and the kernel it issued, with `kernel_args` merged in.
std::vector<nlohmann::json> LaunchedKernel(double ts, const std::string& kernel, double gpu_us,
                                           nlohmann::json kernel_args = nlohmann::json::object()) {
  static int correlation = 1000;
  ++correlation;
  kernel_args["correlation"] = correlation;
  return {{{"ph", "X"},
           {"cat", "cuda_runtime"},
           {"name", "cudaLaunchKernel"},
           {"pid", 7},
           {"tid", 7},
           {"ts", ts},
           {"dur", 5.0},
           {"args", {{"correlation", correlation}}}},
          {{"ph", "X"},
           {"cat", "kernel"},
           {"name", kernel},
           {"pid", 0},
           {"tid", 20},
           {"ts", ts + 10},
           {"dur", gpu_us},
           {"args", kernel_args}}};
}

nlohmann::json CollectiveArgs(const std::string& name, int64_t in, int64_t out, int group) {
  return {{"Collective name", name},
          {"In msg nelems", in},
          {"Out msg nelems", out},
          {"Group size", group},
          {"dtype", "BFloat16"}};
}

TEST(IngestTorchTraceTest, CollectivesAreMediansPerSizeInNcclTestsBytes) {
  std::vector<std::string> warnings;
  auto ms = ParseTraceSample("profile_trace_rank_0.json", TraceContext(), &warnings);
  ASSERT_TRUE(ms.ok()) << ms.status().ToString();

  // Six all_to_alls of 2304 x 3072 bf16 values per rank: what one rank sends.
  auto a2a = Select(*ms, MeasurementKind::kCollective, "all_to_all");
  ASSERT_EQ(a2a.size(), 1u);
  EXPECT_EQ(a2a[0].bytes.value(), 7077888.0 * 2);
  EXPECT_EQ(a2a[0].ranks, 2);
  EXPECT_EQ(a2a[0].samples, 6);
  // Kernel durations 98.7 99.5 99.9 100.1 101.2 250.3 us: the outlier moves no median.
  EXPECT_NEAR(a2a[0].median.value(), 100.0e-6, 1e-12);
  EXPECT_NEAR(a2a[0].p10.value(), 98.7e-6, 1e-12);
  EXPECT_NEAR(a2a[0].p90.value(), 250.3e-6, 1e-12);
  EXPECT_EQ(a2a[0].source, MeasurementSource::kImport);
  EXPECT_EQ(a2a[0].backend, "nccl");
  EXPECT_EQ(a2a[0].device, "h100-sxm5-80gb");
  EXPECT_EQ(a2a[0].link, "nvlink4");
  EXPECT_EQ(a2a[0].params.at("source"), "torch-profiler");

  // _allgather_base: nccl-tests' all_gather size is the gathered output (2 x 131072 values).
  auto gather = Select(*ms, MeasurementKind::kCollective, "all_gather");
  ASSERT_EQ(gather.size(), 1u);
  EXPECT_EQ(gather[0].bytes.value(), 262144.0 * 2);
  EXPECT_NEAR(gather[0].median.value(), 18.4e-6, 1e-12);
  EXPECT_EQ(CommFitKey(gather[0]), "all_gather/nvlink4@2");

  // The broadcast is not modelled: left out, with a warning naming it.
  EXPECT_EQ(Select(*ms, MeasurementKind::kCollective, "broadcast").size(), 0u);
  EXPECT_EQ(CountWarnings(warnings, {"profile_trace_rank_0.json", "'broadcast'"}), 1)
      << AllWarnings(warnings);

  // GPU time by class, informational: flash attention is not counted as a GEMM.
  auto profile = Select(*ms, MeasurementKind::kE2e, "profile");
  ASSERT_EQ(profile.size(), 1u);
  const auto& gpu = profile[0].params.at("gpu_kernel_s");
  EXPECT_NEAR(gpu.at("gemm").get<double>(), 4 * 310.5e-6, 1e-12);
  EXPECT_NEAR(gpu.at("attention").get<double>(), 820.25e-6, 1e-12);
  EXPECT_NEAR(gpu.at("nccl").get<double>(), (749.7 + 12 + 18.4) * 1e-6, 1e-12);
  EXPECT_NEAR(gpu.at("other").get<double>(), (35.5 + 42 + 6.5 + 3) * 1e-6, 1e-12);
  EXPECT_EQ(profile[0].ranks, 2);
  EXPECT_EQ(ms->size(), 4u);
}

TEST(IngestTorchTraceTest, LaunchOverheadIsTheIssuingThreadsUnblockedTime) {
  std::vector<std::string> warnings;
  auto ms = ParseTraceSample("profile_trace_rank_0.json", TraceContext(), &warnings);
  ASSERT_TRUE(ms.ok()) << ms.status().ToString();
  auto launch = Select(*ms, MeasurementKind::kOp, "launch");
  ASSERT_EQ(launch.size(), 1u);
  // 16 launches in ProfilerStep#3 (the one before it is not counted), from 1100 us to the
  // last one's end at 4384 us, less the 2500 us cudaStreamSynchronize between them.
  EXPECT_EQ(launch[0].params.at("launches"), 16);
  EXPECT_NEAR(launch[0].median.value(), (4384.0 - 1100.0 - 2500.0) * 1e-6, 1e-12);
  EXPECT_NEAR(launch[0].params.at("blocked_s").get<double>(), 2500e-6, 1e-12);
  EXPECT_EQ(launch[0].backend, "xdit");
  EXPECT_EQ(launch[0].device, "h100-sxm5-80gb");
  EXPECT_TRUE(launch[0].link.empty());
  EXPECT_TRUE(CheckFittable(launch[0]).ok()) << CheckFittable(launch[0]).ToString();
  // With a second trace of twice the launches, the two points make the xDiT launch fit.
  Measurement twice = launch[0];
  twice.params["launches"] = 32;
  twice.median = Seconds(2 * launch[0].median.value());
  twice.p10 = twice.median;
  twice.p90 = twice.median;
  auto fits = BuildFits({launch[0], twice});
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  ASSERT_EQ(fits->size(), 1u);
  EXPECT_EQ((*fits)[0].key, "h100-sxm5-80gb/xdit/launch");
}

TEST(IngestTorchTraceTest, GzippedTraceIsRecognisedByItsBytes) {
  const std::string gz = ReadSample("trace/profile_trace_rank_1.json.gz");
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);
  auto detected = DetectIngestFormat(gz, "profile_trace_rank_1.json.gz");
  ASSERT_TRUE(detected.ok()) << detected.status().ToString();
  EXPECT_EQ(*detected, IngestFormat::kTorchTrace);
  std::vector<std::string> warnings;
  IngestContext ctx = TraceContext();
  ctx.warnings = &warnings;
  auto ms = ParseIngest(gz, IngestFormat::kAuto, ctx, "profile_trace_rank_1.json.gz");
  ASSERT_TRUE(ms.ok()) << ms.status().ToString();
  // An older Kineto: the NCCL kernels name no collective and are linked to their
  // record_param_comms op by "External id". Durations 97..102 us: median 99.5 us.
  auto a2a = Select(*ms, MeasurementKind::kCollective, "all_to_all");
  ASSERT_EQ(a2a.size(), 1u);
  EXPECT_EQ(a2a[0].bytes.value(), 7077888.0 * 2);
  EXPECT_NEAR(a2a[0].median.value(), 99.5e-6, 1e-12);
  // ProfilerStep#3 as a cpu_op; the launch on another thread is counted apart, and said so.
  auto launch = Select(*ms, MeasurementKind::kOp, "launch");
  ASSERT_EQ(launch.size(), 1u);
  EXPECT_EQ(launch[0].params.at("launches"), 16);
  EXPECT_EQ(CountWarnings(warnings, {"1 kernel launches on other host threads"}), 1)
      << AllWarnings(warnings);
}

TEST(IngestTorchTraceTest, CutShortOrNotATraceIsRefusedNamingTheFile) {
  const std::string json = ReadSample("trace/profile_trace_rank_0.json");
  ExpectInvalid(ParseTorchTrace(json.substr(0, json.size() / 2), TraceContext(), "rank0.json"),
                {"rank0.json", "cut short"});
  const std::string gz = ReadSample("trace/profile_trace_rank_1.json.gz");
  ExpectInvalid(ParseTorchTrace(gz.substr(0, gz.size() / 2), TraceContext(), "rank1.json.gz"),
                {"rank1.json.gz", "gzip", "cut short"});
  ExpectInvalid(ParseTorchTrace("{\"timings\": [6.7, 6.8]}", TraceContext(), "t.json"),
                {"t.json", "traceEvents"});
  ExpectInvalid(ParseTorchTrace("{\"traceEvents\": [1, 2 x]}", TraceContext(), "x.json"),
                {"x.json", "not valid JSON"});
  ExpectInvalid(ParseTorchTrace(std::string(200, '['), TraceContext(), "deep.json"),
                {"deep.json", "not a PyTorch profiler trace"});
  // Events, but none a collective or a launch.
  ExpectInvalid(
      ParseTorchTrace(
          InlineTrace(
              {{{"ph", "X"}, {"cat", "cpu_op"}, {"name", "aten::mm"}, {"ts", 1.0}, {"dur", 2.0}}}),
          TraceContext(), "cpu.json"),
      {"cpu.json", "no usable events"});
  IngestContext no_gpu = TraceContext();
  no_gpu.device.clear();
  ExpectInvalid(ParseTorchTrace(json, no_gpu, "rank0.json"), {"rank0.json", "--gpu"});
  IngestContext no_link = TraceContext();
  no_link.link.clear();
  ExpectInvalid(ParseTorchTrace(json, no_link, "rank0.json"), {"rank0.json", "--link"});
}

TEST(IngestTorchTraceTest, WithoutCommunicationTheLaunchOverheadStillCounts) {
  std::vector<std::string> warnings;
  IngestContext ctx = TraceContext();
  ctx.link.clear();  // not needed without collectives
  auto ms = ParseTraceSample("profile_trace_1gpu.json", ctx, &warnings);
  ASSERT_TRUE(ms.ok()) << ms.status().ToString();
  EXPECT_EQ(Select(*ms, MeasurementKind::kCollective, "all_to_all").size(), 0u);
  auto launch = Select(*ms, MeasurementKind::kOp, "launch");
  ASSERT_EQ(launch.size(), 1u);
  // 7 compute launches 45 us apart, then the sync, then one more: 1100 .. 4021 us.
  EXPECT_EQ(launch[0].params.at("launches"), 8);
  EXPECT_NEAR(launch[0].median.value(), (4021.0 - 1100.0 - 2500.0) * 1e-6, 1e-12);
  EXPECT_EQ(ms->size(), 2u);  // and the GPU time summary
}

TEST(IngestTorchTraceTest, UnmodelledCollectivesAreSkippedWithAWarning) {
  std::vector<nlohmann::json> events;
  for (auto e : LaunchedKernel(100, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*)", 30,
                               CollectiveArgs("allreduce_coalesced", 4096, 4096, 4))) {
    events.push_back(e);
  }
  for (auto e : LaunchedKernel(200, "ncclDevKernel_Broadcast_RING_LL(ncclDevComm*)", 10,
                               CollectiveArgs("broadcast", 16, 16, 4))) {
    events.push_back(e);
  }
  for (auto e : LaunchedKernel(300, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*)", 40,
                               CollectiveArgs("allreduce", 4096, 4096, 4))) {
    events.push_back(e);
  }
  // barrier(): an all_reduce of one value inside the barrier's own comm op.
  auto comm_op = [](double ts, double dur, int64_t id, nlohmann::json args) {
    args["External id"] = id;
    return nlohmann::json{{"ph", "X"},  {"cat", "cpu_op"}, {"name", "record_param_comms"},
                          {"pid", 7},   {"tid", 7},        {"ts", ts},
                          {"dur", dur}, {"args", args}};
  };
  events.push_back(comm_op(400, 30, 90, CollectiveArgs("barrier", 0, 0, 4)));
  events.push_back(comm_op(405, 20, 91, CollectiveArgs("allreduce", 1, 1, 4)));
  for (auto e : LaunchedKernel(410, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", 900,
                               {{"External id", 91}})) {
    events.push_back(e);
  }
  std::vector<std::string> warnings;
  IngestContext ctx = TraceContext();
  ctx.warnings = &warnings;
  auto ms = ParseTorchTrace(InlineTrace(events), ctx, "mixed.json");
  ASSERT_TRUE(ms.ok()) << ms.status().ToString();
  auto reduce = Select(*ms, MeasurementKind::kCollective, "all_reduce");
  ASSERT_EQ(reduce.size(), 1u);  // not the barrier's
  EXPECT_EQ(reduce[0].bytes.value(), 4096.0 * 2);
  EXPECT_EQ(reduce[0].ranks, 4);
  EXPECT_EQ(Select(*ms, MeasurementKind::kOp, "launch")[0].params.at("launches"), 4);
  EXPECT_EQ(CountWarnings(warnings, {"skipped 1 NCCL kernels of barrier()"}), 1)
      << AllWarnings(warnings);
  EXPECT_EQ(CountWarnings(warnings, {"mixed.json: skipped 1 NCCL kernels of "
                                     "'allreduce_coalesced'"}),
            1)
      << AllWarnings(warnings);
  EXPECT_EQ(CountWarnings(warnings, {"'broadcast'", "does not model"}), 1) << AllWarnings(warnings);

  // Only unmodelled collectives and no launches: nothing usable.
  std::vector<nlohmann::json> kernels_only = {events[1], events[3]};
  ExpectInvalid(ParseTorchTrace(InlineTrace(kernels_only), ctx, "only.json"),
                {"only.json", "no usable events"});
}

TEST(IngestTorchTraceTest, UnlinkedKernelsArePairedWithCommOpsInOrderOnlyWhenCountsAgree) {
  auto comm = [](double ts, int64_t nelems) {
    nlohmann::json args = CollectiveArgs("all_to_all", nelems, nelems, 2);
    return nlohmann::json{{"ph", "X"},  {"cat", "cpu_op"}, {"name", "record_param_comms"},
                          {"pid", 7},   {"tid", 7},        {"ts", ts},
                          {"dur", 8.0}, {"args", args}};
  };
  std::vector<nlohmann::json> events = {comm(100, 1000), comm(200, 3000)};
  for (double ts : {102.0, 202.0}) {
    for (auto e : LaunchedKernel(ts, "ncclDevKernel_SendRecv(ncclDevComm*)", 20)) {
      events.push_back(e);
    }
  }
  std::vector<std::string> warnings;
  IngestContext ctx = TraceContext();
  ctx.warnings = &warnings;
  auto ms = ParseTorchTrace(InlineTrace(events), ctx, "order.json");
  ASSERT_TRUE(ms.ok()) << ms.status().ToString();
  auto a2a = Select(*ms, MeasurementKind::kCollective, "all_to_all");
  ASSERT_EQ(a2a.size(), 2u);
  EXPECT_EQ(a2a[0].bytes.value(), 2000.0);
  EXPECT_EQ(a2a[1].bytes.value(), 6000.0);
  EXPECT_EQ(CountWarnings(warnings, {"paired 2 NCCL kernels", "in launch order"}), 1)
      << AllWarnings(warnings);

  // One comm op more than kernels: no pairing is trusted.
  events.push_back(comm(300, 5000));
  warnings.clear();
  auto unpaired = ParseTorchTrace(InlineTrace(events), ctx, "order.json");
  ASSERT_TRUE(unpaired.ok()) << unpaired.status().ToString();
  EXPECT_EQ(Select(*unpaired, MeasurementKind::kCollective, "all_to_all").size(), 0u);
  EXPECT_EQ(CountWarnings(warnings, {"left out 2 NCCL kernels"}), 1) << AllWarnings(warnings);
}

// A kernel event on the GPU's timeline, launched by the call with `correlation` (or by none
// the trace holds).
nlohmann::json Kernel(const std::string& name, double ts, double gpu_us, int correlation,
                      nlohmann::json args = nlohmann::json::object()) {
  args["correlation"] = correlation;
  return {{"ph", "X"}, {"cat", "kernel"}, {"name", name}, {"pid", 0},
          {"tid", 20}, {"ts", ts},        {"dur", gpu_us},  {"args", args}};
}
nlohmann::json Launch(double ts, int correlation) {
  return {{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"},       {"pid", 7},
          {"tid", 7},  {"ts", ts},              {"dur", 5.0}, {"args", {{"correlation", correlation}}}};
}

// Two ProfilerStep windows of a run of 4 denoising steps per window (xDiT's runner: one
// generation per profiler step). Each window's kernels are those launched in it: a kernel
// launched at the end of window 1 that runs in window 2's span is window 1's; one launched
// before window 1 that runs inside it is no window's; one whose launch the trace does not
// hold counts by its own start.
TEST(IngestTorchTraceTest, KernelTimeByClassPerWindowAndPerDenoisingStep) {
  const std::string gemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_cublas";
  const std::string flash = "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128>>";
  const std::string ew = "void at::native::vectorized_elementwise_kernel<4, MulFunctor>";
  const std::string nccl = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)";
  auto window = [](int n, double ts) {
    return nlohmann::json{{"ph", "X"},  {"cat", "user_annotation"}, {"name", fmt::format("ProfilerStep#{}", n)},
                          {"pid", 7},   {"tid", 7},                 {"ts", ts},
                          {"dur", 1000.0}};
  };
  std::vector<nlohmann::json> events = {window(1, 1000), window(2, 2000)};
  auto add = [&](double launch_ts, double kernel_ts, const std::string& name, double gpu_us,
                 nlohmann::json args = nlohmann::json::object()) {
    static int correlation = 5000;
    ++correlation;
    events.push_back(Launch(launch_ts, correlation));
    events.push_back(Kernel(name, kernel_ts, gpu_us, correlation, std::move(args)));
  };
  add(500, 510, ew, 10);      // before the windows
  add(950, 1050, gemm, 30);   // launched before window 1, runs in it: no window's
  add(1100, 1110, gemm, 300);
  add(1200, 1410, flash, 800);
  add(1300, 2210, ew, 40);    // runs after window 1's span: still window 1's
  add(1400, 2250, nccl, 100, CollectiveArgs("all_to_all", 1024, 1024, 2));
  add(1990, 2300, gemm, 50);  // launched at the end of window 1
  add(2100, 2400, gemm, 320);
  add(2200, 2720, flash, 760);
  add(2300, 3480, ew, 60);
  events.push_back(Kernel(ew, 2500, 20, 999999));  // its launch is not in the trace
  IngestContext ctx = TraceContext();
  ctx.run = {{"model", "flux.1-dev"}, {"height", 1024}, {"width", 1024}, {"steps", 4},
             {"config", "ulysses=2"}, {"gpus", 2}};
  std::vector<std::string> warnings;
  ctx.warnings = &warnings;
  auto ms = ParseTorchTrace(InlineTrace(events), ctx, "steps.json");
  ASSERT_TRUE(ms.ok()) << ms.status().ToString();
  auto profile = Select(*ms, MeasurementKind::kE2e, "profile");
  ASSERT_EQ(profile.size(), 1u);
  const nlohmann::json& p = profile[0].params;
  // Window 1: gemm 300 + 50, attention 800, other 40, nccl 100; window 2: gemm 320,
  // attention 760, other 60 + 20. The mean per window, and over its 4 steps.
  EXPECT_EQ(p.at("windows"), 2);
  const std::map<std::string, double> per_window = {
      {"gemm", 335e-6}, {"attention", 780e-6}, {"other", 60e-6}, {"nccl", 50e-6}};
  for (const auto& [cls, s] : per_window) {
    EXPECT_NEAR(p.at("window_kernel_s").at(cls).get<double>(), s, 1e-15) << cls;
    EXPECT_NEAR(p.at("gpu_kernel_s_per_step").at(cls).get<double>(), s / 4, 1e-15) << cls;
  }
  // Over the whole trace, every kernel.
  EXPECT_NEAR(p.at("gpu_kernel_s").at("gemm").get<double>(), 700e-6, 1e-15);
  EXPECT_NEAR(p.at("gpu_kernel_s").at("other").get<double>(), 130e-6, 1e-15);
  // The workload it is compared with, as the ingest was told.
  EXPECT_EQ(p.at("model"), "flux.1-dev");
  EXPECT_EQ(p.at("config"), "ulysses=2");
  EXPECT_EQ(p.at("steps"), 4);
  EXPECT_EQ(profile[0].ranks, 2);
  EXPECT_EQ(profile[0].device, "h100-sxm5-80gb");

  // Without the steps: per window only, and a warning saying what to pass.
  ctx.run.erase("steps");
  warnings.clear();
  ms = ParseTorchTrace(InlineTrace(events), ctx, "steps.json");
  ASSERT_TRUE(ms.ok()) << ms.status().ToString();
  profile = Select(*ms, MeasurementKind::kE2e, "profile");
  ASSERT_EQ(profile.size(), 1u);
  EXPECT_NEAR(profile[0].params.at("window_kernel_s").at("attention").get<double>(), 780e-6, 1e-15);
  EXPECT_FALSE(profile[0].params.contains("gpu_kernel_s_per_step"));
  EXPECT_EQ(CountWarnings(warnings, {"steps.json", "--steps"}), 1) << AllWarnings(warnings);

  // Without windows: the whole trace only.
  events.erase(events.begin(), events.begin() + 2);
  warnings.clear();
  ms = ParseTorchTrace(InlineTrace(events), ctx, "whole.json");
  ASSERT_TRUE(ms.ok()) << ms.status().ToString();
  profile = Select(*ms, MeasurementKind::kE2e, "profile");
  ASSERT_EQ(profile.size(), 1u);
  EXPECT_EQ(profile[0].params.at("windows"), 0);
  EXPECT_FALSE(profile[0].params.contains("window_kernel_s"));
  EXPECT_NEAR(profile[0].params.at("gpu_kernel_s").at("attention").get<double>(), 1560e-6, 1e-15);
  EXPECT_EQ(CountWarnings(warnings, {"whole.json", "no ProfilerStep#N windows"}), 1) << AllWarnings(warnings);
}

TEST(IngestTorchTraceTest, DetectedBeforeTheJsonTimingsOfXditLogs) {
  auto format = [](std::string_view text) {
    auto f = DetectIngestFormat(text, "t.json");
    return f.ok() ? *f : IngestFormat::kAuto;
  };
  EXPECT_EQ(format(ReadSample("trace/profile_trace_rank_0.json")), IngestFormat::kTorchTrace);
  // A trace with no other array would otherwise pass for a timings document.
  EXPECT_EQ(format("{\"traceEvents\": []}"), IngestFormat::kTorchTrace);
  EXPECT_EQ(format("{\"timings\": [6.71, 6.69]}"), IngestFormat::kXditLog);
  EXPECT_FALSE(ingest_internal::LooksLikeTorchTrace("# nThread 1 nGpus 8\n"));
  ExpectInvalid(DetectIngestFormat("hello,world\n1,2\n", "notes.txt"), {"torch-trace"});
}

}  // namespace
}  // namespace ditune
