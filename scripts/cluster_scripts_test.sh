#!/usr/bin/env bash
# The single-host cluster scripts refuse bad settings with their own message, before they start
# or create anything (no cluster is started here).
# Usage: cluster_scripts_test.sh SOURCE_DIR
set -u
SRC=$1
source "$SRC/apps/reel/check_lib.sh"

refuses() {  # refuses SCRIPT VARIABLE=VALUE MESSAGE
  local out rc
  out=$(env "$2" bash "$SRC/scripts/$1" start "$WORK/cluster" 2>&1); rc=$?
  [ "$rc" -ne 0 ] && grep -q "$3" <<<"$out" && [ ! -e "$WORK/cluster" ] || { echo "     $1 with $2: rc $rc: $out"; return 1; }
}
check "ceph: a word as CEPH_START_TIMEOUT" refuses ceph-cluster.sh CEPH_START_TIMEOUT=abc "CEPH_START_TIMEOUT must be a number of seconds"
check "ceph: a negative CEPH_START_TIMEOUT" refuses ceph-cluster.sh CEPH_START_TIMEOUT=-5 "CEPH_START_TIMEOUT must be a number of seconds"
check "ceph: CEPH_OSD_SIZE_GB 0" refuses ceph-cluster.sh CEPH_OSD_SIZE_GB=0 "CEPH_OSD_SIZE_GB must be a positive integer"
check "ceph: an unknown CEPH_OSD_BACKEND" refuses ceph-cluster.sh CEPH_OSD_BACKEND=filestore "CEPH_OSD_BACKEND must be bluestore or memstore"
check "slurm: a word as SLURM_START_TIMEOUT" refuses slurm-cluster.sh SLURM_START_TIMEOUT=soon "SLURM_START_TIMEOUT must be a number of seconds"
finish
