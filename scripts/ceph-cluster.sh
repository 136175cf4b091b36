#!/usr/bin/env bash
# Starts and stops a real single-host Ceph cluster (one monitor, one OSD, radosgw as the S3
# gateway) on loopback, entirely inside a private directory, for Reel's tests and benchmarks.
#
#   scripts/ceph-cluster.sh start DIR      create DIR (absent or empty), start mon+osd+rgw on free
#                                          loopback ports, create an S3 user, wait until a signed S3
#                                          request succeeds, write DIR/env, print the endpoint
#   scripts/ceph-cluster.sh stop DIR       stop every daemon of DIR and remove DIR (idempotent)
#   scripts/ceph-cluster.sh stop-rgw DIR   stop only radosgw; mon and osd keep running
#   scripts/ceph-cluster.sh start-rgw DIR  start radosgw again on the same port, wait for HTTP
#   scripts/ceph-cluster.sh status DIR     exit 0 if mon, osd and rgw are all alive
#
# DIR/env holds `export AWS_ENDPOINT_URL=… AWS_ACCESS_KEY_ID=… AWS_SECRET_ACCESS_KEY=…
# AWS_REGION=us-east-1` lines; `source DIR/env` before running the S3 tests.
#
# Environment:
#   CEPH_OSD_BACKEND     bluestore (default; a sparse file in DIR) or memstore (all data in RAM).
#                        If DIR's file system cannot do O_DIRECT (e.g. old tmpfs), the default
#                        falls back to memstore.
#   CEPH_OSD_SIZE_GB     size of the sparse bluestore file / memstore capacity (default 32)
#   CEPH_START_TIMEOUT   seconds `start` may take in all (default 180)
#   CEPH_KEEP_FAILED=1   on a failed start, keep DIR (logs) but still stop the daemons
#
# Needs only the Debian packages ceph-mon ceph-osd radosgw ceph-common (their python3-rados under
# /usr/bin/python3) and curl. Writes nothing under /etc/ceph or /var/lib/ceph. Daemons are stopped
# by PID file (or, for a half-started cluster, by a /proc scan), and only after checking that their
# command line names DIR's own ceph.conf, so clusters in other DIRs are never touched.
set -euo pipefail
umask 022

PROG=ceph-cluster
MON_NAME=a
OSD_ID=0
RGW_NAME=rgw.a
RGW_POOLS=(.rgw.root default.rgw.control default.rgw.meta default.rgw.log
           default.rgw.buckets.index default.rgw.buckets.data default.rgw.buckets.non-ec)
MARKER=.reel-ceph-cluster
PY=/usr/bin/python3 # the system interpreter: python3-rados lives there, not in a pyenv/venv

# A stray CEPH_ARGS/CEPH_CONF in the caller's environment would redirect every ceph tool.
unset CEPH_ARGS CEPH_CONF CEPH_KEYRING || true

# shellcheck disable=SC2034 # read by usage (cluster_lib.sh)
USAGE_END='before running the S3 tests'
# log, die, usage, set_dir_paths and the process helpers (pid_from, terminate, ...)
# shellcheck source=cluster_lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh"

# --------------------------------------------------------------------------------------------
# paths and process helpers

set_paths() { # DIR must exist
  set_dir_paths "$1"
  CONF=$D/ceph.conf
  MON_PID=$RUN/mon.$MON_NAME.pid
  OSD_PID=$RUN/osd.$OSD_ID.pid
  RGW_PID=$RUN/client.$RGW_NAME.pid
}

# Is PID a live (non-zombie) process whose command line has DIR's ceph.conf as an argument?
ours() {
  local pid=$1
  live_pid "$pid" || return 1
  [[ -r /proc/$pid/cmdline ]] || return 1
  grep -qszxF -e "$CONF" -e "--conf=$CONF" "/proc/$pid/cmdline"
}

# Every live process whose command line names our ceph.conf (daemons whose pid file is missing
# because a start was interrupted, a radosgw-admin left behind, ...). Exact path match only.
scan_ours() { scan_procs ours "$CONF" "--conf=$CONF"; }

