#!/bin/bash
# dlscale job 'mlp', profile 'cluster', written by dlscale submit.
# Every value from the user is quoted: a name or a path cannot run anything.
#SBATCH --job-name="mlp"
#SBATCH --output="/jobs/mlp-20260101-120000/log.txt"
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
set -euo pipefail

job_dir='/jobs/mlp-20260101-120000'
task_dir=$job_dir
# dlscale jobs reads how the job ended from exit-status (sacct needs accounting storage).
trap 'status=$?; echo "$status" >"$task_dir/exit-status.tmp"; mv -f "$task_dir/exit-status.tmp" "$task_dir/exit-status"' EXIT
# A cancel or the time limit sends TERM: leave through the EXIT trap.
trap 'exit 143' TERM
date -u +%Y-%m-%dT%H:%M:%SZ >"$task_dir/started"

cd '/home/me/project'

srun --mpi='pmix' '/opt/dlscale/bin/dlscale' train "$task_dir/config.ini" --output "$task_dir/run"
