// Chrome trace export of a simulated schedule.
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/rank_layout.h"
#include "core/output_file.h"
#include "simulator/simulate.h"

namespace ditune {

Status WriteChromeTrace(const TaskScheduler& e, const SimInput& in, const std::string& path) {
  DITUNE_ASSIGN_OR_RETURN(RankLayout layout, RankLayout::Create(in.config, in.cluster->gpus_per_node()));
  // Representative rank of each stage -> the ranks it stands for.
  std::map<int, std::vector<int>> members;
  for (int r = 0; r < layout.world_size(); ++r) {
    RankCoords rc;
    rc.index[static_cast<int>(Axis::kPipeFusion)] = layout.CoordsOf(r)[Axis::kPipeFusion];
    members[layout.RankOf(rc)].push_back(r);
  }
  // The size is known before anything is built: refuse a trace no viewer opens rather than
  // exhaust the host's memory making it.
  size_t count = static_cast<size_t>(layout.world_size());
  for (int s = 0; s < e.num_streams(); ++s) count += members[e.stream_rank(s)].size();
  for (int i = 0; i < e.num_tasks(); ++i) {
    if (e.task(i).duration.value() > 0) count += members[e.stream_rank(e.task(i).stream)].size();
  }
  if (count > kMaxTraceEvents) {
    return Status::InvalidArgument(fmt::format(
        "--trace: the schedule of {} ranks would be {} trace events; at most {} (about {} MB): trace fewer --steps "
        "or a smaller cluster (the figures without --trace cover the whole run)",
        layout.world_size(), count, kMaxTraceEvents, kMaxTraceEvents * 150 / 1'000'000));
  }
  // Written as text, an event at a time: a JSON tree of every event would take ten times the
  // file's size.
  std::string out = "{\"traceEvents\":[\n";
  bool first = true;
  auto add = [&](const std::string& event) {
    if (!first) out += ",\n";
    first = false;
    out += event;
  };
  for (int r = 0; r < layout.world_size(); ++r) {
    add(fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"args":{{"name":"rank {}"}}}})", r, r));
  }
  for (int s = 0; s < e.num_streams(); ++s) {
    const std::string name = nlohmann::json(e.stream_name(s)).dump();
    for (int r : members[e.stream_rank(s)]) {
      add(fmt::format(R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":{}}}}})", r, s % 3, name));
    }
  }
  for (int i = 0; i < e.num_tasks(); ++i) {
    const TaskSpec& t = e.task(i);
    if (t.duration.value() <= 0) continue;
    const char* cat = t.kind == TaskKind::kHost         ? "host"
                      : t.kind == TaskKind::kComm       ? "comm"
                      : t.kind == TaskKind::kTextEncode ? "text_encode"
                      : t.kind == TaskKind::kVaeDecode  ? "vae_decode"
                                                        : "compute";
    const std::string name = nlohmann::json(t.name).dump();
    std::string args = fmt::format(R"("step":{})", t.step);
    if (t.comm_part.value() > 0) args += fmt::format(R"(,"sync_comm_us":{})", t.comm_part.value() * 1e6);
    for (int r : members[e.stream_rank(t.stream)]) {
      add(fmt::format(R"({{"name":{},"cat":"{}","ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"args":{{{}}}}})", name,
                      cat, r, t.stream % 3, e.start(i).value() * 1e6, t.duration.value() * 1e6, args));
    }
  }
  out += "\n],\"displayTimeUnit\":\"ms\"}\n";
  return WriteFileWhole(path, out, "trace");
}

}  // namespace ditune
