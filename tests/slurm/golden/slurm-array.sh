#!/bin/bash
# dlscale job 'sweep', profile 'cluster', written by dlscale submit.
# Every value from the user is quoted: a name or a path cannot run anything.
#SBATCH --job-name="sweep"
#SBATCH --array=0-3%2
#SBATCH --output="/jobs/sweep-20260101-120000/trials/%a/log.txt"
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
set -euo pipefail

job_dir='/jobs/sweep-20260101-120000'
task_dir=$job_dir/trials/$SLURM_ARRAY_TASK_ID
# dlscale jobs reads how the job ended from exit-status (sacct needs accounting storage).
trap 'status=$?; echo "$status" >"$task_dir/exit-status.tmp"; mv -f "$task_dir/exit-status.tmp" "$task_dir/exit-status"' EXIT
# A cancel or the time limit sends TERM: leave through the EXIT trap.
trap 'exit 143' TERM
date -u +%Y-%m-%dT%H:%M:%SZ >"$task_dir/started"

cd '/home/me/project'

srun --mpi='pmix' '/opt/dlscale/bin/dlscale' train "$task_dir/config.ini" --output "$task_dir/run"