# Stops every process of this DIR: radosgw, then the OSD (which tells the monitor it is going
# down and waits up to osd_mon_shutdown_timeout for the answer, so the monitor must still be
# there), then the monitor, then anything the /proc scan finds (a daemon whose pid file was never
# written because a start was interrupted, a radosgw-admin left behind, ...).
stop_all() {
  local f pid
  for f in "$RGW_PID" "$OSD_PID" "$MON_PID"; do
    if pid=$(pid_from "$f"); then terminate 10 "$pid"; fi
  done
  local rest
  mapfile -t rest < <(scan_ours)
  terminate 10 "${rest[@]}"
}

port_open() { # does something accept TCP connections on 127.0.0.1:$1 ?
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

http_code() { # anonymous GET / on the rgw port; prints the HTTP status (000: no answer)
  curl -s --noproxy '*' --max-time 3 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/" 2>/dev/null || true
}

s3_code() { # signed ListBuckets; prints the HTTP status
  curl -s --noproxy '*' --max-time 5 -o /dev/null -w '%{http_code}' \
    --aws-sigv4 "aws:amz:us-east-1:s3" --user "$2:$3" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "http://127.0.0.1:$1/" 2>/dev/null || true
}

read_state() { # loads MON_PORT, RGW_PORT, ... written by start
  [[ -f $D/state ]] || die "$D is not a cluster directory made by $PROG (no $D/state)"
  # shellcheck disable=SC1091
  source "$D/state"
}

rgw_running() { # is a radosgw process of this DIR alive (with or without its pid file)?
  local p
  for p in $(scan_ours); do
    [[ $(cat "/proc/$p/comm" 2>/dev/null) == radosgw ]] && return 0
  done
  return 1
}

# Launch radosgw (it daemonizes) and wait until its port answers HTTP. Returns non-zero on failure.
launch_rgw() {
  local deadline=$1 code
  if port_open "$RGW_PORT"; then
    log "port 127.0.0.1:$RGW_PORT is already in use by another process"
    return 1
  fi
  rm -f "$RGW_PID"
  if ! radosgw -c "$CONF" -n "client.$RGW_NAME" </dev/null >>"$LOGS/client.$RGW_NAME.out" 2>&1; then
    log "radosgw failed to start"
    show_log "client.$RGW_NAME.out" "client.$RGW_NAME.log"
    return 1
  fi
  while :; do
    code=$(http_code "$RGW_PORT")
    [[ $code != 000 ]] && return 0
    # The launch returned after radosgw forked into the background; if no radosgw of ours is
    # left (it removes its pid file when it fails, e.g. to bind the port), it died.
    if ! rgw_running; then
      log "radosgw exited during startup"
      show_log "client.$RGW_NAME.out" "client.$RGW_NAME.log"
      return 1
    fi
    if ((SECONDS >= deadline)); then
      log "radosgw did not answer HTTP on 127.0.0.1:$RGW_PORT in time"
      show_log "client.$RGW_NAME.log"
      return 1
    fi
    sleep 0.2
  done
}

# --------------------------------------------------------------------------------------------
# start

START_OK=0
START_MADE_DIR=0

start_cleanup() {
  local rc=$?
  ((START_OK)) && return 0
  trap - EXIT INT TERM
  [[ -n ${D:-} ]] || exit "$rc"
  log "start failed; stopping what was started in $D"
  stop_all
  if [[ ${CEPH_KEEP_FAILED:-0} == 1 ]]; then
    log "keeping $D for inspection (CEPH_KEEP_FAILED=1); remove it with: $0 stop $D"
  else
    rm -rf -- "$D"
    ((START_MADE_DIR)) || mkdir -p -- "$D" 2>/dev/null || true
  fi
  ((rc)) || rc=1
  exit "$rc"
}

# Prints "MON_PORT RGW_PORT ACCESS_KEY SECRET_KEY FSID OSD_UUID": two free loopback ports outside
# the ephemeral range (so outgoing connections cannot grab them between now and the bind, nor
# take the rgw port while rgw is stopped), random keys and ids.
gen_params() {
  "$PY" - <<'EOF'
import random, secrets, socket, string, uuid
lo, hi = 32768, 60999
try:
    lo, hi = map(int, open('/proc/sys/net/ipv4/ip_local_port_range').read().split())
except Exception:
    pass
cands = [p for p in range(20000, 32000) if not lo <= p <= hi] or list(range(10000, 20000))
rng = random.SystemRandom()
ports = []
while len(ports) < 2:
    p = rng.choice(cands)
    if p in ports:
        continue
    s = socket.socket()
    try:
        s.bind(('127.0.0.1', p))
    except OSError:
        continue
    finally:
        s.close()
    ports.append(p)
up = string.ascii_uppercase + string.digits
ak = ''.join(secrets.choice(up) for _ in range(20))
sk = ''.join(secrets.choice(string.ascii_letters + string.digits) for _ in range(40))
print(ports[0], ports[1], ak, sk, uuid.uuid4(), uuid.uuid4())
EOF
}

write_helper() {
  cat >"$D/helper.py" <<'EOF'
# Talks to the monitor through librados: one process instead of a `ceph` CLI run per command.
import json, sys, threading
import rados

conf, cmd = sys.argv[1], sys.argv[2]
r = rados.Rados(conffile=conf, name='client.admin')
r.connect(timeout=60)

def mon(**kw):
    ret, out, err = r.mon_command(json.dumps(kw), b'', timeout=60)
    return ret, out, err

if cmd == 'osd-new':
    ret, out, err = mon(prefix='osd new', uuid=sys.argv[3], id=int(sys.argv[4]), format='json')
    if ret != 0:
        sys.exit('osd new failed: %d %s' % (ret, err))
elif cmd == 'pools':
    # Sent concurrently so the monitor folds them into a few paxos rounds.
    errors = []
    def one(name):
        ret, _, err = mon(prefix='osd pool create', pool=name, pg_num=8, pgp_num=8)
        if ret != 0 and ret != -17:
            errors.append('%s: %d %s' % (name, ret, err))
            return
        ret, _, err = mon(prefix='osd pool application enable', pool=name, app='rgw')
        if ret != 0:
            errors.append('%s app: %d %s' % (name, ret, err))
    ts = [threading.Thread(target=one, args=(n,)) for n in sys.argv[3:]]
    for t in ts: t.start()
    for t in ts: t.join()
    if errors:
        sys.exit('pool creation failed: ' + '; '.join(errors))
r.shutdown()
EOF
}

write_conf() {
  local admin_sock_dir=$RUN backend_conf
  # AF_UNIX paths are limited to 107 bytes; without an admin socket the daemons still work.
  if ((${#RUN} + 25 > 107)); then admin_sock_dir=""; fi
  if [[ $BACKEND == bluestore ]]; then
    backend_conf="osd_objectstore = bluestore
bluestore_block_create = true
bluestore_block_size = $((SIZE_GB * 1024 * 1024 * 1024))
bluestore_fsck_on_mkfs = false
bluestore_fsck_on_mount = false
bdev_aio_poll_ms = 20
osd_memory_target = 1073741824"
  else
    backend_conf="osd_objectstore = memstore
memstore_device_bytes = $((SIZE_GB * 1024 * 1024 * 1024))"
  fi
  local crc="auth_cluster_required = none
auth_service_required = none
auth_client_required = none
ms_mon_client_mode = crc
ms_client_mode = crc
ms_mon_cluster_mode = crc
ms_cluster_mode = crc
ms_mon_service_mode = crc
ms_service_mode = crc"
  cat >"$CONF" <<EOF
# Written by scripts/ceph-cluster.sh: a throwaway single-host cluster, nothing outside $D.
[global]
fsid = $FSID
mon_host = [v2:127.0.0.1:$MON_PORT]
ms_bind_msgr1 = false
ms_bind_msgr2 = true
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
$crc
keyring = $D/keyring
run_dir = $RUN
crash_dir = $D/crash
log_file = $LOGS/\$name.log
log_to_stderr = false
err_to_stderr = false
mon_cluster_log_file = $LOGS/cluster.log
mon_allow_pool_size_one = true
mon_allow_pool_delete = true
mon_warn_on_pool_no_redundancy = false
mon_warn_on_insecure_global_id_reclaim_allowed = false
mon_data_avail_crit = 0
mon_max_pg_per_osd = 1000
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0
paxos_propose_interval = 0.1
client_mount_timeout = 30

[mon]
mon_data = $D/mon/\$name
pid_file = $RUN/\$name.pid
admin_socket = ${admin_sock_dir:+$admin_sock_dir/\$name.asok}

[osd]
osd_data = $D/osd/\$name
osd_mon_shutdown_timeout = 2
pid_file = $RUN/\$name.pid
admin_socket = ${admin_sock_dir:+$admin_sock_dir/\$name.asok}
$backend_conf

[client]
$crc

[client.$RGW_NAME]
$crc
pid_file = $RUN/\$name.pid
admin_socket = ${admin_sock_dir:+$admin_sock_dir/\$name.asok}
rgw_data = $D/rgw
rgw_frontends = beast endpoint=127.0.0.1:$RGW_PORT
rgw_gc_obj_min_wait = 120
rgw_gc_processor_period = 60
EOF
}

cmd_start() {
  local dir=$1 t0=${EPOCHREALTIME/./}
  local timeout=${CEPH_START_TIMEOUT:-180}
  # Checked before any arithmetic: bash reads a word there as an (unset) variable's name.
  [[ $timeout =~ ^[0-9]+$ ]] || die "CEPH_START_TIMEOUT must be a number of seconds"
  local deadline=$((SECONDS + timeout))
  BACKEND=${CEPH_OSD_BACKEND:-}
  SIZE_GB=${CEPH_OSD_SIZE_GB:-32}
  [[ $SIZE_GB =~ ^[0-9]+$ && $SIZE_GB -ge 1 ]] || die "CEPH_OSD_SIZE_GB must be a positive integer"
  case $BACKEND in ""|bluestore|memstore) ;; *) die "CEPH_OSD_BACKEND must be bluestore or memstore" ;; esac

  local b
  for b in ceph-mon ceph-osd radosgw radosgw-admin monmaptool curl "$PY"; do
    command -v "$b" >/dev/null || die "$b not found (install ceph-mon ceph-osd radosgw ceph-common curl)"
  done
  "$PY" -c 'import rados' 2>/dev/null || die "$PY cannot import rados (package python3-rados)"

  if [[ -e $dir ]]; then
    [[ -d $dir ]] || die "$dir exists and is not a directory"
    [[ -z $(ls -A -- "$dir") ]] || die "$dir exists and is not empty"
  else
    mkdir -p -- "$dir" || die "cannot create $dir"
    START_MADE_DIR=1
  fi
  set_paths "$dir"
  trap start_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  touch "$D/$MARKER"
  mkdir -p "$RUN" "$LOGS" "$D/mon" "$D/osd/osd.$OSD_ID" "$D/rgw" "$D/crash"

  if [[ -z $BACKEND ]]; then
    BACKEND=bluestore
    if ! dd if=/dev/zero of="$D/.odirect" bs=4096 count=1 oflag=direct status=none 2>/dev/null; then
      log "$D does not support O_DIRECT (tmpfs?); using the memstore backend"
      BACKEND=memstore
    fi
    rm -f "$D/.odirect"
  fi

  local params
  params=$(gen_params) || die "could not pick ports/keys"
  read -r MON_PORT RGW_PORT ACCESS_KEY SECRET_KEY FSID OSD_UUID <<<"$params"
  cat >"$D/state" <<EOF
MON_PORT=$MON_PORT
RGW_PORT=$RGW_PORT
BACKEND=$BACKEND
ACCESS_KEY=$ACCESS_KEY
SECRET_KEY=$SECRET_KEY
EOF
  write_conf
  write_helper
  log "starting in $D (mon 127.0.0.1:$MON_PORT, rgw 127.0.0.1:$RGW_PORT, $BACKEND)"

  # --- monitor
  monmaptool --create --clobber --fsid "$FSID" --addv "$MON_NAME" "[v2:127.0.0.1:$MON_PORT]" \
    --enable-all-features --set-min-mon-release pacific "$D/monmap" >"$LOGS/monmaptool.out" 2>&1 ||
    { show_log monmaptool.out; die "monmaptool failed"; }
  ceph-mon -c "$CONF" --mkfs -i "$MON_NAME" --monmap "$D/monmap" </dev/null >"$LOGS/mon.mkfs.out" 2>&1 ||
    { show_log mon.mkfs.out "mon.$MON_NAME.log"; die "ceph-mon --mkfs failed"; }
  ceph-mon -c "$CONF" -i "$MON_NAME" </dev/null >>"$LOGS/mon.$MON_NAME.out" 2>&1 ||
    { show_log "mon.$MON_NAME.out" "mon.$MON_NAME.log"; die "ceph-mon failed to start"; }

  # --- OSD: register it, then (while the pools are created) mkfs and start it
  timeout $((deadline - SECONDS > 1 ? deadline - SECONDS : 1)) \
    "$PY" "$D/helper.py" "$CONF" osd-new "$OSD_UUID" "$OSD_ID" </dev/null >"$LOGS/osd-new.out" 2>&1 ||
    { show_log osd-new.out "mon.$MON_NAME.log"; die "registering the OSD with the monitor failed"; }
  timeout $((deadline - SECONDS > 1 ? deadline - SECONDS : 1)) \
    "$PY" "$D/helper.py" "$CONF" pools "${RGW_POOLS[@]}" </dev/null >"$LOGS/pools.out" 2>&1 &
  local pools_job=$!
  ceph-osd -c "$CONF" -i "$OSD_ID" --mkfs --osd-uuid "$OSD_UUID" </dev/null >"$LOGS/osd.mkfs.out" 2>&1 ||
    { show_log osd.mkfs.out "osd.$OSD_ID.log"; die "ceph-osd --mkfs failed"; }
  ceph-osd -c "$CONF" -i "$OSD_ID" </dev/null >>"$LOGS/osd.$OSD_ID.out" 2>&1 ||
    { show_log "osd.$OSD_ID.out" "osd.$OSD_ID.log"; die "ceph-osd failed to start"; }
  wait "$pools_job" || { show_log pools.out "mon.$MON_NAME.log"; die "creating the RGW pools failed"; }

  # --- S3 user and zone, before radosgw starts (radosgw-admin waits for the PGs to go active;
  # user create also makes the default zone and zonegroup). The zonegroup's api_name becomes
  # us-east-1, so that CreateBucket with LocationConstraint us-east-1 is accepted as on AWS
  # (with RGW's "default" it answers 400 InvalidLocationConstraint).
  timeout $((deadline - SECONDS > 1 ? deadline - SECONDS : 1)) \
    radosgw-admin -c "$CONF" user create --uid=reel --display-name="Reel tests" \
    --access-key="$ACCESS_KEY" --secret-key="$SECRET_KEY" </dev/null >"$LOGS/user-create.out" 2>&1 ||
    { show_log user-create.out client.admin.log; die "radosgw-admin user create failed"; }
  timeout $((deadline - SECONDS > 1 ? deadline - SECONDS : 1)) \
    radosgw-admin -c "$CONF" zonegroup modify --rgw-zonegroup=default --api-name=us-east-1 \
    </dev/null >"$LOGS/zonegroup.out" 2>&1 ||
    { show_log zonegroup.out client.admin.log; die "radosgw-admin zonegroup modify failed"; }

  # --- radosgw
  launch_rgw "$deadline" || die "radosgw did not start"
  pid_from "$MON_PID" >/dev/null || { show_log "mon.$MON_NAME.log"; die "ceph-mon is not running"; }
  pid_from "$OSD_PID" >/dev/null || { show_log "osd.$OSD_ID.log"; die "ceph-osd is not running"; }

  local code
  while :; do
    code=$(s3_code "$RGW_PORT" "$ACCESS_KEY" "$SECRET_KEY")
    [[ $code == 200 ]] && break
    if ((SECONDS >= deadline)); then
      show_log "client.$RGW_NAME.log"
      die "a signed S3 request still fails (HTTP $code) after ${timeout}s"
    fi
    sleep 0.2
  done

  cat >"$D/env.tmp" <<EOF
export AWS_ENDPOINT_URL=http://127.0.0.1:$RGW_PORT
export AWS_ACCESS_KEY_ID=$ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$SECRET_KEY
export AWS_REGION=us-east-1
EOF
  mv "$D/env.tmp" "$D/env"
  START_OK=1
  trap - EXIT INT TERM
  log "ready in $(elapsed "$t0"); credentials in $D/env"
  echo "http://127.0.0.1:$RGW_PORT"
}

# --------------------------------------------------------------------------------------------
# stop / stop-rgw / start-rgw / status

cmd_stop() {
  local dir=$1
  if [[ ! -e $dir ]]; then return 0; fi
  [[ -d $dir ]] || die "$dir is not a directory"
  if [[ -z $(ls -A -- "$dir") ]]; then rmdir -- "$dir"; return 0; fi
  [[ -e $dir/$MARKER ]] || die "$dir does not look like a cluster directory made by $PROG; not touching it"
  set_paths "$dir"
  stop_all
  rm -rf -- "$D"
  [[ ! -e $D ]] || die "could not remove $D"
}

cmd_stop_rgw() {
  [[ -d $1 ]] || die "$1 does not exist"
  set_paths "$1"
  read_state
  local pid i
  if pid=$(pid_from "$RGW_PID"); then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 300; i++)); do
      ours "$pid" || break
      sleep 0.1
    done
    if ours "$pid"; then
      log "radosgw (pid $pid) did not stop within 30s after SIGTERM, sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do ours "$pid" || break; sleep 0.1; done
    fi
  fi
  rm -f "$RGW_PID"
  for ((i = 0; i < 100; i++)); do
    port_open "$RGW_PORT" || return 0
    sleep 0.1
  done
  die "port 127.0.0.1:$RGW_PORT still accepts connections after radosgw stopped"
}

