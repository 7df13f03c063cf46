// sbatch, squeue and scancel (see slurm_client.h).
#include "slurm/slurm_client.h"

#include <sstream>

#include "runtime/core/error.h"
#include "slurm/process.h"

namespace dlscale {

namespace {

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string not_found_hint(const ProgramResult& r, const std::string& program) {
  if (r.exit_code == 127) return program + " is not installed or not in PATH: is this a Slurm login node?";
  return trimmed(r.err.empty() ? r.out : r.err);
}

}  // namespace

std::string sbatch_submit(const std::string& script) {
  ProgramResult r = run_program({"sbatch", "--parsable", script});
  if (r.exit_code != 0) fail("sbatch did not accept the job: " + not_found_hint(r, "sbatch"));
  // --parsable prints "id" or "id;cluster".
  std::string id = trimmed(r.out);
  id = id.substr(0, id.find(';'));
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    fail("sbatch printed no job id (output: '" + trimmed(r.out) + "')");
  return id;
}

SlurmView query_slurm() {
  SlurmView view;
  // One line per array task, finished jobs the controller still keeps too; this user's only.
  ProgramResult r = run_program({"squeue", "--noheader", "--me", "--array", "--states=all", "--format=%i|%T"});
  if (r.exit_code != 0) {
    view.error = not_found_hint(r, "squeue");
    return view;
  }
  view.reachable = true;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    auto bar = line.find('|');
    if (bar == std::string::npos) continue;
    view.states[trimmed(line.substr(0, bar))] = trimmed(line.substr(bar + 1));
  }
  return view;
}

void scancel(const std::string& id) {
  ProgramResult r = run_program({"scancel", id});
  if (r.exit_code != 0) fail("scancel " + id + " failed: " + not_found_hint(r, "scancel"));
}

}  // namespace dlscale
