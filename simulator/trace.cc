// Chrome trace export of a simulated schedule.
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/rank_layout.h"
#include "core/trace_file.h"
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
  nlohmann::json events = nlohmann::json::array();
  for (int r = 0; r < layout.world_size(); ++r) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", r}, {"args", {{"name", fmt::format("rank {}", r)}}}});
  }
  for (int s = 0; s < e.num_streams(); ++s) {
    for (int r : members[e.stream_rank(s)]) {
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", r}, {"tid", s % 3},
                        {"args", {{"name", e.stream_name(s)}}}});
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
    for (int r : members[e.stream_rank(t.stream)]) {
      nlohmann::json ev = {{"name", t.name}, {"cat", cat}, {"ph", "X"}, {"pid", r}, {"tid", t.stream % 3},
                           {"ts", e.start(i).value() * 1e6}, {"dur", t.duration.value() * 1e6}};
      ev["args"] = {{"step", t.step}};
      if (t.comm_part.value() > 0) ev["args"]["sync_comm_us"] = t.comm_part.value() * 1e6;
      events.push_back(std::move(ev));
    }
  }
  return WriteTraceFile(events, path);
}

}  // namespace ditune