cmd_start_rgw() {
  [[ -d $1 ]] || die "$1 does not exist"
  set_paths "$1"
  read_state
  if pid_from "$RGW_PID" >/dev/null; then
    log "radosgw already running"
  else
    pid_from "$MON_PID" >/dev/null || die "ceph-mon of $D is not running"
    pid_from "$OSD_PID" >/dev/null || die "ceph-osd of $D is not running"
    [[ ${CEPH_START_TIMEOUT:-180} =~ ^[0-9]+$ ]] || die "CEPH_START_TIMEOUT must be a number of seconds"
    launch_rgw $((SECONDS + ${CEPH_START_TIMEOUT:-180})) || die "radosgw did not start"
  fi
  local code i
  for ((i = 0; i < 300; i++)); do
    code=$(s3_code "$RGW_PORT" "$ACCESS_KEY" "$SECRET_KEY")
    [[ $code == 200 ]] && { echo "http://127.0.0.1:$RGW_PORT"; return 0; }
    sleep 0.2
  done
  show_log "client.$RGW_NAME.log"
  die "radosgw answers but a signed S3 request fails (HTTP $code)"
}

cmd_status() {
  [[ -d $1 ]] || { log "$1 does not exist"; return 1; }
  set_paths "$1"
  local rc=0 name f pid
  for name in "mon.$MON_NAME" "osd.$OSD_ID" "client.$RGW_NAME"; do
    f=$RUN/$name.pid
    if pid=$(pid_from "$f"); then
      log "$name running (pid $pid)"
    else
      log "$name not running"
      rc=1
    fi
  done
  return "$rc"
}

# --------------------------------------------------------------------------------------------

(($# == 2)) || usage
[[ -n $2 ]] || usage
case $1 in
  start) cmd_start "$2" ;;
  stop) cmd_stop "$2" ;;
  stop-rgw) cmd_stop_rgw "$2" ;;
  start-rgw) cmd_start_rgw "$2" ;;
  status) cmd_status "$2" ;;
  *) usage ;;
esac
