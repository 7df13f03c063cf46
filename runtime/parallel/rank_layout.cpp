// Launcher variables → RankLayout, and the cross-check against MPI.
#include "runtime/parallel/rank_layout.h"

#include <charconv>
#include <cstdlib>
#include <initializer_list>

#include "runtime/core/error.h"

namespace dlscale {

namespace {

std::optional<int> to_count(const std::string& value) {
  int v = 0;
  const char* end = value.data() + value.size();
  auto [p, ec] = std::from_chars(value.data(), end, v);
  if (value.empty() || ec != std::errc() || p != end || v < 0) return std::nullopt;
  return v;
}

int parse_count(const std::string& name, const std::string& value) {
  auto v = to_count(value);
  if (!v) fail("launcher variable " + name + "='" + value + "' is not a whole number (0 or more)");
  return *v;
}

// The first of `names` that is set: its value, and its name in `from`.
std::optional<int> read_first(const EnvLookup& env, std::initializer_list<const char*> names, std::string& from) {
  for (const char* name : names) {
    if (auto value = env(name)) {
      from = name;
      return parse_count(name, *value);
    }
  }
  return std::nullopt;
}

int require_first(const EnvLookup& env, std::initializer_list<const char*> names, std::string& from,
                  const std::string& because) {
  if (auto v = read_first(env, names, from)) return *v;
  fail(because + ", but " + *names.begin() + " is not set; dlscale cannot tell this rank's place in the job");
}

// SLURM_TASKS_PER_NODE is "count[(xrepeat)],...", e.g. "4(x2),3" for nodes
// 0,1 with 4 tasks and node 2 with 3; returns the entry of node `node`.
int tasks_on_node(const std::string& name, const std::string& value, int node) {
  auto bad = [&](const std::string& why) -> int { fail("launcher variable " + name + "='" + value + "' " + why); };
  size_t pos = 0;
  int first_node = 0;
  while (pos <= value.size()) {
    size_t comma = value.find(',', pos);
    if (comma == std::string::npos) comma = value.size();
    const std::string entry = value.substr(pos, comma - pos);
    const size_t paren = entry.find('(');
    auto count = to_count(entry.substr(0, paren));
    std::optional<int> repeat = 1;
    if (paren != std::string::npos) {
      if (entry.size() < paren + 4 || entry.compare(paren, 2, "(x") != 0 || entry.back() != ')')
        return bad("is not of the form 4(x2),3");
      repeat = to_count(entry.substr(paren + 2, entry.size() - paren - 3));
    }
    if (!count || !repeat || *repeat == 0) return bad("is not of the form 4(x2),3");
    if (node < first_node + *repeat) return *count;
    first_node += *repeat;
    pos = comma + 1;
  }
  return bad("lists " + std::to_string(first_node) + " node(s), but this is node " + std::to_string(node));
}

void read_openmpi(const EnvLookup& env, RankLayout& l) {
  l.launcher = "openmpi";
  const std::string because = "OMPI_COMM_WORLD_RANK is set (started by mpirun)";
  l.rank = require_first(env, {"OMPI_COMM_WORLD_RANK"}, l.rank_from, because);
  l.size = require_first(env, {"OMPI_COMM_WORLD_SIZE"}, l.size_from, because);
  l.local_rank = read_first(env, {"OMPI_COMM_WORLD_LOCAL_RANK"}, l.local_rank_from).value_or(-1);
  l.local_size = read_first(env, {"OMPI_COMM_WORLD_LOCAL_SIZE"}, l.local_size_from).value_or(-1);
  // OMPI_COMM_WORLD_NODE_RANK is not the node's number: it is a per-node
  // process index (1 for the second rank on the first node), so Open MPI
  // leaves the node index unknown.
  l.node_id = -1;
}

// srun: SLURM_STEP_* describe this step; the job-wide SLURM_NTASKS and
// SLURM_TASKS_PER_NODE are the fallback for older Slurm releases.
void read_slurm(const EnvLookup& env, RankLayout& l) {
  l.launcher = "slurm";
  const std::string because = "srun started this task (SLURM_STEP_ID is set)";
  std::string node_from;
  l.rank = require_first(env, {"SLURM_PROCID"}, l.rank_from, because);
  l.size = require_first(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"}, l.size_from, because);
  l.local_rank = require_first(env, {"SLURM_LOCALID"}, l.local_rank_from, because);
  l.node_id = require_first(env, {"SLURM_NODEID"}, node_from, because);
  l.local_size = -1;
  for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    if (auto value = env(name)) {
      l.local_size = tasks_on_node(name, *value, l.node_id);
      l.local_size_from = std::string(name) + "[" + std::to_string(l.node_id) + "]";
      break;
    }
  }
}

void read_pmix(const EnvLookup& env, RankLayout& l) {
  l.launcher = "pmix";
  l.rank = require_first(env, {"PMIX_RANK"}, l.rank_from, "PMIX_RANK is set");
  l.size = l.local_rank = l.local_size = l.node_id = -1;  // PMIx keeps these in its server, not the environment
}

// dlscale started directly in an sbatch script or salloc shell: one process,
// whatever SLURM_NTASKS says. Worth one sentence, never an error.
std::string batch_shell_hint(const EnvLookup& env) {
  auto job = env("SLURM_JOB_ID");
  auto ntasks = env("SLURM_NTASKS");
  if (!job || !ntasks) return "";
  auto n = to_count(*ntasks);
  if (!n || *n <= 1) return "";
  return "dlscale runs as one process in the batch shell of Slurm job " + *job + ", which has SLURM_NTASKS=" + *ntasks +
         " tasks; start it with srun (or mpirun) to use them";
}

std::string shown(const std::string& from, int value) {
  return from.empty() ? "(default " + std::to_string(value) + ")" : from + "=" + std::to_string(value);
}

void check_consistent(const RankLayout& l) {
  if (l.size == 0) fail("launcher variable " + l.size_from + "=0: a job has at least one rank");
  if (l.size > 0 && l.rank >= l.size)
    fail("launcher variables disagree: " + shown(l.rank_from, l.rank) + " is not below " + shown(l.size_from, l.size));
  if (l.local_size == 0) fail("launcher variable " + l.local_size_from + "=0: this node runs this rank");
  if (l.local_size > 0 && l.local_rank >= l.local_size)
    fail("launcher variables disagree: " + shown(l.local_rank_from, l.local_rank) + " is not below " +
         shown(l.local_size_from, l.local_size));
}

}  // namespace

EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (!value) return std::nullopt;
    return std::string(value);
  };
}

