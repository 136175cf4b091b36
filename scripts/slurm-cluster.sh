#!/usr/bin/env bash
# Starts and stops a real Slurm cluster on this one host: a private munged, slurmctld and two
# slurmd "nodes" n1 and n2 (both 127.0.0.1, each on its own port; SLURM_NODE_COUNT=4 for n1-n4),
# entirely inside a private directory, for Reel's tests. Ready in about a second.
#
#   scripts/slurm-cluster.sh start DIR   create DIR (absent or empty), write a munge key and
#                                        DIR/slurm.conf on free loopback ports, start munged,
#                                        slurmctld and the slurmd of n1 and n2, wait until both
#                                        nodes are idle, print the path of DIR/slurm.conf. If DIR
#                                        already holds a running cluster, just print the path.
#   scripts/slurm-cluster.sh stop DIR    cancel every job of the cluster, stop its daemons
#                                        (SIGKILL after a timeout); DIR and its logs are kept.
#                                        Does nothing if DIR holds no cluster.
#   scripts/slurm-cluster.sh status DIR  exit 0 if munged, slurmctld and both slurmd are alive
#
# Clients find the cluster through SLURM_CONF: `export SLURM_CONF=$(scripts/slurm-cluster.sh
# start DIR)`, then srun, sbatch, squeue, scancel, sinfo... as on a real cluster. The job list
# of the nodes is SLURM_JOB_NODELIST=n[1-2]; those names do not resolve, so jobs that need the
# first node's address should be given MASTER_ADDR=127.0.0.1.
#
# Environment:
#   SLURM_START_TIMEOUT   seconds `start` may take in all (default 30)
#   SLURM_STOP_TIMEOUT    seconds a daemon gets after SIGTERM before SIGKILL (default 10)
#   SLURM_NODE_COUNT      nodes for `start` (default 2; 1-8); stop and status read what start
#                         recorded in DIR
#
# Needs root (the daemons run jobs as the submitting user) and the Debian packages slurmctld
# slurmd slurm-client munge, plus python3 (to pick free ports). Writes nothing outside DIR and
# never uses the system's munged (/run/munge) or /etc/slurm. Daemons are stopped by PID file, or
# for a half-started cluster by a /proc scan, and only after checking /proc/PID/exe and that the
# command line names DIR's own files, so clusters in other DIRs are never touched.
set -euo pipefail
umask 022

PROG=slurm-cluster
NODES=()
MARKER=.reel-slurm-cluster

# The node names: from DIR/node-count once a cluster was started there, else SLURM_NODE_COUNT.
set_nodes() {
  local count=${SLURM_NODE_COUNT:-2}
  [ -f "$D/node-count" ] && count=$(cat "$D/node-count")
  case $count in [1-8]) ;; *) die "SLURM_NODE_COUNT must be 1-8, got '$count'" ;; esac
  NODES=()
  local i
  for i in $(seq 1 "$count"); do NODES+=("n$i"); done
}

# shellcheck disable=SC2034 # read by usage (cluster_lib.sh)
USAGE_END='^#   scripts\/slurm-cluster.sh status'
# log, die, usage, set_dir_paths and the process helpers (pid_from, terminate, ...)
# shellcheck source=cluster_lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh"

# --------------------------------------------------------------------------------------------
# paths and process helpers

set_paths() { # DIR must exist
  set_dir_paths "$1"
  CONF=$D/slurm.conf
  MUNGE_KEY=$D/munge/munge.key
  MUNGE_SOCK=$RUN/munge.socket
  MUNGE_PID=$RUN/munged.pid
  CTLD_PID=$RUN/slurmctld.pid
  set_nodes
}

slurmd_pid_file() { echo "$RUN/slurmd.$1.pid"; }

# The file a daemon binary really is (/usr/sbin/slurmd is an alternatives link to slurmd-wlm).
real_exe() {
  local b
  b=$(command -v "$1" 2>/dev/null) || return 1
  readlink -f -- "$b"
}

# Is PID a live (non-zombie) process running the binary $2 (as /proc/PID/exe shows it) whose
# command line has the argument $3 (DIR's slurm.conf, or munged's --socket=...)?
ours() {
  local pid=$1 exe=$2 arg=$3
  live_pid "$pid" || return 1
  [[ -n $exe && $(readlink -- "/proc/$pid/exe" 2>/dev/null) == "$exe" ]] || return 1
  grep -qszxF -e "$arg" "/proc/$pid/cmdline"
}

