#!/bin/bash
# dlscale job ''\''; touch /tmp/pwned #', profile 'cluster', written by dlscale submit.
# Every value from the user is quoted: a name or a path cannot run anything.
#SBATCH --job-name="'; touch /tmp/pwned #"
#SBATCH --output="/jobs/it's 100%% \"odd\"; ls/log.txt"
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --partition="gpu\"; echo"
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --signal=USR1@120
set -euo pipefail

job_dir='/jobs/it'\''s 100% "odd"; ls'
task_dir=$job_dir
# This task's own checkpoint folder: no other job or trial writes or resumes from it.
checkpoints=$task_dir/run/checkpoints
# dlscale jobs reads how the job ended from exit-status (sacct needs accounting storage).
trap 'status=$?; echo "$status" >"$task_dir/exit-status.tmp"; mv -f "$task_dir/exit-status.tmp" "$task_dir/exit-status"' EXIT
# A cancel or the time limit sends TERM: leave through the EXIT trap.
trap 'exit 143' TERM
# USR1 (--signal, scancel --signal=USR1) is for the ranks, which stop at a checkpoint: carry on.
trap : USR1
# A requeued job starts here again: the previous start's exit status and preemption
# marker are history (the marker is what requeues the job, see the end).
rm -f "$task_dir/exit-status" "$task_dir/run/preempted" "$task_dir/run/lost-rank" "$task_dir/run/lost-rank-hosts"
[ -z "${SLURM_RESTART_COUNT:-}" ] || echo "dlscale: started again after a requeue (restart $SLURM_RESTART_COUNT)"
date -u +%Y-%m-%dT%H:%M:%SZ >"$task_dir/started"

cd '/home/me/$(reboot)'
# A requeue after the training finished (model.h5 is written last) has nothing left to do.
if [ -e "$task_dir/run/model.h5" ]; then
  echo "dlscale: $task_dir/run has finished already"
  exit 0
fi
status=0

# Slurm's ring fence, whatever the submitting shell had: its tree fence (also the
# default's barrier) spans only the local node when TreeWidth exceeds the step's node
# count (Slurm 22.05), so MPI_Init would not wait for the other nodes and their first
# message can crash a rank still inside it. The profile's pmix-fence changes it.
export SLURM_PMIX_FENCE=ring
srun --mpi='pmix' --kill-on-bad-exit=1 '/opt/dlscale/bin/dlscale' train "$task_dir/config.ini" --output "$task_dir/run" --checkpoint-path "$checkpoints" --resume auto &
srun_pid=$!
# srun can wait without end for a step on a node restarted faster than Slurm noticed;
# once the ranks have left run/lost-rank, give it a grace period, then end it.
# A TERM meanwhile waits for srun (the ranks stop at a checkpoint), then leaves.
term_seen= lost_seen=
trap 'term_seen=1' TERM
while kill -0 "$srun_pid" 2>/dev/null; do
  if [ -z "$lost_seen" ] && [ -e "$task_dir/run/lost-rank" ]; then lost_seen=$SECONDS; fi
  if [ -n "$lost_seen" ] && [ $(( SECONDS - lost_seen )) -ge "${DLSCALE_LOST_RANK_GRACE:-60}" ]; then
    echo "dlscale: srun still runs $(( SECONDS - lost_seen )) s after run/lost-rank appeared; ending it" >&2
    kill -TERM "$srun_pid" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$srun_pid" 2>/dev/null || break; sleep 1; done
    kill -KILL "$srun_pid" 2>/dev/null || true
    break
  fi
  sleep 1
done
wait "$srun_pid" || status=$?
trap 'exit 143' TERM
[ -z "$term_seen" ] || exit 143
# Rank 0 leaves run/preempted once the checkpoint it stopped at is written (USR1 or
# TERM to the ranks): the job requeues itself and its next start resumes (--resume auto).
# srun's exit code cannot tell this (the highest task code or 128+signal); without the
# marker nothing is requeued. The requeue's TERM is not an error.
if [ -e "$task_dir/run/preempted" ]; then
  trap '' TERM
  status=3
  echo "dlscale: preempted ($(paste -sd ' ' "$task_dir/run/preempted")); requeueing Slurm job $SLURM_JOB_ID to resume from the checkpoint"
  scontrol requeue "$SLURM_JOB_ID" || echo "dlscale: scontrol requeue failed: resubmit the job to resume it" >&2
# A rank's watchdog leaves run/lost-rank when the other ranks stopped answering (a node
# rebooted faster than Slurm noticed, a link cut): requeue to resume from the last
# checkpoint, at most 3 times in the job's life, since a rank that hangs for a reason
# a restart does not cure would loop.
# The silent hosts (run/lost-rank-hosts) stay out of the next start: Slurm may count a node
# rebooted faster than its timeout, or one whose link is cut, as healthy. Only a pending job's
# excluded nodes can change; a requeued job is pending (and completing) until this script ends.
elif [ -e "$task_dir/run/lost-rank" ] && [ "${SLURM_RESTART_COUNT:-0}" -lt 3 ]; then
  trap '' TERM
  status=3
  echo "dlscale: ranks stopped answering ($(paste -sd ' ' "$task_dir/run/lost-rank")); requeueing Slurm job $SLURM_JOB_ID to resume from the last checkpoint (requeue $(( ${SLURM_RESTART_COUNT:-0} + 1 )) of at most 3)"
  silent=""
  [ ! -s "$task_dir/run/lost-rank-hosts" ] || silent=$(sort -u "$task_dir/run/lost-rank-hosts" | paste -sd ,)
  if scontrol requeue "$SLURM_JOB_ID"; then
    if [ -n "$silent" ]; then
      excluded=$(scontrol show job "$SLURM_JOB_ID" 2>/dev/null | sed -n 's/.*ExcNodeList=\([^ ]*\).*/\1/p' || true)
      case $excluded in '' | '(null)') excluded=$silent ;; *) excluded=$excluded,$silent ;; esac
      if why=$(scontrol update JobId="$SLURM_JOB_ID" ExcNodeList="$excluded" 2>&1); then
        echo "dlscale: the requeued start excludes $excluded"
      else
        echo "dlscale: could not exclude $silent from the requeued start: $why" >&2
      fi
    fi
  else
    echo "dlscale: scontrol requeue failed: resubmit the job to resume it" >&2
  fi
fi
exit "$status"
