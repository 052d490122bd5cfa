# Starts and stops a real one-node Slurm (munge + slurmctld + slurmd) without
# systemd, after ../shared/notes/slurm-localhost.md. Source it, then
# `slurm_start DIR` / `slurm_stop`. Exports SLURM_CONF.
set -euo pipefail
slurm_start() {
  B=$1
  mkdir -p "$B"/{key,munge,state,spool,log,run}
  chmod 700 "$B/key"; chmod 755 "$B/munge"   # the socket dir must be world-executable
  mungekey -c -k "$B/key/munge.key" >/dev/null 2>&1 || return 1
  munged -F 2>/dev/null --key-file="$B/key/munge.key" --socket="$B/munge/sock" \
    --pid-file="$B/munge/munged.pid" --seed-file="$B/key/seed" \
    --log-file="$B/log/munged.log" & echo $! > "$B/run/munged.bgpid"
  for _ in $(seq 50); do [ -S "$B/munge/sock" ] && break; sleep 0.1; done
  [ -S "$B/munge/sock" ] || { echo "slurm: munged did not start" >&2; return 1; }
  # ports chosen per run so that two clusters never clash
  local port=$(( 20000 + (RANDOM % 20000) * 2 ))
  # not nproc: it honours OMP_NUM_THREADS, which the tests set to 1
  local mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 2048 ))
  cat > "$B/slurm.conf" <<CONF
ClusterName=clozeci
SlurmctldHost=localhost
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire also sets how long a requeued job waits before it may start
# again (default 120 s; a job released sooner fails "credential revoked")
AuthInfo=socket=$B/munge/sock,cred_expire=5
# a loaded 2-core CI machine answered a batch launch after 26 s, past the
# default 10 s, and Slurm failed that launch and requeued the job again
MessageTimeout=60
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$B/state
SlurmdSpoolDir=$B/spool
SlurmctldPidFile=$B/run/slurmctld.pid
SlurmdPidFile=$B/run/slurmd.pid
SlurmctldLogFile=$B/log/slurmctld.log
SlurmdLogFile=$B/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
MailProg=/bin/true
ReturnToService=2
NodeName=localhost CPUs=$(getconf _NPROCESSORS_ONLN) RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF=$B/slurm.conf
  slurmctld -D -i -f "$SLURM_CONF" >/dev/null 2>&1 & echo $! > "$B/run/slurmctld.bgpid"
  slurmd -D -N localhost -f "$SLURM_CONF" >/dev/null 2>&1 & echo $! > "$B/run/slurmd.bgpid"
  for _ in $(seq 200); do
    sinfo -h -o %t 2>/dev/null | grep -qx idle && return 0
    sleep 0.2
  done
  echo "slurm: node never became idle; logs in $B/log" >&2
  return 1
}

# slurm_procs: the processes this cluster started and that are still alive:
# its daemons, their slurmstepd and every process of its jobs. All carry
# SLURM_CONF=$B/slurm.conf (slurm_start exported it); so do the test's own
# commands, which descend from its shell ($$): those count only when they
# are a Slurm daemon (slurmstepd leaves the tree: slurmd daemonizes it).
slurm_procs() {
  local e p q
  for e in $(grep -lzx "SLURM_CONF=$B/slurm.conf" /proc/[0-9]*/environ 2>/dev/null); do
    p=${e#/proc/}
    p=${p%/environ}
    case $(cat "/proc/$p/comm" 2>/dev/null) in
    slurm* | munged) echo "$p"; continue ;;
    esac
    q=$p
    while [ -n "$q" ] && [ "$q" -gt 1 ] && [ "$q" != $$ ]; do
      q=$(awk '/^PPid:/ { print $2 }' "/proc/$q/status" 2>/dev/null)
    done
    [ "$q" = $$ ] || echo "$p"
  done
  return 0
}

# slurm_stop: the jobs cancelled, the daemons stopped, then whatever of the
# cluster is still alive killed (a slurmstepd outlives a stopped slurmd and
# keeps its job's processes running: a failed test left one behind). Fails,
# naming them, when a process of the cluster survives SIGKILL.
slurm_stop() {
  local d p left
  [ -n "${B:-}" ] || return 0
  if [ -f "$B/run/slurmctld.bgpid" ] && kill -0 "$(cat "$B/run/slurmctld.bgpid")" 2>/dev/null; then
    # every job of this private cluster is the test's
    scancel --quiet --full --signal=KILL --state=RUNNING --user="$(id -un)" >/dev/null 2>&1 || true
    scancel --quiet --user="$(id -un)" >/dev/null 2>&1 || true
    # until no job holds the node (at most 20 s: the processes are killed below anyway)
    for _ in $(seq 100); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.2; done
  fi
  for d in slurmd slurmctld munged; do
    [ -f "$B/run/$d.bgpid" ] || continue
    local pid; pid=$(cat "$B/run/$d.bgpid")
    # `|| true`: callers run under set -e, and a daemon that already died
    # must not stop us from stopping the others
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$B/run/$d.bgpid"
  done
  for p in $(slurm_procs); do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
  for _ in $(seq 50); do
    left=$(slurm_procs)
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  echo "slurm: processes of the cluster still alive after SIGKILL: $(for p in $left; do
    echo -n "$p ($(cat /proc/$p/comm 2>/dev/null)) "; done)" >&2
  return 1
}

# slurm_cmd COMMAND...: runs a Slurm command where it reaches the cluster
# (here, this machine; a simulated cluster's tests run it on one of its hosts)
slurm_cmd() { "$@"; }

# slurm_wait JOBID [SECONDS]: until the job leaves PENDING/RUNNING/COMPLETING
# (at most SECONDS, default two minutes); prints the state.
slurm_wait() {
  local state
  for _ in $(seq $((${2:-120} * 5))); do
    state=$(slurm_cmd scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    case "$state" in PENDING|RUNNING|COMPLETING|CONFIGURING|REQUEUED|"") sleep 0.2 ;; *) echo "$state"; return 0 ;; esac
  done
  echo TIMEOUT
}
