# shellcheck shell=bash
# Shared by scripts/ceph-cluster.sh and scripts/slurm-cluster.sh (sourced, not run): messages
# (log, die, usage), the paths every cluster DIR has (set_dir_paths: D, RUN=$D/run, LOGS=$D/log)
# and the process helpers (live_pid, pid_from, scan_procs, terminate, show_log, elapsed).
#
# The caller sets PROG (the name messages start with) and USAGE_END (a sed regex matching the
# last line of its header comment that `usage` prints), and defines `ours PID [ARG...]`: is PID
# a live daemon of this DIR (checked through /proc, never by name)? pid_from and terminate pass
# their extra fields to it. set_dir_paths must have run before show_log (it reads LOGS).

log() { echo "$PROG: $*" >&2; }
die() { echo "$PROG: error: $*" >&2; exit 1; }

usage() { # print the script's header comment, from line 2 to the line USAGE_END matches
  sed -n "2,/$USAGE_END/p" "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# Sets D (DIR's absolute physical path), RUN and LOGS. DIR must exist.
set_dir_paths() {
  D=$(cd "$1" && pwd -P)
  # shellcheck disable=SC2034 # RUN is for the caller
  RUN=$D/run
  LOGS=$D/log
}

# Is PID (a number) a live process, not a zombie?
live_pid() {
  local pid=$1 state
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$pid/status" 2>/dev/null) || return 1
  [[ -n $state && $state != Z && $state != X ]]
}

# pid_from PIDFILE [ARG...]: the PID in PIDFILE, printed only if `ours PID ARG...` holds.
pid_from() {
  local f=$1 pid
  shift
  [[ -f $f ]] || return 1
  pid=$(tr -dc '0-9' <"$f" 2>/dev/null) || return 1
  ours "$pid" "$@" || return 1
  echo "$pid"
}

# scan_procs TEST ARG...: every process (but this shell) whose command line has one of the ARGs
# as a whole argument (exact match) and for which `TEST PID` holds.
scan_procs() {
  local test=$1 a f pid
  shift
  local patterns=()
  for a in "$@"; do patterns+=(-e "$a"); done
  while IFS= read -r f; do
    pid=${f#/proc/}; pid=${pid%/cmdline}
    [[ $pid == "$$" || $pid == "${BASHPID:-}" ]] && continue
    "$test" "$pid" && echo "$pid"
  done < <(grep -lszxF "${patterns[@]}" /proc/[0-9]*/cmdline 2>/dev/null || true)
  return 0
}

# A process given to terminate: its PID, or "PID<tab>ARG..." where the ARGs are the rest of what
# `ours` needs to recognise it. item_ours runs `ours` on one such item.
item_ours() {
  local fields
  IFS=$'\t' read -r -a fields <<<"$1"
  ours "${fields[@]}"
}

# terminate TIMEOUT ITEM...: TERM the given processes, wait up to TIMEOUT seconds for them to
# go, then KILL what is left. A process is signalled only while `ours` still holds for it.
terminate() {
  local timeout=$1; shift
  local items=("$@") alive t i
  ((${#items[@]})) || return 0
  for t in "${items[@]}"; do kill -TERM "${t%%$'\t'*}" 2>/dev/null || true; done
  for ((i = 0; i < timeout * 10; i++)); do
    alive=()
    for t in "${items[@]}"; do item_ours "$t" && alive+=("$t"); done
    ((${#alive[@]})) || return 0
    sleep 0.1
  done
  for t in "${alive[@]}"; do
    if item_ours "$t"; then
      log "pid ${t%%$'\t'*} did not stop within ${timeout}s, sending SIGKILL"
      kill -KILL "${t%%$'\t'*}" 2>/dev/null || true
    fi
  done
  for ((i = 0; i < 50; i++)); do
    alive=()
    for t in "${items[@]}"; do item_ours "$t" && alive+=("$t"); done
    ((${#alive[@]})) || return 0
    sleep 0.1
  done
  log "warning: still alive after SIGKILL: ${alive[*]%%$'\t'*}"
}

show_log() { # print the tail of each named log file in $LOGS
  local f
  for f in "$@"; do
    [[ -s $LOGS/$f ]] || continue
    echo "----- last lines of $LOGS/$f -----" >&2
    tail -n 25 "$LOGS/$f" >&2 || true
  done
}

elapsed() { # seconds since $1 (a ${EPOCHREALTIME/./} value), as S.mmms
  local ms=$(((${EPOCHREALTIME/./} - $1) / 1000))
  echo "$((ms / 1000)).$(printf %03d $((ms % 1000)))s"
}
