// nccl-tests' names: of collectives as ditune and nccl-tests spell them, of the programs a
// command line or file name mentions, and the timed iterations a banner announces.
#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/text.h"
#include "ingest/ingest_impl.h"
#include "ingest/ingest_nccl_impl.h"

namespace ditune::ingest_internal::nccl {

// Shortens `s` to at most `n` characters, marking the cut: for quoting log text in messages.
std::string Excerpt(std::string_view s, size_t n) {
  s = Trim(s);
  if (s.size() <= n) return std::string(s);
  return fmt::format("{}...", s.substr(0, n));
}

// ditune's name for a collective given as ditune or nccl-tests spell it; nullopt otherwise.
std::optional<std::string> NormalizeCollective(std::string_view name) {
  std::string s = Lower(Trim(name));
  std::replace(s.begin(), s.end(), '-', '_');
  if (s.size() > 5 && s.ends_with("_perf")) s.resize(s.size() - 5);
  if (s == "all_to_all" || s == "alltoall") return "all_to_all";
  if (s == "all_gather" || s == "allgather") return "all_gather";
  if (s == "all_reduce" || s == "allreduce") return "all_reduce";
  if (s == "sendrecv" || s == "send_recv") return "sendrecv";
  if (s == "reduce_scatter" || s == "reducescatter") return "reduce_scatter";
  return std::nullopt;
}

// The collectives a file or program name mentions (all_reduce_perf.txt, alltoall-8gpu.log,
// ./build/sendrecv_perf, ...).
std::set<std::string> CollectivesInFileName(std::string_view origin) {
  const size_t slash = origin.find_last_of("/\\");
  const std::string base =
      Lower(slash == std::string_view::npos ? origin : origin.substr(slash + 1));
  const std::pair<std::string_view, std::string_view> kNeedles[] = {
      {"all_reduce", "all_reduce"},
      {"allreduce", "all_reduce"},
      {"all_gather", "all_gather"},
      {"allgather", "all_gather"},
      {"all_to_all", "all_to_all"},
      {"alltoall", "all_to_all"},
      {"sendrecv", "sendrecv"},
      {"send_recv", "sendrecv"},
      {"reduce_scatter", "reduce_scatter"},
      {"reducescatter", "reduce_scatter"}};
  std::set<std::string> found;
  for (const auto& [needle, name] : kNeedles) {
    const size_t at = base.find(needle);
    if (at == std::string::npos) continue;
    // alltoallv_perf is a different test (per-peer counts).
    if (name == "all_to_all" && at + needle.size() < base.size() &&
        base[at + needle.size()] == 'v') {
      continue;
    }
    found.emplace(name);
  }
  return found;
}

// The nccl-tests program a token of a command or script line names ("./build/all_gather_perf",
// "alltoall_perf:", "sendrecv_perf_mpi"), or "" when it names none.
std::string_view ProgramIn(std::string_view token) {
  constexpr std::string_view kOpen = "\"'([{<=";
  constexpr std::string_view kClose = "\"')]}>=:,;.";
  while (!token.empty() && kOpen.find(token.front()) != std::string_view::npos) {
    token.remove_prefix(1);
  }
  while (!token.empty() && kClose.find(token.back()) != std::string_view::npos) {
    token.remove_suffix(1);
  }
  if (const size_t slash = token.find_last_of('/'); slash != std::string_view::npos) {
    token = token.substr(slash + 1);
  }
  if (!(token.ends_with("_perf") || token.ends_with("_perf_mpi")) || token.size() <= 5) return {};
  for (char c : token) {
    if (!(IsAlpha(c) || IsDigit(c) || c == '_' || c == '-' || c == '.')) return {};
  }
  return token;
}

// The modelled collective a program name measures; "" when ditune does not model it.
std::string CollectiveOfProgram(std::string_view program) {
  std::set<std::string> named = CollectivesInFileName(program);
  return named.size() == 1 ? *named.begin() : std::string();
}

// "# nThread 1 nGpus 8 ... warmup iters: 5 iters: 20 agg iters: 1 ...": the timed iterations
// (older versions: "nThread: 1 ... warmupIters: 5 iters: 20").
std::optional<int> TimedIters(const std::vector<std::string_view>& tokens) {
  for (size_t i = 1; i + 1 < tokens.size(); ++i) {
    if (tokens[i] != "iters:" || tokens[i - 1] == "warmup" || tokens[i - 1] == "agg") continue;
    if (auto v = ParseInt(tokens[i + 1]); v && *v >= 1 && *v <= 1'000'000'000) {
      return static_cast<int>(*v);
    }
  }
  return std::nullopt;
}

}  // namespace ditune::ingest_internal::nccl
