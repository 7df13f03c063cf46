#!/bin/sh
# A Slurm Prolog (slurm.conf: Prolog=/path/to/prolog-stale-pmix.sh) for
# clusters whose jobs use srun --mpi=pmix (Slurm 22.05 and others).
#
# Why: slurmstepd's PMIx plugin binds a UNIX socket named
# stepd.slurm.pmix.JOB.STEP in the node's SlurmdSpoolDir and removes it when
# the step ends. A node killed or rebooted mid-job (power, OOM killer, a
# kernel panic) never removes it, and a requeued job keeps its job id: its
# step 0 then gets the same socket name on that node, bind() fails with
# "Address already in use" and every task there fails to launch
# ("task N launch failed: Unspecified error"), so the requeue that was to
# save the job fails it. The prolog runs on the node before the job's first
# step starts there (and again for each start of a requeued job); no step of
# this job can be running then, so its old sockets are stale.
#
# A prolog that fails drains the node: this one always succeeds.
[ -n "${SLURM_JOB_ID:-}" ] || exit 0
# A setting of slurm.conf (the last line naming it), or $2 when it has none.
setting() { v=$(sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*//p" "${SLURM_CONF:-/etc/slurm/slurm.conf}" 2>/dev/null | tail -n 1); echo "${v:-$2}"; }
spool=$(setting SlurmdSpoolDir /var/spool/slurmd)
tmpfs=$(setting TmpFS /tmp)
# %n and %h in SlurmdSpoolDir stand for the node's name (several slurmd per host).
node=${SLURMD_NODENAME:-$(hostname -s)}
spool=$(printf '%s' "$spool" | sed "s/%n/$node/g; s/%h/$node/g")
rm -rf "$spool/stepd.slurm.pmix.$SLURM_JOB_ID".* "$spool/pmix.$SLURM_JOB_ID".* \
  "$tmpfs/spmix_appdir_"*"_$SLURM_JOB_ID".* 2>/dev/null
exit 0
