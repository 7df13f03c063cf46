// dlscale info: what this build contains and what each rank sees.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "dlscale/config.h"
#include "launch/commands.h"
#include "launch/cpu_binding.h"
#include "runtime/core/gpu.h"

namespace dlscale {

int info_command(const Args&, Communicator& comm) {
  GpuInfo gpu = query_gpus();
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  char line[512];
  std::snprintf(line, sizeof line, "%4d  %-20s %3d CPUs  %d GPU(s)%s%s", comm.rank(), host, affinity_cpu_count(),
                gpu.device_count, gpu.device_count ? "" : ": ", gpu.device_count ? "" : gpu.reason.c_str());
  auto rows = comm.allgather(line);
  if (comm.rank() != 0) return 0;
  std::cout << "dlscale " << DLSCALE_VERSION << ", CUDA backend " << (gpu.compiled ? "compiled" : "not compiled")
            << (gpu.libraries.empty() ? "" : " (" + gpu.libraries + ")") << "\n"
            << comm.size() << " rank(s):\n";
  for (const auto& row : rows) std::cout << row << "\n";
  return 0;
}

}  // namespace dlscale
