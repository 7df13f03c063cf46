// How many CPU threads a rank should use, from the CPUs it may run on and
// how many ranks share its node (a bad choice here costs peers 50×).
#pragma once

#include "runtime/parallel/communicator.h"

namespace dlscale {

// CPUs in this process's affinity mask; when the launcher did not bind
// (mask = whole node), the node's CPUs divided among its ranks.
int default_cpu_threads(const Communicator& comm);
int affinity_cpu_count();

}  // namespace dlscale
