#!/bin/bash
# dlscale job 'mlp', profile 'local', written by dlscale submit.
# Every value from the user is quoted: a name or a path cannot run anything.
set -euo pipefail

job_dir='@JOB_DIR@'
task_dir=$job_dir
# This task's own checkpoint folder: no other job or trial writes or resumes from it.
checkpoints=$task_dir/run/checkpoints
exec >>"$task_dir/log.txt" 2>&1
# dlscale jobs reads how the job ended from exit-status (sacct needs accounting storage).
trap 'status=$?; echo "$status" >"$task_dir/exit-status.tmp"; mv -f "$task_dir/exit-status.tmp" "$task_dir/exit-status"' EXIT
# A cancel or the time limit sends TERM: leave through the EXIT trap.
trap 'exit 143' TERM
date -u +%Y-%m-%dT%H:%M:%SZ >"$task_dir/started"

cd '@SUBMIT_DIR@'

'@DLSCALE@' train "$task_dir/config.ini" --output "$task_dir/run" --checkpoint-path "$checkpoints"
