// A timed exchange between rank 0 and one rank of every other host, each
// direction on its own, so that a slow link can be named
// (runtime/monitoring/link_stragglers.h). A ring or tree all-reduce makes
// every rank wait for the slowest link alike, so the all-reduce's own times
// cannot say whose link it is; a probe between two hosts can.
//
// For each other host in turn (its first rank p): rank 0 sends p one byte
// ("go"), p times `bytes` to rank 0 and rank 0's one-byte answer (p's
// upload), then rank 0 times `bytes` to p and p's answer (p's download).
// One host at a time, so no probe shares rank 0's link with another. Cost
// per call: 2 × (hosts − 1) round trips of `bytes`; telemetry calls it once
// per line (at most once a second, every 5 s by default).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "runtime/parallel/communicator.h"

namespace dlscale {

struct LinkTimes {
  int rank = 0;             // the probed rank (its host's first rank), of comm
  std::string host;
  double upload_s = 0;      // `bytes` from it to rank 0, and a one-byte answer
  double download_s = 0;    // `bytes` from rank 0 to it, and a one-byte answer
};

// Collective over comm, under its watchdog. hosts[r]: comm rank r's host.
// On rank 0: one entry per host other than rank 0's, in rank order; empty
// elsewhere, and when every rank shares rank 0's host.
std::vector<LinkTimes> probe_links(Communicator& comm, const std::vector<std::string>& hosts, std::size_t bytes);

}  // namespace dlscale
