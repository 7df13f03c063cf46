#!/bin/bash
# dlscale job ''\''; touch /tmp/pwned #', profile 'cluster', written by dlscale submit.
# Every value from the user is quoted: a name or a path cannot run anything.
#SBATCH --job-name="'; touch /tmp/pwned #"
#SBATCH --output="@JOB_DIR@/log.txt"
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --gpus-per-task=1
#SBATCH --partition="gpu"
#SBATCH --time="01:00:00"
set -euo pipefail

job_dir='@JOB_DIR@'
task_dir=$job_dir
# dlscale jobs reads how the job ended from exit-status (sacct needs accounting storage).
trap 'status=$?; echo "$status" >"$task_dir/exit-status.tmp"; mv -f "$task_dir/exit-status.tmp" "$task_dir/exit-status"' EXIT
# A cancel or the time limit sends TERM: leave through the EXIT trap.
trap 'exit 143' TERM
date -u +%Y-%m-%dT%H:%M:%SZ >"$task_dir/started"

cd '@SUBMIT_DIR@'
module load 'cuda'

srun --mpi='pmix' --cpus-per-task=8 --gpus-per-task=1 --gpu-bind=per_task:1 '@DLSCALE@' train "$task_dir/config.ini" --output "$task_dir/run" '--max-epochs' '2'
