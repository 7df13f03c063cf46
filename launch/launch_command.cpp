// dlscale launch -n N -- COMMAND...: starts N local ranks of dlscale through
// mpirun with a binding that gives each rank its share of the cores.
#include <unistd.h>

#include <iostream>

#include "launch/commands.h"
#include "launch/cpu_binding.h"

namespace dlscale {

namespace {

const char* kUsage =
    "usage: dlscale launch -n N [--dry-run] -- <dlscale command and options>\n"
    "  e.g. dlscale launch -n 2 -- train examples/fashion-mnist/cnn.ini\n"
    "Starts N ranks on this machine through mpirun; inside srun or mpirun, run dlscale directly instead.\n";

std::string self_path() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) fail("cannot find the dlscale executable (/proc/self/exe)");
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace

std::vector<std::string> mpirun_command(int ranks, int cpus, bool as_root, const std::string& binary,
                                        const Args& command) {
  std::vector<std::string> argv = {"mpirun", "-n", std::to_string(ranks)};
  if (as_root) argv.push_back("--allow-run-as-root");
  if (ranks <= cpus) {
    // Each rank bound to cpus/ranks cores of its own: threads default to them.
    argv.insert(argv.end(), {"--map-by", "slot:PE=" + std::to_string(cpus / ranks), "--bind-to", "core"});
  } else {
    // More ranks than cores: no binding, and yield when idle instead of spinning.
    argv.insert(argv.end(), {"--oversubscribe", "--bind-to", "none", "--mca", "mpi_yield_when_idle", "1"});
  }
  argv.push_back(binary);
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

int launch_command(const Args& args) {
  int ranks = 0;
  bool dry_run = false;
  std::size_t i = 0;
  for (; i < args.size() && args[i] != "--"; ++i) {
    if ((args[i] == "-n" || args[i] == "--ranks") && i + 1 < args.size()) {
      try {
        ranks = std::stoi(args[++i]);
      } catch (const std::exception&) {
        throw UsageError("launch: -n needs a number of ranks, got '" + args[i] + "'");
      }
    } else if (args[i] == "--dry-run") {
      dry_run = true;
    } else if (args[i] == "--help" || args[i] == "-h") {
      std::cout << kUsage;
      return 0;
    } else {
      throw UsageError(std::string("launch: unknown option '") + args[i] + "'\n" + kUsage);
    }
  }
  if (ranks < 1) throw UsageError(std::string("launch: give the number of ranks with -n N\n") + kUsage);
  if (i + 1 >= args.size()) throw UsageError(std::string("launch: give the dlscale command after --\n") + kUsage);
  Args command(args.begin() + static_cast<long>(i) + 1, args.end());
  auto argv = mpirun_command(ranks, affinity_cpu_count(), geteuid() == 0, self_path(), command);
  if (dry_run) {
    for (const auto& a : argv) std::cout << a << (&a == &argv.back() ? "\n" : " ");
    return 0;
  }
  std::vector<char*> c_argv;
  for (auto& a : argv) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  execvp("mpirun", c_argv.data());
  fail("cannot start mpirun: is Open MPI installed (openmpi-bin)?");
}

}  // namespace dlscale
