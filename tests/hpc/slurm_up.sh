#!/usr/bin/env bash
# A one-node SLURM on this machine, for the HPC tests: `slurm_up.sh up` installs (Debian's
# slurmctld, slurmd, slurm-client and munge) what is missing, writes a munge key and a minimal
# slurm.conf with this machine's cores and memory, starts munged, slurmctld and slurmd, and waits
# until the node is idle; `slurm_up.sh down` cancels every job and stops the three daemons.
# Needs root. Everything it writes is under /etc/munge, /etc/slurm, /var/spool/taskflow-slurm
# and /run/taskflow-slurm.
set -euo pipefail

cmd=${1:-up}
if [ "$(id -u)" != 0 ]; then
  echo "slurm_up.sh: needs root (it installs packages and starts daemons)" >&2
  exit 2
fi
RUN=/run/taskflow-slurm
SPOOL=/var/spool/taskflow-slurm

stop_pid() {  # stop_pid FILE: TERM, then KILL after 5 s
  [ -s "$1" ] || return 0
  local pid; pid=$(cat "$1")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$1"
}

case "$cmd" in
up)
  if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null \
      || ! command -v munged >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
  fi
  mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge /etc/slurm "$RUN" "$SPOOL/ctld" "$SPOOL/d" /var/log/slurm
  if [ ! -s /etc/munge/munge.key ]; then
    head -c 1024 /dev/urandom > /etc/munge/munge.key
  fi
  chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
  chmod 700 /etc/munge; chmod 400 /etc/munge/munge.key
  if ! pgrep -x munged >/dev/null; then
    runuser -u munge -- /usr/sbin/munged
  fi
  host=$(hostname -s)
  cpus=$(nproc)
  mem=$(( $(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo) - 1024 ))
  cat > /etc/slurm/slurm.conf <<CONF
# written by dask-taskflow's tests/hpc/slurm_up.sh: one node, no cgroups, no accounting
ClusterName=taskflow
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$SPOOL/ctld
SlurmdSpoolDir=$SPOOL/d
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MpiDefault=none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
  pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld
  pgrep -x slurmd >/dev/null || /usr/sbin/slurmd
  for _ in $(seq 120); do
    state=$(sinfo -h -o %T 2>/dev/null | head -1 || true)
    case "$state" in idle*|mixed*|allocated*) echo "slurm up: node $host, $cpus cores, ${mem} MB ($state)"; exit 0 ;; esac
    case "$state" in down*|drain*) scontrol update nodename="$host" state=resume 2>/dev/null || true ;; esac
    sleep 0.5
  done
  echo "slurm_up.sh: the node did not become idle within 60 s (state: ${state:-none}); see /var/log/slurm/" >&2
  exit 1
  ;;
down)
  if command -v scancel >/dev/null && pgrep -x slurmctld >/dev/null; then
    scancel --full --quiet --user root 2>/dev/null || true
  fi
  stop_pid "$RUN/slurmd.pid"
  stop_pid "$RUN/slurmctld.pid"
  pkill -x munged 2>/dev/null || true
  echo "slurm down"
  ;;
*)
  echo "usage: slurm_up.sh up|down" >&2
  exit 2
  ;;
esac
