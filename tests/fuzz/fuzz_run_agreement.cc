// What the ranks of one run exchange before the first transfer (executor/rank_agreement.h),
// and the flags every rank of `calibrate comm` checks alike: any bytes, never a crash, and the
// verdict the same on every rank.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/catalog.h"
#include "executor/microbench.h"
#include "executor/rank_agreement.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // The input split at each '\x1f' into the texts of up to 16 ranks.
  std::vector<std::string> texts(1);
  for (char c : text) {
    if (c == '\x1f' && texts.size() < 16) {
      texts.emplace_back();
    } else {
      texts.back() += c;
    }
  }
  for (auto& t : texts) {
    if (t.size() > ditune::exec::kMaxIntentChars) t.resize(ditune::exec::kMaxIntentChars);
  }
  const ditune::Status first = ditune::exec::CompareIntents(texts, 1, ditune::Status::Ok());
  const ditune::Status again = ditune::exec::CompareIntents(texts, 2, ditune::Status::Ok());
  if (first.ok() != again.ok() || first.message() != again.message()) __builtin_trap();
  // An intent made of the input's fields encodes within the bound and agrees with itself.
  ditune::exec::RankIntent intent;
  intent.fields.emplace_back("--config", std::string(text.substr(0, 64)));
  intent.fields.emplace_back("--steps", std::string(text.substr(std::min<size_t>(size, 64))));
  const std::string encoded = ditune::exec::EncodeIntent(intent);
  if (encoded.size() > ditune::exec::kMaxIntentChars) __builtin_trap();
  if (!ditune::exec::CompareIntents({encoded, encoded, encoded}, 0, ditune::Status::Ok()).ok()) __builtin_trap();

  // calibrate comm's flags: the link and the iteration count as typed.
  static const ditune::Catalog* catalog = [] {
    auto c = ditune::Catalog::Load(DITUNE_FUZZ_DATA_DIR);
    return c.ok() ? new ditune::Catalog(std::move(*c)) : nullptr;
  }();
  if (catalog != nullptr && size >= 4) {
    uint32_t bits = 0;
    for (size_t i = 0; i < 4; ++i) bits = bits * 256u + data[i];
    int32_t iters = 0;
    std::memcpy(&iters, &bits, sizeof iters);  // any int, negative ones included
    const std::string link(text.substr(4, 32));
    for (bool device : {false, true}) {
      const ditune::Status st = ditune::exec::CheckCommSweepFlags(*catalog, link, iters, device, "fuzz");
      if (st.ok() && (iters < 1 || iters > ditune::exec::kMaxCommSweepIters)) __builtin_trap();
    }
  }
  return 0;
}