# Each daemon as "PIDFILE<tab>EXE<tab>ARG": the nodes, slurmctld, munged.
daemons() {
  local n
  for n in "${NODES[@]}"; do printf '%s\t%s\t%s\n' "$(slurmd_pid_file "$n")" "$SLURMD_EXE" "$CONF"; done
  printf '%s\t%s\t%s\n' "$CTLD_PID" "$SLURMCTLD_EXE" "$CONF"
  printf '%s\t%s\t%s\n' "$MUNGE_PID" "$MUNGED_EXE" "--socket=$MUNGE_SOCK"
}

ours_any() { # is PID one of this DIR's daemons, of whichever kind?
  ours "$1" "$SLURMD_EXE" "$CONF" || ours "$1" "$SLURMCTLD_EXE" "$CONF" ||
    ours "$1" "$MUNGED_EXE" "--socket=$MUNGE_SOCK"
}

# Every live daemon of this DIR, with or without a pid file (a start that was interrupted
# before the daemon wrote it): processes of our binaries whose command line names our files.
scan_ours() { scan_procs ours_any "$CONF" "--socket=$MUNGE_SOCK"; }

find_exes() {
  SLURMD_EXE=$(real_exe slurmd) || SLURMD_EXE=""
  SLURMCTLD_EXE=$(real_exe slurmctld) || SLURMCTLD_EXE=""
  MUNGED_EXE=$(real_exe munged) || MUNGED_EXE=""
}

ctld_alive() { pid_from "$CTLD_PID" "$SLURMCTLD_EXE" "$CONF" >/dev/null; }

# Cancels every job (while slurmctld is there to do it), then stops each daemon, one group at a
# time: the nodes, slurmctld, munged, and last whatever the /proc scan still finds.
stop_all() {
  local timeout=${SLURM_STOP_TIMEOUT:-10} i f exe arg pid
  if ctld_alive && command -v scancel >/dev/null; then
    SLURM_CONF=$CONF timeout 10 scancel --user="$(id -un)" >/dev/null 2>&1 || true
    # Give the steps a moment to be killed by their slurmd (KillWait=2) before it goes away.
    for ((i = 0; i < 50; i++)); do
      [[ -z $(SLURM_CONF=$CONF timeout 5 squeue -h -t running,completing,pending -o %i 2>/dev/null) ]] && break
      sleep 0.1
    done
  fi
  local n nodes=()
  for n in "${NODES[@]}"; do
    f=$(slurmd_pid_file "$n")
    if pid=$(pid_from "$f" "$SLURMD_EXE" "$CONF"); then nodes+=("$pid"$'\t'"$SLURMD_EXE"$'\t'"$CONF"); fi
  done
  terminate "$timeout" "${nodes[@]}"
  if pid=$(pid_from "$CTLD_PID" "$SLURMCTLD_EXE" "$CONF"); then
    terminate "$timeout" "$pid"$'\t'"$SLURMCTLD_EXE"$'\t'"$CONF"
  fi
  if pid=$(pid_from "$MUNGE_PID" "$MUNGED_EXE" "--socket=$MUNGE_SOCK"); then
    terminate "$timeout" "$pid"$'\t'"$MUNGED_EXE"$'\t'"--socket=$MUNGE_SOCK"
  fi
  local rest=()
  for pid in $(scan_ours); do
    for exe in "$SLURMD_EXE" "$SLURMCTLD_EXE" "$MUNGED_EXE"; do
      for arg in "$CONF" "--socket=$MUNGE_SOCK"; do
        if ours "$pid" "$exe" "$arg"; then rest+=("$pid"$'\t'"$exe"$'\t'"$arg"); fi
      done
    done
  done
  terminate "$timeout" "${rest[@]}"
  rm -f "$MUNGE_SOCK" "$MUNGE_SOCK.lock"
}

all_running() {
  local f exe arg
  while IFS=$'\t' read -r f exe arg; do
    pid_from "$f" "$exe" "$arg" >/dev/null || return 1
  done < <(daemons)
}

idle_nodes() { # how many of our nodes slurmctld reports idle
  SLURM_CONF=$CONF timeout 5 sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | grep -c . || true
}

