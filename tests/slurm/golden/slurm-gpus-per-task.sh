#!/bin/bash
# dlscale job 'mlp', profile 'cluster', written by dlscale submit.
# Every value from the user is quoted: a name or a path cannot run anything.
#SBATCH --job-name="mlp"
#SBATCH --output="/jobs/mlp-20260101-120000/log.txt"
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --gpus-per-task=1
#SBATCH --partition="gpu"
#SBATCH --account="proj-123"
#SBATCH --qos="normal"
#SBATCH --time="02:00:00"
#SBATCH --constraint="a100&nvlink"
#SBATCH --exclusive
#SBATCH -C "big"
#SBATCH --comment="it's \"quoted\""
set -euo pipefail

job_dir='/jobs/mlp-20260101-120000'
task_dir=$job_dir
# dlscale jobs reads how the job ended from exit-status (sacct needs accounting storage).
trap 'status=$?; echo "$status" >"$task_dir/exit-status.tmp"; mv -f "$task_dir/exit-status.tmp" "$task_dir/exit-status"' EXIT
# A cancel or the time limit sends TERM: leave through the EXIT trap.
trap 'exit 143' TERM
date -u +%Y-%m-%dT%H:%M:%SZ >"$task_dir/started"

cd '/home/me/project'
module load 'cuda/12.2' 'openmpi'

srun --mpi='pmix' --cpus-per-task=8 --gpus-per-task=1 --gpu-bind=per_task:1 '/opt/dlscale/bin/dlscale' train "$task_dir/config.ini" --output "$task_dir/run" '--max-epochs' '3' '--seed' 'a b'\''c'