RankLayout detect_layout(const EnvLookup& env) {
  RankLayout l;
  l.visible_devices = env("CUDA_VISIBLE_DEVICES").value_or("");
  if (env("OMPI_COMM_WORLD_RANK")) {
    read_openmpi(env, l);
  } else if (env("SLURM_STEP_ID") || env("SLURM_STEPID")) {
    read_slurm(env, l);
  } else if (env("PMIX_RANK")) {
    read_pmix(env, l);
  } else {
    l.launcher = "none";
    l.hint = batch_shell_hint(env);
  }
  check_consistent(l);
  return l;
}

std::string check_layout(const RankLayout& from_env, int mpi_rank, int mpi_size, int mpi_local_rank,
                         int mpi_local_size) {
  const std::string advice =
      "; dlscale uses MPI's values (check how the job was started, e.g. srun --mpi=pmix or mpirun)";
  if (from_env.launcher == "none") {
    if (mpi_size == 1) return "";
    return "dlscale found no launcher variables (Open MPI, Slurm or PMIx) and expected one process, but MPI reports "
           "rank " +
           std::to_string(mpi_rank) + " of " + std::to_string(mpi_size) + " (local rank " +
           std::to_string(mpi_local_rank) + " of " + std::to_string(mpi_local_size) + ")" + advice;
  }
  std::string differences;
  auto compare = [&](int value, const std::string& from, int mpi, const char* what) {
    if (value < 0 || value == mpi) return;
    differences +=
        (differences.empty() ? "" : "; ") + shown(from, value) + " but MPI " + what + " " + std::to_string(mpi);
  };
  compare(from_env.rank, from_env.rank_from, mpi_rank, "rank");
  compare(from_env.size, from_env.size_from, mpi_size, "size");
  compare(from_env.local_rank, from_env.local_rank_from, mpi_local_rank, "local rank");
  compare(from_env.local_size, from_env.local_size_from, mpi_local_size, "local size");
  if (differences.empty()) return "";
  return "the " + from_env.launcher + " launcher variables disagree with MPI: " + differences + advice;
}

std::string split_launch_error(const RankLayout& from_env, int mpi_size) {
  if (from_env.size <= 0 || mpi_size >= from_env.size) return "";
  const bool slurm = from_env.launcher == "slurm";
  const std::string what = slurm ? " tasks" : " ranks";
  const std::string head = (slurm ? "srun" : "mpirun") + std::string(" started ") + std::to_string(from_env.size) +
                           what + " (" + shown(from_env.size_from, from_env.size) + "), but MPI_COMM_WORLD has " +
                           std::to_string(mpi_size) + (mpi_size == 1 ? " rank" : " ranks") + ": " +
                           (mpi_size == 1 ? "each task started its own one-rank MPI job"
                                          : "the tasks started as several smaller MPI jobs") +
                           ", so several tasks would act as rank 0 and write the same run folder; ";
  if (slurm)
    return head +
           "srun's --mpi plugin does not match this MPI library: start the job with srun --mpi=pmix (Open MPI; "
           "srun --mpi=list shows the plugins) or with mpirun inside the allocation";
  return head + "that mpirun belongs to another MPI library than this dlscale: start the job with the mpirun of the "
                "MPI library dlscale was built with, or with srun --mpi=pmix";
}

}  // namespace dlscale
