// Reading a PyTorch profiler trace file for ingest_torch_trace.cc: gzip inflation, and the
// JSON document with only the events the reader uses.
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "ingest/ingest_impl.h"
#include "ingest/ingest_torch_trace_impl.h"

namespace ditune::ingest_internal {
namespace torch_trace {
namespace {

using Json = nlohmann::json;

// Kineto nests an event's arguments three levels below the document ("grid": [..] in "args"
// in an event in "traceEvents"); anything far deeper is not a trace, and refusing it bounds
// the parser's memory.
constexpr int kMaxTraceDepth = 64;
// The largest trace decompressed: a long profile runs to a few GB of JSON.
constexpr size_t kMaxInflatedBytes = size_t{8} << 30;
constexpr size_t kMaxInflateRatio = 200;
constexpr size_t kMinInflateLimit = size_t{256} << 20;

// The deepest nesting of arrays and objects in `text`, counted up to `limit` + 1.
int Nesting(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// Which event kinds the reader uses; the parser drops the rest as it reads.
bool IsUsedEvent(const Json& e) {
  const auto cat = e.find("cat");
  const auto name = e.find("name");
  if (cat != e.end() && cat->is_string()) {
    const std::string& c = cat->get_ref<const std::string&>();
    if (c == "kernel" || c == "gpu_memcpy" || c == "gpu_memset" || c == "cuda_runtime" ||
        c == "cuda_driver") {
      return true;
    }
  }
  if (name == e.end() || !name->is_string()) return false;
  const std::string& n = name->get_ref<const std::string&>();
  return n == "record_param_comms" || n.starts_with("ProfilerStep#");
}

}  // namespace

bool IsGzip(std::string_view data) {
  return data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f &&
         static_cast<unsigned char>(data[1]) == 0x8b;
}

StatusOr<std::string> Gunzip(std::string_view data, std::string_view origin) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    return Status::Internal(fmt::format("{}: cannot start zlib", origin));
  }
  struct Closer {
    z_stream* zs;
    ~Closer() { inflateEnd(zs); }
  } closer{&zs};
  auto corrupt = [&](std::string_view why) {
    return Status::InvalidArgument(
        fmt::format("{}: gzip data {} (valid: {})", origin, why, kTraceExample));
  };
  // A profiler trace's JSON compresses about 10 to 30 times; far more is a decompression bomb,
  // refused at the bound rather than after the host's memory is spent.
  const size_t limit = std::min(kMaxInflatedBytes, std::max(kMinInflateLimit, kMaxInflateRatio * data.size()));
  std::string out;
  std::vector<unsigned char> buffer(size_t{1} << 16);
  size_t fed = 0;  // bytes of `data` handed to zlib
  for (;;) {
    if (zs.avail_in == 0 && fed < data.size()) {
      const size_t n = std::min<size_t>(data.size() - fed, size_t{1} << 30);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + fed));
      zs.avail_in = static_cast<uInt>(n);
      fed += n;
    }
    zs.next_out = buffer.data();
    zs.avail_out = static_cast<uInt>(buffer.size());
    const int rc = inflate(&zs, Z_NO_FLUSH);
    const size_t produced = buffer.size() - zs.avail_out;
    if (out.size() + produced > limit) {
      return corrupt(fmt::format("decompresses to more than {} MiB ({} times its {} bytes; at most {} times, and "
                                 "{} GiB in all)",
                                 limit >> 20, kMaxInflateRatio, data.size(), kMaxInflateRatio,
                                 kMaxInflatedBytes >> 30));
    }
    // Grown by hand, never past the limit (a doubling string would ask for twice it).
    if (out.size() + produced > out.capacity()) out.reserve(std::min(limit, 2 * (out.size() + produced)));
    out.append(reinterpret_cast<const char*>(buffer.data()), produced);
    if (rc == Z_STREAM_END) {
      const size_t rest = zs.avail_in + (data.size() - fed);
      if (rest == 0) return out;
      const std::string_view tail = data.substr(data.size() - rest);
      if (!IsGzip(tail)) {
        if (tail.find_first_not_of('\0') == std::string_view::npos) return out;  // padding
        return corrupt(fmt::format("is followed by {} bytes that are not gzip", rest));
      }
      if (inflateReset(&zs) != Z_OK) return corrupt("has a member zlib cannot restart on");
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && fed == data.size()) {
      return corrupt(
          "ends before its stream does: the file is cut short (a trace still being written, or "
          "a partial copy)");
    }
    return corrupt(fmt::format("is corrupt ({})", zs.msg != nullptr ? zs.msg : "inflate failed"));
  }
}

StatusOr<Json> ParseTraceJson(std::string_view text, std::string_view origin) {
  const std::string_view t = Trim(text);
  if (t.empty() || t.front() != '{') {
    return Status::InvalidArgument(fmt::format(
        "{}: not a PyTorch profiler trace: {} (valid: {})", origin,
        t.empty() ? "the file is empty" : "it does not start with a JSON object", kTraceExample));
  }
  if (const int depth = Nesting(t, kMaxTraceDepth); depth > kMaxTraceDepth) {
    return Status::InvalidArgument(
        fmt::format("{}: not a PyTorch profiler trace: its JSON nests more than {} levels deep",
                    origin, kMaxTraceDepth));
  }
  // Keeps an event only when the reader uses it: a trace holds millions of CPU ops.
  const Json::parser_callback_t keep = [](int depth, Json::parse_event_t event, Json& parsed) {
    if (event != Json::parse_event_t::object_end || depth != 2) return true;
    const auto ph = parsed.find("ph");
    if (ph == parsed.end()) return true;
    return *ph == "X" && IsUsedEvent(parsed);
  };
  try {
    return Json::parse(t, keep);
  } catch (const Json::parse_error& e) {
    if (e.byte >= t.size()) {
      return Status::InvalidArgument(fmt::format(
          "{}: the JSON ends before the trace does: the file is cut short (a trace still being "
          "written, or a partial copy; valid: {})",
          origin, kTraceExample));
    }
    return Status::InvalidArgument(
        fmt::format("{}: not valid JSON at byte {} ({}); not a PyTorch profiler trace (valid: {})",
                    origin, e.byte, e.what(), kTraceExample));
  } catch (const Json::exception& e) {
    return Status::InvalidArgument(fmt::format("{}: not valid JSON ({})", origin, e.what()));
  }
}

}  // namespace torch_trace

bool LooksLikeTorchTrace(std::string_view data) {
  if (torch_trace::IsGzip(data)) return true;
  if (data.starts_with("\xEF\xBB\xBF")) data.remove_prefix(3);  // a UTF-8 byte-order mark
  const std::string_view t = Trim(data);
  if (t.empty() || t.front() != '{') return false;
  for (size_t at = t.find("\"traceEvents\""); at != std::string_view::npos;
       at = t.find("\"traceEvents\"", at + 1)) {
    const size_t colon = t.find_first_not_of(" \t\r\n", at + 13);
    if (colon == std::string_view::npos || t[colon] != ':') continue;
    const size_t open = t.find_first_not_of(" \t\r\n", colon + 1);
    if (open != std::string_view::npos && t[open] == '[') return true;
  }
  return false;
}

}  // namespace ditune::ingest_internal
