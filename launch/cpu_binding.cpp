// CPU thread defaults from the affinity mask.
#include "launch/cpu_binding.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>

namespace dlscale {

int affinity_cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

int default_cpu_threads(const Communicator& comm) {
  const int mine = affinity_cpu_count();
  const int node = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (mine < node) return mine;  // the launcher bound this rank: use what it gave
  return std::max(1, node / comm.local_size());
}

}  // namespace dlscale