# --------------------------------------------------------------------------------------------
# start

START_OK=0

start_cleanup() {
  local rc=$?
  ((START_OK)) && return 0
  trap - EXIT INT TERM
  if [[ -n ${D:-} ]]; then
    log "start failed; stopping what was started in $D (logs kept in $LOGS)"
    stop_all
  fi
  ((rc)) || rc=1
  exit "$rc"
}

# Prints three free consecutive loopback ports outside the ephemeral range (so that outgoing
# connections cannot take them between now and the daemons' bind): slurmctld, n1, n2.
free_ports() {
  python3 - "$1" <<'EOF'
import random, socket, sys
n = int(sys.argv[1])
lo, hi = 32768, 60999
try:
    lo, hi = map(int, open('/proc/sys/net/ipv4/ip_local_port_range').read().split())
except Exception:
    pass
cands = [p for p in range(20000, 32000 - n) if not any(lo <= q <= hi for q in range(p, p + n))]
cands = cands or list(range(10000, 20000 - n))
rng = random.SystemRandom()
for _ in range(1000):
    base = rng.choice(cands)
    socks = []
    try:
        for p in range(base, base + n):
            s = socket.socket()
            socks.append(s)
            s.bind(('127.0.0.1', p))
    except OSError:
        continue
    finally:
        for s in socks:
            s.close()
    print(*range(base, base + n))
    sys.exit(0)
sys.exit('no free ports')
EOF
}

