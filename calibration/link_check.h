// Whether measured collectives (nccl-tests outputs) are what their link should give, and the
// likely cause where they fall far short: a store fitted on a run with NCCL's P2P turned off
// would make every later plan on that link slower without a word.
#ifndef DITUNE_CALIBRATION_LINK_CHECK_H_
#define DITUNE_CALIBRATION_LINK_CHECK_H_

#include <string>
#include <vector>

#include "core/catalog.h"
#include "costmodels/measurement.h"

namespace ditune {

// One (link, collective, ranks) whose largest measured message moved at a small fraction of
// the link's catalog figure (its achieved bus bandwidth; send/recv: its point-to-point rate).
struct LinkShortfall {
  std::string link;
  std::string collective;
  int ranks = 0;
  double measured_gbps = 0;  // bus bandwidth, GB/s, nccl-tests' convention
  double expected_gbps = 0;
  std::vector<std::string> causes;  // the likely causes for this kind of link, most likely first
};

// The fraction of the catalog figure below which a measurement is called a shortfall: a
// healthy link reaches a quarter of its figure by 64 MiB (2 H100s' all_reduce over NVLink:
// 97 GB/s of 370), while the published failures are a few percent of it (a DGX A100's
// all_reduce with NCCL_P2P_DISABLE=1: 5.2 against 222 GB/s; a DGX H100's: 23 against 370;
// 4 RTX 4090s' all_to_all with P2P forced across CPUs: 2 against 18, NVIDIA/nccl #1603).
inline constexpr double kLinkShortfallFraction = 0.2;
// The smallest message judged (64 MiB): below it a healthy link's time is mostly latency.
inline constexpr double kLinkCheckMinBytes = 64.0 * 1024 * 1024;

// The shortfalls among `measurements` (collective kind with a catalog link; others are not
// judged). Each (link, collective, ranks) is judged by its largest message.
std::vector<LinkShortfall> FindLinkShortfalls(const std::vector<Measurement>& measurements, const Catalog& catalog,
                                              double fraction = kLinkShortfallFraction);

// "all_to_all over nvlink4 (8 ranks): 9.0 GB/s bus bandwidth, 2% of the link's 370 GB/s;
// likely: ..." — one paragraph for a person.
std::string LinkShortfallText(const LinkShortfall& shortfall);

}  // namespace ditune

#endif  // DITUNE_CALIBRATION_LINK_CHECK_H_
