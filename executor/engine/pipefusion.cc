#include <fmt/format.h>

#include <algorithm>

#include "executor/engine/engine_impl.h"

namespace ditune::exec {

Status DitEngine::Impl::Handoff(const Residual& st, int64_t b, int64_t nt, int64_t ni, bool send,
                                int slot) {
  struct Part {
    void* data;
    int64_t rows, cols;
  };
  std::vector<Part> parts;
  if (unified) {
    parts.push_back({st.seq != nullptr ? st.seq : st.img, b * (nt + ni), H});
  } else {
    if (nt > 0) parts.push_back({st.txt, b * nt, Ht});
    parts.push_back({st.img, b * ni, H});
  }
  if (!send) {
    for (const Part& part : parts) {
      DITUNE_ASSIGN_OR_RETURN(
          auto r, pp_fwd->Irecv(part.data, part.rows * part.cols, stage - 1, kTagActivation));
      DITUNE_RETURN_IF_ERROR(r->Wait());
    }
    return Status::Ok();
  }
  DITUNE_RETURN_IF_ERROR(Settle(&fwd_pending, slot));
  if (parts.size() > static_cast<size_t>(kHandoffParts)) {
    return Status::Internal(
        fmt::format("a hand-off of {} parts (at most {})", parts.size(), kHandoffParts));
  }
  auto group = std::make_unique<RequestGroup>();
  for (size_t i = 0; i < parts.size(); ++i) {
    const Part& part = parts[i];
    DITUNE_ASSIGN_OR_RETURN(void* buf,
                            Scratch(Buf::kHandoff, slot * kHandoffParts + static_cast<int>(i),
                                    part.rows * part.cols * eb));
    DITUNE_RETURN_IF_ERROR(k->Copy(buf, part.cols, part.data, part.cols, part.rows, part.cols));
    DITUNE_ASSIGN_OR_RETURN(auto r,
                            pp_fwd->Isend(buf, part.rows * part.cols, stage + 1, kTagActivation));
    group->Add(std::move(r));
  }
  fwd_pending[static_cast<size_t>(slot)] = std::move(group);
  return Status::Ok();
}

Status DitEngine::Impl::Settle(std::vector<std::unique_ptr<Request>>* pending, int slot) {
  for (size_t i = 0; i < pending->size(); ++i) {
    auto& r = (*pending)[i];
    if (r == nullptr || (slot >= 0 && i != static_cast<size_t>(slot))) continue;
    DITUNE_RETURN_IF_ERROR(r->Wait());
    r.reset();
  }
  return Status::Ok();
}

}  // namespace ditune::exec
