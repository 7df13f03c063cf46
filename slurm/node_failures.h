// The nodes a job lost, read back from its log.txt: Slurm writes "srun:
// error: Node failure on NODE" when a node of a running step stops answering,
// cancels the job and requeues it; Open MPI writes "Peer host: NODE" when a
// rank's connection to that node broke (a node rebooted before Slurm noticed);
// dlscale writes "dlscale: lost ranks: rank R (NODE) silent for ..." when a
// rank's heartbeat stopped, whoever noticed first. Which ranks ran there comes from the rank
// table rank 0 logged at the start that failed. `dlscale jobs` and `fetch`
// show it, since the batch script that could have said so was cancelled.
#pragma once

#include <string>
#include <vector>

namespace dlscale {

struct NodeFailure {
  std::string node;
  std::vector<int> ranks;  // the ranks on `node` at the start that failed; empty when no rank table preceded it
};

std::vector<NodeFailure> node_failures(const std::string& log_text);

// dlscale's own lines naming lost ranks ("rank 1 (node2) silent for 31 s,
// ..."), without their "dlscale: lost ranks: " prefix, in log order.
std::vector<std::string> lost_rank_lines(const std::string& log_text);

// "node2 failed (ranks 2, 3)", several joined by "; ".
std::string describe(const std::vector<NodeFailure>& failures);

}  // namespace dlscale
