#!/usr/bin/env bash
# measure.sh BINARY flood|churn [replayattack flags...]: starts herald BINARY on free loopback
# ports with one app whose auction-* channels keep history, runs replayattack against it and
# prints its report. flood runs one node (the history is 1,000 events of 10 KB: size 1000);
# churn runs one node of a cluster on a redis-server it starts (the app's
# max_subscriptions_per_second is raised to 100, so that 50 subscriptions a second are not
# refused by the rate limit but reach the history). HERALD_FLAGS adds herald flags.
set -euo pipefail
bin=$1 mode=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
attack=${ATTACK:-/tmp/replayattack}
[ -x "$attack" ] || go build -o "$attack" "$here"
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$dir"; }
trap cleanup EXIT
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free) mport=$(free)
limit=10
extra=()
if [ "$mode" = churn ]; then
	rport=$(free)
	redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" >"$dir/redis.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
	limit=100
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/cluster-secret" # 64 hex digits
	extra=(--cluster-url "redis://127.0.0.1:$rport" --cluster-secret-file "$dir/cluster-secret" --cluster-node-id n1)
	set -- -redis "127.0.0.1:$rport" "$@"
fi
cat >"$dir/herald.yml" <<YML
apps:
  - id: app-id
    key: app-key
    secret: app-secret
    limits: {max_subscriptions_per_second: $limit}
    history:
      - {channels: "auction-*", size: 1000, ttl: 10m}
YML
# shellcheck disable=SC2086
# The clients come from a few loopback addresses: the per-address connection limit is off, as in
# the figures recorded with this script (HERALD_FLAGS may turn it on again).
"$bin" --config "$dir/herald.yml" --port "$port" --metrics-port "$mport" --log-level error --connection-rate-per-ip 0 "${extra[@]}" ${HERALD_FLAGS:-} 2>"$dir/herald.log" &
pids+=($!)
hpid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
"$attack" -mode "$mode" -addr "127.0.0.1:$port" -pid "$hpid" -metrics "http://127.0.0.1:$mport/metrics" "$@"
