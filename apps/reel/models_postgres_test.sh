#!/usr/bin/env bash
# `reel models` on a team's registry: metadata in the real PostgreSQL server ctest's "postgres"
# fixture started, weights in a local store (--chunks). A fresh database per run, dropped after.
# Usage: models_postgres_test.sh PATH_TO_REEL SOURCE_DIR POSTGRES_DIR
set -u
REEL=$1
SRC=$2
PG=$3
source "$(dirname "$0")/check_lib.sh"
db="reel_cli_$$"
psql -q "host=$PG/run port=5432 user=reel dbname=reel" -c "CREATE DATABASE $db" || exit 1
trap 'psql -q "host=$PG/run port=5432 user=reel dbname=reel" -c "DROP DATABASE $db WITH (FORCE)"; rm -rf "$WORK"' EXIT
export REEL_REGISTRY_URI="postgresql:///$db?host=$PG/run&port=5432&user=reel"
export REEL_REGISTRY_CHUNKS="$WORK/chunks" REEL_USER=ada
CKPT="$SRC/testdata/checkpoints/release-0.1.0"

check "register into PostgreSQL" bash -c "'$REEL' models register clf '$CKPT' -m first | grep -q 'registered models:/clf/1'"
check "the weights are in the chunk store" test -d "$WORK/chunks/chunks"
check "a second version" bash -c "'$REEL' models register clf '$CKPT' --branch exp > /dev/null"
check "alias set" "$REEL" models alias set clf production 1
check "ls" bash -c "'$REEL' models ls clf | grep -Eq '^ +1 +main .*@production first'"
check "show by alias" bash -c "'$REEL' models show models:/clf@production --json | grep -q '\"version\": 1'"
check "the schema is the registry's" bash -c "psql -tA 'host=$PG/run port=5432 user=reel dbname=$db' -c \"SELECT version FROM reel_schema WHERE component = 'registry'\" | grep -qx 3"
check "export is bit-exact" bash -c "'$REEL' models export models:/clf/2 '$WORK/out' > /dev/null && cmp -s '$WORK/out/model.safetensors' '$CKPT/step-0000000004/model.safetensors'"
"$REEL" models ls --chunks "" 2> "$WORK/err"; code=$?
check "without --chunks it exits 3" test "$code" -eq 3
"$REEL" models ls --registry "postgresql:///nope?host=$PG/run&port=5432&user=reel" 2> "$WORK/err"; code=$?
check "an unknown database exits 5" test "$code" -eq 5
finish
