// Writes a job's script (see job_script.h). The script is also the record of
// what ran, so it is meant to be read: one directive or command per line.
#include "slurm/job_script.h"

#include <algorithm>

#include <filesystem>
#include <map>
#include <regex>
#include <sstream>

#include "runtime/training/preemption.h"
#include "slurm/quoting.h"

namespace dlscale {

namespace {

// "--constraint=a100", "--mail-type END" or "--exclusive" as an #SBATCH line
// whose value is quoted for sbatch's directive parser.
std::string sbatch_option_line(const std::string& option) {
  require_printable(option, "sbatch option '" + option + "'");
  static const std::regex form(R"((-{1,2}[A-Za-z][A-Za-z0-9-]*)(?:[= ]\s*(.*))?)");
  std::smatch m;
  if (!std::regex_match(option, m, form))
    throw UsageError("sbatch option '" + option + "': expected --name=value, --name value or --name");
  std::string line = "#SBATCH " + m[1].str();
  if (m[2].matched) {
    line += m[1].length() == 2 ? ' ' : '=';  // -N 2, --nodes=2
    line += sbatch_quote(m[2].str());
  }
  return line + "\n";
}

void check_values(const ScriptSpec& s) {
  const Profile& p = s.profile;
  require_printable(s.job_name, "the job name");
  require_printable(s.job_dir, "the job folder");
  require_printable(s.submit_dir, "the working folder");
  require_printable(s.dlscale, "the dlscale path");
  require_printable(s.checkpoint_root, "checkpoint-path " + s.checkpoint_root);
  for (const auto* v : {&p.partition, &p.account, &p.qos, &p.time, &p.gpu_bind, &p.mpi, &p.name})
    require_printable(*v, "profile " + p.name + " value '" + *v + "'");
  for (const auto& m : p.modules) require_printable(m, "module " + m);
  for (const auto* args : {&s.checkpoint_defaults, &s.train_args})
    for (const auto& a : *args) require_printable(a, "train option '" + a + "'");
  for (const auto& d : s.staged) require_printable(d.source, d.option + " " + d.source);
  if (!p.is_slurm() && !s.staged.empty())
    throw UsageError("data staging needs a slurm profile (" + p.name + " runs on this machine, where data is local already)");
  if (!p.is_slurm() && p.nodes != 1)
    throw UsageError("profile " + p.name + " runs on this machine: it has one node, not " + std::to_string(p.nodes));
}

void sbatch_directives(std::ostream& out, const ScriptSpec& s) {
  const Profile& p = s.profile;
  out << "#SBATCH --job-name=" << sbatch_quote(s.job_name) << "\n";
  if (s.array_size > 0) {
    out << "#SBATCH --array=0-" << s.array_size - 1;
    if (s.array_parallel > 0) out << "%" << s.array_parallel;
    out << "\n#SBATCH --output=" << sbatch_quote(slurm_filename(s.job_dir) + "/trials/%a/log.txt") << "\n";
  } else {
    out << "#SBATCH --output=" << sbatch_quote(slurm_filename(s.job_dir) + "/log.txt") << "\n";
  }
  out << "#SBATCH --nodes=" << p.node_count() << "\n";
  if (p.min_nodes > 0) {
    // A node range with --ntasks-per-node makes sbatch fix the task count at
    // MIN x tasks, and Slurm then always allocates MIN nodes. So a range asks
    // per node for the CPUs (and GPUs) of its tasks instead: Slurm allocates
    // as many nodes of the range as are free, and srun starts the tasks per
    // node on however many it got (train_line).
    out << "#SBATCH --mincpus=" << p.tasks_per_node * std::max(p.cpus_per_task, 1) << "\n";
    if (p.gpus_per_task) out << "#SBATCH --gpus-per-node=" << p.tasks_per_node * p.gpus_per_task << "\n";
  } else {
    out << "#SBATCH --ntasks-per-node=" << p.tasks_per_node << "\n";
    if (p.cpus_per_task) out << "#SBATCH --cpus-per-task=" << p.cpus_per_task << "\n";
    if (p.gpus_per_task) out << "#SBATCH --gpus-per-task=" << p.gpus_per_task << "\n";
  }
  if (p.gpus_per_node) out << "#SBATCH --gpus-per-node=" << p.gpus_per_node << "\n";
  const std::pair<const char*, const std::string*> named[] = {
      {"partition", &p.partition}, {"account", &p.account}, {"qos", &p.qos}, {"time", &p.time}};
  for (const auto& [option, value] : named)
    if (!value->empty()) out << "#SBATCH --" << option << "=" << sbatch_quote(*value) << "\n";
  // Preemption (before the profile's own options, which win when they repeat
  // one): USR1 goes to the ranks, not B: to this script, and the script
  // requeues the job; log.txt is appended to by every start.
  out << "#SBATCH --requeue\n#SBATCH --open-mode=append\n";
  if (p.signal_lead > 0) out << "#SBATCH --signal=USR1@" << p.signal_lead << "\n";
  for (const auto& o : p.sbatch_options) out << sbatch_option_line(o);
}

// The checkpoint folder of this task and no other (see job_script.h).
void checkpoint_folder(std::ostream& out, const ScriptSpec& s) {
  if (s.checkpoint_root.empty()) {
    out << "# This task's own checkpoint folder: no other job or trial writes or resumes from it.\n"
           "checkpoints=$task_dir/run/checkpoints\n";
    return;
  }
  out << "# The config's checkpoint-path may be shared by other jobs and trials: this task\n"
         "# keeps its checkpoints in a folder of its own there, and resumes from that alone.\n"
      << "checkpoints=" << shell_quote(s.checkpoint_root) << "/"
      << shell_quote(std::filesystem::path(s.job_dir).filename().string());
  if (s.array_size > 0) out << (s.profile.is_slurm() ? "/trials/$SLURM_ARRAY_TASK_ID" : "/trials/$1");
  out << "\n";
}

// The end of data staging, run by the EXIT trap (defined before the trap, so
// that an early exit finds it): HUP to the keepers' step (see staging()) so
// that each removes its node's copy now, and their last lines in the log.
// Not TERM: Slurm reports a step sent TERM as cancelled, in the log of a job
// that went well.
void stage_keeper_stop(std::ostream& out) {
  out << "# Data staging (below) starts a keeper on each node, which removes that node's copy when\n"
         "# the job ends; when this script ends, however it ends, the keepers are told at once.\n"
         "keeper_step=\n"
         "stop_stage_keepers() {\n"
         "  [ -n \"$keeper_step\" ] || return 0\n"
         "  scancel --signal=HUP \"$keeper_step\" 2>/dev/null || return 0\n"
         "  while read -r -t 60 -u \"$keepers\" line; do echo \"$line\"; done\n"
         "}\n";
}

// The folder of this task and the records dlscale jobs reads.
void prologue(std::ostream& out, const ScriptSpec& s) {
  out << "set -euo pipefail\n\n";
  out << "job_dir=" << shell_quote(s.job_dir) << "\n";
  if (s.array_size == 0)
    out << "task_dir=$job_dir\n";
  else if (s.profile.is_slurm())
    out << "task_dir=$job_dir/trials/$SLURM_ARRAY_TASK_ID\n";
  else
    out << "task_dir=$job_dir/trials/${1:?usage: job.sh TASK-INDEX}\n";
  checkpoint_folder(out, s);
  if (!s.profile.is_slurm()) out << "exec >>\"$task_dir/log.txt\" 2>&1\n";
  if (!s.staged.empty()) stage_keeper_stop(out);
  out << "# dlscale jobs reads how the job ended from exit-status (sacct needs accounting storage).\n"
         "trap 'status=$?; "
      << (s.staged.empty() ? "" : "stop_stage_keepers || true; ")
      << "echo \"$status\" >\"$task_dir/exit-status.tmp\"; "
         "mv -f \"$task_dir/exit-status.tmp\" \"$task_dir/exit-status\"' EXIT\n"
         "# A cancel or the time limit sends TERM: leave through the EXIT trap.\n"
         "trap 'exit 143' TERM\n";
  if (s.profile.is_slurm())
    out << "# USR1 (--signal, scancel --signal=USR1) is for the ranks, which stop at a checkpoint: carry on.\n"
           "trap : USR1\n"
           "# A requeued job starts here again: the previous start's exit status and preemption\n"
           "# marker are history (the marker is what requeues the job, see the end).\n"
           "rm -f \"$task_dir/exit-status\" \"$task_dir/run/" << kPreemptedMarker << "\" \"$task_dir/run/"
        << kLostRankMarker << "\" \"$task_dir/run/" << kLostHostsFile << "\"\n"
           "[ -z \"${SLURM_RESTART_COUNT:-}\" ] || echo \"dlscale: started again after a requeue "
           "(restart $SLURM_RESTART_COUNT)\"\n";
  out << "date -u +%Y-%m-%dT%H:%M:%SZ >\"$task_dir/started\"\n\n";
  out << "cd " << shell_quote(s.submit_dir) << "\n";
  if (!s.profile.modules.empty()) {
    out << "module load";
    for (const auto& m : s.profile.modules) out << " " << shell_quote(m);
    out << "\n";
  }
  if (s.profile.is_slurm())
    out << "# A requeue after the training finished (model.h5 is written last) has nothing left to do.\n"
           "if [ -e \"$task_dir/run/model.h5\" ]; then\n"
           "  echo \"dlscale: $task_dir/run has finished already\"\n"
           "  exit 0\n"
           "fi\n";
}

// Copies each dataset folder once per node, verified (`dlscale stage`);
// returns the train options that point at the copies. The keeper step is
// what removes them on every node however the job ends: after scancel, the
// time limit or a requeue no new srun can start, but Slurm sends TERM to
// every running step first (and KILL only KillWait seconds later).
std::vector<std::string> staging(std::ostream& out, const ScriptSpec& s) {
  std::vector<std::string> options;
  if (s.staged.empty()) return options;
  const std::string root = s.profile.stage_dir.empty() ? "${SLURM_TMPDIR:-/tmp}"
                                                        : shell_path_expression(s.profile.stage_dir, "stage-dir");
  const std::string dlscale = shell_quote(s.dlscale);
  out << "\n# Datasets go to node-local storage first, one verified copy per node, before any rank starts.\n"
      << "stage=" << root << "/dlscale-$SLURM_JOB_ID\n"
      << "per_node=(srun --nodes=\"$SLURM_JOB_NUM_NODES\" --ntasks=\"$SLURM_JOB_NUM_NODES\" --ntasks-per-node=1)\n"
      << "# The keepers, in place on every node before anything is copied, run beside the other steps\n"
         "# (--overlap) until HUP from stop_stage_keepers, or TERM from Slurm at scancel, the time\n"
         "# limit or a requeue, when no new srun could remove anything. Each says \"STEP message\" when ready.\n"
      << "exec {keepers}< <(exec \"${per_node[@]}\" --overlap " << dlscale << " stage --keep \"$stage\")\n"
      << "for ((node = 0; node < SLURM_JOB_NUM_NODES; node++)); do\n"
         "  read -r -t 300 -u \"$keepers\" step line ||\n"
         "    { echo \"dlscale: a stage keeper did not start on every node (srun --overlap needs Slurm 20.11+)\" >&2; exit 1; }\n"
         "  keeper_step=$step\n"
         "  echo \"$line\"\n"
         "done\n";
  std::map<std::string, std::string> copies;  // source folder -> its copy, so a folder used twice is copied once
  for (const auto& d : s.staged) {
    auto [it, fresh] = copies.emplace(d.source, "\"$stage/" + d.option + "\"");
    if (fresh)
      out << "\"${per_node[@]}\" --kill-on-bad-exit=1 " << dlscale << " stage " << shell_quote(d.source) << " "
          << it->second << "\n";
    options.push_back("--" + d.option + " " + it->second);
  }
  // The ranks refuse a folder there that `dlscale stage` did not verify.
  options.push_back("--staged-data true");
  return options;
}

// srun runs in the background so the script can end it when it waits for
// nothing: the ranks that lost a peer leave run/lost-rank and end, but srun
// can wait without end for the step on a node that was restarted faster
// than Slurm's node timeout (its new slurmd never had the step, so the step
// never ends), and the requeue after it would never run. Seen in 1 of 3
// cluster runs. After DLSCALE_LOST_RANK_GRACE seconds (default 60) with the
// marker present, TERM, then KILL 10 s later, end srun. A TERM to the script
// (a cancel, the time limit) still waits for srun, as it did with srun in
// the foreground: the ranks stop at a checkpoint first.
void end_srun_after_lost_rank(std::ostream& out) {
  const std::string lost = std::string("\"$task_dir/run/") + kLostRankMarker + "\"";
  out << " &\n"
         "srun_pid=$!\n"
         "# srun can wait without end for a step on a node restarted faster than Slurm noticed;\n"
         "# once the ranks have left run/" << kLostRankMarker << ", give it a grace period, then end it.\n"
         "# A TERM meanwhile waits for srun (the ranks stop at a checkpoint), then leaves.\n"
         "term_seen= lost_seen=\n"
         "trap 'term_seen=1' TERM\n"
         "while kill -0 \"$srun_pid\" 2>/dev/null; do\n"
         "  if [ -z \"$lost_seen\" ] && [ -e " << lost << " ]; then lost_seen=$SECONDS; fi\n"
         "  if [ -n \"$lost_seen\" ] && [ $(( SECONDS - lost_seen )) -ge \"${DLSCALE_LOST_RANK_GRACE:-60}\" ]; then\n"
         "    echo \"dlscale: srun still runs $(( SECONDS - lost_seen )) s after run/" << kLostRankMarker
      << " appeared; ending it\" >&2\n"
         "    kill -TERM \"$srun_pid\" 2>/dev/null || true\n"
         "    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 \"$srun_pid\" 2>/dev/null || break; sleep 1; done\n"
         "    kill -KILL \"$srun_pid\" 2>/dev/null || true\n"
         "    break\n"
         "  fi\n"
         "  sleep 1\n"
         "done\n"
         "wait \"$srun_pid\" || status=$?\n"
         "trap 'exit 143' TERM\n"
         "[ -z \"$term_seen\" ] || exit 143\n";
}

void train_line(std::ostream& out, const ScriptSpec& s, const std::vector<std::string>& staged_options) {
  const Profile& p = s.profile;
  out << "\n";
  if (!p.is_slurm()) {
    out << shell_quote(s.dlscale);
    if (p.tasks_per_node > 1) out << " launch -n " << p.tasks_per_node << " --";
  } else {
    if (p.mpi.rfind("pmix", 0) == 0) {
      if (p.pmix_fence == "ring")
        out << "# Slurm's ring fence, whatever the submitting shell had: its tree fence (also the\n"
               "# default's barrier) spans only the local node when TreeWidth exceeds the step's node\n"
               "# count (Slurm 22.05), so MPI_Init would not wait for the other nodes and their first\n"
               "# message can crash a rank still inside it. The profile's pmix-fence changes it.\n";
      else
        out << "# The profile's pmix-fence.\n";
      out << "export SLURM_PMIX_FENCE=" << p.pmix_fence << "\n";
    }
    // --kill-on-bad-exit: a rank that dies (a crash, the OOM killer) ends every
    // other rank at once, instead of leaving them in a collective until a timeout.
    out << "srun --mpi=" << shell_quote(p.mpi) << " --kill-on-bad-exit=1";
    if (p.min_nodes > 0) out << " --ntasks-per-node=" << p.tasks_per_node;
    if (p.cpus_per_task) out << " --cpus-per-task=" << p.cpus_per_task;
    if (p.gpus_per_task) {
      out << " --gpus-per-task=" << p.gpus_per_task << " --gpu-bind="
          << (p.gpu_bind.empty() ? "per_task:" + std::to_string(p.gpus_per_task) : shell_quote(p.gpu_bind));
    } else if (p.gpus_per_node) {
      out << " --gpu-bind=" << (p.gpu_bind.empty() ? "none" : shell_quote(p.gpu_bind));
    }
    out << " " << shell_quote(s.dlscale);
  }
  out << " train \"$task_dir/config.ini\" --output \"$task_dir/run\" --checkpoint-path \"$checkpoints\"";
  // A fresh start finds no checkpoint and starts from the beginning.
  if (p.is_slurm()) out << " --resume auto";
  for (const auto& a : s.checkpoint_defaults) out << " " << shell_quote(a);
  for (const auto& o : staged_options) out << " " << o;
  for (const auto& a : s.train_args) out << " " << shell_quote(a);
  if (p.is_slurm())
    end_srun_after_lost_rank(out);
  else
    out << "\n";
}

// How often a job requeues itself because ranks stopped answering (RUN/lost-rank).
constexpr int kLostRankRequeues = 3;

// RUN/preempted (kPreemptedMarker), left by rank 0 after the checkpoint it
// stopped at, and not srun's exit code: that is the highest task code or
// 128+signal, so "stopped at a checkpoint" cannot be read from it, and an
// error exit never requeues.
void requeue_when_preempted(std::ostream& out) {
  const std::string marker = std::string("\"$task_dir/run/") + kPreemptedMarker + "\"";
  const std::string lost = std::string("\"$task_dir/run/") + kLostRankMarker + "\"";
  out << "# Rank 0 leaves run/" << kPreemptedMarker << " once the checkpoint it stopped at is written (USR1 or\n"
         "# TERM to the ranks): the job requeues itself and its next start resumes (--resume auto).\n"
         "# srun's exit code cannot tell this (the highest task code or 128+signal); without the\n"
         "# marker nothing is requeued. The requeue's TERM is not an error.\n"
         "if [ -e " << marker << " ]; then\n"
         "  trap '' TERM\n"
         "  status=" << kPreemptedExitCode << "\n"
         "  echo \"dlscale: preempted ($(paste -sd ' ' " << marker << ")); requeueing Slurm job $SLURM_JOB_ID to resume from the checkpoint\"\n"
         "  scontrol requeue \"$SLURM_JOB_ID\" || echo \"dlscale: scontrol requeue failed: resubmit the job to resume it\" >&2\n"
         "# A rank's watchdog leaves run/" << kLostRankMarker << " when the other ranks stopped answering (a node\n"
         "# rebooted faster than Slurm noticed, a link cut): requeue to resume from the last\n"
         "# checkpoint, at most " << kLostRankRequeues << " times in the job's life, since a rank that hangs for a reason\n"
         "# a restart does not cure would loop.\n"
         "# The silent hosts (run/" << kLostHostsFile << ") stay out of the next start: Slurm may count a node\n"
         "# rebooted faster than its timeout, or one whose link is cut, as healthy. Only a pending job's\n"
         "# excluded nodes can change; a requeued job is pending (and completing) until this script ends.\n"
         "elif [ -e " << lost << " ] && [ \"${SLURM_RESTART_COUNT:-0}\" -lt " << kLostRankRequeues << " ]; then\n"
         "  trap '' TERM\n"
         "  status=" << kPreemptedExitCode << "\n"
         "  echo \"dlscale: ranks stopped answering ($(paste -sd ' ' " << lost << ")); requeueing Slurm job $SLURM_JOB_ID to resume from the last checkpoint (requeue $(( ${SLURM_RESTART_COUNT:-0} + 1 )) of at most " << kLostRankRequeues << ")\"\n"
         "  silent=\"\"\n"
         "  [ ! -s \"$task_dir/run/" << kLostHostsFile << "\" ] || silent=$(sort -u \"$task_dir/run/" << kLostHostsFile << "\" | paste -sd ,)\n"
         "  if scontrol requeue \"$SLURM_JOB_ID\"; then\n"
         "    if [ -n \"$silent\" ]; then\n"
         "      excluded=$(scontrol show job \"$SLURM_JOB_ID\" 2>/dev/null | sed -n 's/.*ExcNodeList=\\([^ ]*\\).*/\\1/p' || true)\n"
         "      case $excluded in '' | '(null)') excluded=$silent ;; *) excluded=$excluded,$silent ;; esac\n"
         "      if why=$(scontrol update JobId=\"$SLURM_JOB_ID\" ExcNodeList=\"$excluded\" 2>&1); then\n"
         "        echo \"dlscale: the requeued start excludes $excluded\"\n"
         "      else\n"
         "        echo \"dlscale: could not exclude $silent from the requeued start: $why\" >&2\n"
         "      fi\n"
         "    fi\n"
         "  else\n"
         "    echo \"dlscale: scontrol requeue failed: resubmit the job to resume it\" >&2\n"
         "  fi\n"
         "fi\n"
         "exit \"$status\"\n";
}

}  // namespace

std::string job_script(const ScriptSpec& s) {
  check_values(s);
  std::ostringstream out;
  out << "#!/bin/bash\n"
      << "# dlscale job " << shell_quote(s.job_name) << ", profile " << shell_quote(s.profile.name)
      << ", written by dlscale submit.\n"
      << "# Every value from the user is quoted: a name or a path cannot run anything.\n";
  if (s.profile.is_slurm()) sbatch_directives(out, s);
  prologue(out, s);
  auto staged_options = staging(out, s);
  if (s.profile.is_slurm()) out << "status=0\n";
  train_line(out, s, staged_options);
  if (s.profile.is_slurm()) requeue_when_preempted(out);
  return out.str();
}

}  // namespace dlscale
