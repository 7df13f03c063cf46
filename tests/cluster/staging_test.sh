#!/usr/bin/env bash
# Node-local staging on several nodes (issue #15, item 3): a 2-node job with
# stage-data = true copies the datasets once per node (not per rank) into
# that node's own /tmp, verified (a marker, no partial copy), and leaves no
# copy on any node after it ends: normally, cancelled (TERM), or with a
# failed rank. A node's /tmp is CLUSTER_DIR/node/nodeK/tmp, read from here.
#   staging_test.sh CLUSTER_DIR DLSCALE
set -euo pipefail
. "$(dirname "$0")/cluster_env.sh" "$@"
fashion_mnist
sed -i 's/^max-epochs = .*/max-epochs = 1/' cnn.ini
use_cluster_profile
printf 'stage-data = true\n' >>"$scratch/profiles.ini"
train=(--threads 1 --validation-data "")

iteration() { "$dlscale" jobs --json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("progress",{}).get("iteration",0) or 0)'; }
slurm_id() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["slurm_job_id"])' "$scratch/jobs/$1/job.json"; }
# Every node's stage folders of Slurm job $1: "nodeK: <entries>"
stage_folders() {
  local k
  for ((k = 1; k <= $(node_count); k++)); do
    local d=$cluster/node/node$k/tmp/dlscale-$1
    [ -e "$d" ] && echo "node$k: $(cd "$d" && ls -A | paste -sd ' ')"
  done
  return 0
}

for ending in normal cancel failed-rank; do
  env=()
  # Rank 3 fails at iteration 400 of the epoch's ~468: the check below
  # reads the stage folders after iteration 50, and once (CI, 2 cores
  # shared with other tests) a failure at 150 had ended the job and removed
  # them before it looked.
  [ "$ending" = failed-rank ] && env=(DLSCALE_FAIL_AT=3:400)
  job=$(env "${env[@]}" "$dlscale" submit cnn.ini --name "staged-$ending" --nodes 2 --tasks-per-node 2 -- "${train[@]}" |
    awk 'NR == 1 {print $2}')
  id=$(slurm_id "$job")
  begin=$SECONDS
  until (($(iteration "$job") >= 50)); do
    ((SECONDS - begin < 300)) || fail "$job did not reach iteration 50: $(tail -n 20 "$scratch/jobs/$job/log.txt")"
    sleep 1
  done
  # While it runs: its two nodes hold one verified copy of each dataset, the
  # others none. cnn.ini's validation and test data are one folder: copied
  # once, under the first option naming it.
  nodes=$(scontrol show hostnames "$(squeue -h -j "$id" -o %N)" | paste -sd ' ')
  stage_folders "$id" >during.txt
  [ "$(awk -F: '{print $1}' during.txt | paste -sd ' ')" = "$nodes" ] || fail "stage folders on $(cat during.txt), the job runs on $nodes"
  while read -r node entries; do
    [ "$entries" = "train-data validation-data" ] || fail "$node holds '$entries' in its stage folder (a partial copy, or one per rank?)"
    for d in $entries; do
      [ -f "$cluster/node/${node%:}/tmp/dlscale-$id/$d/dlscale-staged.json" ] || fail "$node's copy of $d has no verification marker"
    done
  done <during.txt
  case $ending in
    normal) [ "$(wait_job "$job")" = done ] || fail "$job did not finish: $(tail -n 20 "$scratch/jobs/$job/log.txt")" ;;
    cancel) "$dlscale" cancel "$job" >/dev/null; wait_job "$job" >/dev/null ;;
    failed-rank) [ "$(wait_job "$job")" = failed ] || fail "$job with a failing rank did not fail" ;;
  esac
  # Gone from every node once the job has ended (the keepers remove them as the job ends).
  for ((i = 0; i < 30; i++)); do [ -z "$(stage_folders "$id")" ] && break; sleep 1; done
  [ -z "$(stage_folders "$id")" ] || fail "after a $ending end, stage folders remain: $(stage_folders "$id")"
  echo "$ending end: one verified copy on each of $nodes while running, none after"
done
