#include "executor/rank_agreement.h"

#include <algorithm>

#include <fmt/format.h>

namespace ditune::exec {
namespace {

std::vector<std::pair<std::string, std::string>> Fields(const std::string& text);

}  // namespace

std::string EncodeIntent(const RankIntent& intent) {
  std::string text;
  if (!intent.refused.ok()) {
    text = fmt::format("E{}\n{}", intent.refused.ExitCode(), intent.refused.message());
  } else {
    text = "K";
    for (const auto& [name, value] : intent.fields) text += name + "\t" + value + "\n";
  }
  if (text.size() > kMaxIntentChars) text.resize(kMaxIntentChars);
  return text;
}

namespace {

std::vector<std::pair<std::string, std::string>> Fields(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t pos = 1;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    const size_t tab = line.find('\t');
    out.emplace_back(line.substr(0, tab), tab == std::string::npos ? "" : line.substr(tab + 1));
    pos = end + 1;
  }
  return out;
}

}  // namespace

Status CompareIntents(const std::vector<std::string>& texts, int my_rank, const Status& mine) {
  const int n = static_cast<int>(texts.size());
  if (n == 0) return Status::Ok();
  for (int r = 0; r < n; ++r) {
    const std::string& t = texts[static_cast<size_t>(r)];
    if (t.empty() || t[0] != 'E') continue;
    if (r == my_rank && !mine.ok()) return mine;
    const size_t nl = t.find('\n');
    const std::string message = fmt::format("rank {} of {} refused its input, so the job stops: {}", r, n,
                                            nl == std::string::npos ? "" : t.substr(nl + 1));
    // The refusing rank's exit status: 3 where nothing fits, else 2.
    return t.size() > 1 && t[1] == '3' ? Status::Infeasible(message) : Status::InvalidArgument(message);
  }
  const auto root = Fields(texts[0]);
  std::vector<std::string> differences;
  for (int r = 1; r < n; ++r) {
    const auto other = Fields(texts[static_cast<size_t>(r)]);
    for (size_t i = 0; i < std::max(root.size(), other.size()); ++i) {
      const std::string name = i < root.size() ? root[i].first : other[i].first;
      const std::string a = i < root.size() ? root[i].second : "(nothing)";
      const std::string b = i < other.size() && other[i].first == name ? other[i].second : "(nothing)";
      if (a != b) differences.push_back(fmt::format("{}: rank 0 has '{}', rank {} '{}'", name, a, r, b));
    }
  }
  if (differences.empty()) return Status::Ok();
  if (differences.size() > 8) {
    const size_t more = differences.size() - 8;
    differences.resize(8);
    differences.push_back(fmt::format("and {} more", more));
  }
  std::string msg = fmt::format(
      "the {} ranks of this job were not given the same run (every rank needs the same flags, store and plan):", n);
  for (const auto& d : differences) msg += "\n  " + d;
  return Status::InvalidArgument(msg);
}

Status AgreeAcrossRanks(Comm* comm, const RankIntent& mine) {
  const int n = comm->size();
  const std::string text = EncodeIntent(mine);
  // The exchange moves floats: each byte travels as one (exact below 2^24), the length first.
  std::vector<float> send(kMaxIntentChars + 1, 0.0f);
  send[0] = static_cast<float>(text.size());
  for (size_t i = 0; i < text.size(); ++i) send[i + 1] = static_cast<float>(static_cast<unsigned char>(text[i]));
  std::vector<float> all(send.size() * static_cast<size_t>(n));
  DITUNE_RETURN_IF_ERROR(comm->AllGather(send.data(), all.data(), send.size()));
  std::vector<std::string> texts(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const float* p = all.data() + static_cast<size_t>(r) * send.size();
    const size_t len = std::min(kMaxIntentChars, static_cast<size_t>(std::max(0.0f, p[0])));
    std::string& t = texts[static_cast<size_t>(r)];
    for (size_t i = 0; i < len; ++i) t += static_cast<char>(static_cast<unsigned char>(p[i + 1]));
  }
  return CompareIntents(texts, comm->rank(), mine.refused);
}

}  // namespace ditune::exec
