#!/usr/bin/env bash
# Runs a test command (CTest's COMMAND, every test that may start MPI) with an
# Open MPI session folder of its own. Open MPI 4.1 puts its session tree,
# and PMIx its rendezvous files, under orte_tmpdir_base, by default $TMPDIR
# or /tmp, one tree per user shared by every job: two tests starting mpirun
# or a singleton at the same moment raced there once (`mkdir
# /tmp/ompi.HOST.UID...: File exists`). Here each test gets a fresh folder
# under $TMPDIR, removed when the command ends, whatever its exit code.
#   mpi_session.sh COMMAND [ARGS...]
set -u
# $TMPDIR may not exist yet: the cluster tests point it into the node
# cluster's shared folder, which cluster_env.sh creates only after this runs.
mkdir -p "${TMPDIR:-/tmp}" || exit 1
session=$(mktemp -d "${TMPDIR:-/tmp}/dlscale-ompi-XXXXXX") || exit 1
export OMPI_MCA_orte_tmpdir_base=$session
# A TERM from CTest's timeout reaches this shell; pass it on, then clean up.
"$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
wait "$child"
rc=$?
# wait returns early when the trap ran: wait again for the command to end.
while kill -0 "$child" 2>/dev/null; do wait "$child"; rc=$?; done
rm -rf "$session"
exit "$rc"