write_conf() {
  local host=$1 user=$2 ctld_port=$3 first_node_port=$4 last_node_port=$5
  cat >"$CONF" <<EOF
# Written by scripts/slurm-cluster.sh: a throwaway cluster on one host, nothing outside $D.
ClusterName=reel
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=$user
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$LOGS/jobcomp.txt
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_min_interval=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=2
MinJobAge=300
MailProg=/bin/true
StateSaveLocation=$D/ctld
SlurmctldPidFile=$CTLD_PID
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdPidFile=$RUN/slurmd.%n.pid
SlurmdLogFile=$LOGS/slurmd.%n.log
SlurmdSpoolDir=$D/spool/%n
SlurmctldDebug=info
SlurmdDebug=info
NodeName=n[1-${#NODES[@]}] NodeHostname=$host NodeAddr=127.0.0.1 Port=[$first_node_port-$last_node_port] CPUs=2 RealMemory=4096 State=UNKNOWN
PartitionName=reel Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

cmd_start() {
  local dir=$1 t0=${EPOCHREALTIME/./}
  local timeout=${SLURM_START_TIMEOUT:-30}
  [[ $timeout =~ ^[0-9]+$ ]] || die "SLURM_START_TIMEOUT must be a number of seconds"
  local deadline=$((SECONDS + timeout))

  local b
  for b in munged mungekey munge unmunge slurmctld slurmd slurmstepd sinfo scontrol scancel squeue python3; do
    command -v "$b" >/dev/null || die "$b not found (install slurmctld slurmd slurm-client munge)"
  done
  [[ $(id -u) -eq 0 ]] || die "must run as root (slurmd starts job steps as the submitting user)"
  find_exes

  if [[ -e $dir ]]; then
    [[ -d $dir ]] || die "$dir exists and is not a directory"
    if [[ -e $dir/$MARKER ]]; then
      set_paths "$dir"
      if all_running; then
        log "already running in $D"
        echo "$CONF"
        return 0
      fi
      log "$D holds a cluster that is not (fully) running; starting it again"
      stop_all
      find "$D" -mindepth 1 -delete
    fi
    [[ -z $(ls -A -- "$dir") ]] || die "$dir exists and is not empty"
  else
    mkdir -p -- "$dir" || die "cannot create $dir"
  fi
  set_paths "$dir"
  trap start_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  touch "$D/$MARKER"
  echo "${#NODES[@]}" >"$D/node-count"
  mkdir -p "$RUN" "$LOGS" "$D/munge" "$D/ctld"
  local n
  for n in "${NODES[@]}"; do mkdir -p "$D/spool/$n"; done
  chmod 700 "$D/munge"
  if ((${#MUNGE_SOCK} > 100)); then die "$D is too long a path for munged's socket"; fi

  # Slurm's clients and daemons must not pick up a cluster from the caller's environment.
  local v
  for v in $(compgen -e | grep -E '^SLURM_' || true); do unset "$v"; done
  export SLURM_CONF=$CONF

  local host ports
  host=$(hostname -s)
  ports=$(free_ports $((1 + ${#NODES[@]}))) || die "could not find free ports"
  read -r -a ports <<<"$ports"
  write_conf "$host" "$(id -un)" "${ports[0]}" "${ports[1]}" "${ports[-1]}"
  log "starting in $D (slurmctld 127.0.0.1:${ports[0]}, nodes n1-n${#NODES[@]} on ports ${ports[1]}-${ports[-1]})"

  # --- munge
  mungekey --create --keyfile="$MUNGE_KEY" >"$LOGS/mungekey.out" 2>&1 ||
    { show_log mungekey.out; die "mungekey failed"; }
  chmod 600 "$MUNGE_KEY"
  munged --force --socket="$MUNGE_SOCK" --key-file="$MUNGE_KEY" --pid-file="$MUNGE_PID" \
    --log-file="$LOGS/munged.log" --seed-file="$D/munge/munged.seed" </dev/null >"$LOGS/munged.out" 2>&1 ||
    { show_log munged.out munged.log; die "munged failed to start"; }
  until munge -n -S "$MUNGE_SOCK" 2>/dev/null | unmunge -S "$MUNGE_SOCK" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { show_log munged.log; die "munged does not answer on $MUNGE_SOCK"; }
    sleep 0.05
  done

  # --- slurmctld, then the nodes (each daemonizes and writes its pid file)
  slurmctld -f "$CONF" -i </dev/null >"$LOGS/slurmctld.out" 2>&1 ||
    { show_log slurmctld.out slurmctld.log; die "slurmctld failed to start"; }
  for n in "${NODES[@]}"; do
    slurmd -f "$CONF" -N "$n" </dev/null >"$LOGS/slurmd.$n.out" 2>&1 ||
      { show_log "slurmd.$n.out" "slurmd.$n.log"; die "slurmd of $n failed to start"; }
  done

  local idle=0
  while :; do
    idle=$(idle_nodes)
    ((idle >= ${#NODES[@]})) && break
    if ((SECONDS >= deadline)); then
      SLURM_CONF=$CONF timeout 5 sinfo -N >&2 2>&1 || true
      show_log slurmctld.log "slurmd.n1.log" "slurmd.n${#NODES[@]}.log"
      die "only $idle of ${#NODES[@]} nodes idle after ${timeout}s"
    fi
    ctld_alive || { show_log slurmctld.out slurmctld.log; die "slurmctld exited during startup"; }
    sleep 0.05
  done
  all_running || { show_log slurmctld.log "slurmd.n1.log" "slurmd.n${#NODES[@]}.log"; die "a daemon exited during startup"; }

  START_OK=1
  trap - EXIT INT TERM
  log "ready in $(elapsed "$t0"); export SLURM_CONF=$CONF"
  echo "$CONF"
}

# --------------------------------------------------------------------------------------------
# stop / status

cmd_stop() {
  local dir=$1
  [[ -e $dir ]] || return 0
  [[ -d $dir ]] || die "$dir is not a directory"
  [[ -n $(ls -A -- "$dir") ]] || return 0
  [[ -e $dir/$MARKER ]] || die "$dir does not look like a cluster directory made by $PROG; not touching it"
  set_paths "$dir"
  find_exes
  stop_all
}

cmd_status() {
  [[ -d $1 && -e $1/$MARKER ]] || { log "$1 holds no cluster"; return 1; }
  set_paths "$1"
  find_exes
  local rc=0 f exe arg pid
  while IFS=$'\t' read -r f exe arg; do
    if pid=$(pid_from "$f" "$exe" "$arg"); then
      log "$(basename "$f" .pid) running (pid $pid)"
    else
      log "$(basename "$f" .pid) not running"
      rc=1
    fi
  done < <(daemons)
  return "$rc"
}

# --------------------------------------------------------------------------------------------

(($# == 2)) || usage
[[ -n $2 ]] || usage
case $1 in
  start) cmd_start "$2" ;;
  stop) cmd_stop "$2" ;;
  status) cmd_status "$2" ;;
  *) usage ;;
esac
