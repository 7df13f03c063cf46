#include "slurm/node_failures.h"

#include <map>
#include <set>
#include <regex>
#include <sstream>

namespace dlscale {

std::vector<NodeFailure> node_failures(const std::string& log_text) {
  // The rank table (runtime/parallel/job_setup): a header "rank host local ..."
  // and one line per rank; a requeued start logs a new one.
  static const std::regex header(R"(^\s*rank\s+host\s+local\b.*)");
  static const std::regex rank_line(R"(^\s*(\d+)\s+(\S+)\s+\d+\s.*)");
  // Slurm's verdict, or Open MPI's lost TCP connection to a peer's host (a
  // node that rebooted before Slurm noticed, a rank killed with its node).
  static const std::regex failure(R"((?:Node failure on|Peer host:)\s+(\S+))");
  // dlscale's own line, whichever detector ends the job (runtime/parallel/lost_ranks.h):
  // "dlscale: lost ranks: rank 1 (node2) silent for 31 s, ...; ranks 2, 3 (node3) silent ...".
  static const std::regex lost_line(R"(^dlscale: lost ranks: )");
  static const std::regex silent_host(R"(\(([^()\s]+)\) silent for)");
  std::vector<NodeFailure> found;
  std::multimap<std::string, int> ranks_on;  // host -> rank, of the latest table
  std::set<std::string> reported;            // nodes reported since that table (srun and steps may both say it)
  bool in_table = false;
  std::istringstream in(log_text);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, header)) {
      ranks_on.clear();
      reported.clear();
      in_table = true;
      continue;
    }
    if (in_table && std::regex_match(line, m, rank_line)) {
      ranks_on.emplace(m[2].str(), std::stoi(m[1].str()));
      continue;
    }
    in_table = false;
    std::vector<std::string> nodes;
    if (std::regex_search(line, lost_line)) {
      for (std::sregex_iterator it(line.begin(), line.end(), silent_host), end; it != end; ++it)
        nodes.push_back((*it)[1].str());
    } else if (std::regex_search(line, m, failure)) {
      nodes.push_back(m[1].str());
    }
    for (const auto& node : nodes) {
      NodeFailure f{node, {}};
      if (!reported.insert(f.node).second) continue;
      auto [first, last] = ranks_on.equal_range(f.node);
      for (auto it = first; it != last; ++it) f.ranks.push_back(it->second);
      found.push_back(std::move(f));
    }
  }
  return found;
}

std::vector<std::string> lost_rank_lines(const std::string& log_text) {
  static const std::string prefix = "dlscale: lost ranks: ";
  std::vector<std::string> lines;
  std::istringstream in(log_text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) lines.push_back(line.substr(prefix.size()));
  return lines;
}

std::string describe(const std::vector<NodeFailure>& failures) {
  std::ostringstream out;
  for (std::size_t i = 0; i < failures.size(); ++i) {
    const auto& f = failures[i];
    out << (i ? "; " : "") << f.node << " failed";
    if (!f.ranks.empty()) {
      out << (f.ranks.size() == 1 ? " (rank " : " (ranks ");
      for (std::size_t r = 0; r < f.ranks.size(); ++r) out << (r ? ", " : "") << f.ranks[r];
      out << ")";
    }
  }
  return out.str();
}

}  // namespace dlscale
