#!/usr/bin/env bash
# replay.sh BINARY PORT [herald flags]: starts herald BINARY on 127.0.0.1:PORT (metrics on
# PORT+1), publishes for 20 s with `BINARY bench publish` (the herald-bench beside BINARY; an older herald's built-in one) (8 publishers, every request signed
# afresh), and prints the server's RSS, descriptors and goroutines before, at their peak and
# after. Run it with and without --rest-replay-protection to see what remembering costs.
bin=$1 port=$2; shift 2; mport=$((port+1))
# The clients come from a few loopback addresses: the per-address connection limit is off, as in
# the figures recorded with this script (a flag given may turn it on again).
"$bin" --port $port --metrics-port $mport --log-level warn --connection-rate-per-ip 0 "$@" 2>/dev/null &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
rss() { awk '/^VmRSS/ {print $2}' /proc/$pid/status; }
fds() { ls /proc/$pid/fd | wc -l; }
gor() { curl -s -m 1 "http://127.0.0.1:$mport/metrics" | awk '/^go_goroutines / {print $2}'; }
calls() { curl -s -m 1 "http://127.0.0.1:$mport/metrics" | awk '/^herald_http_calls_received_total/ {s+=$2} END {print s}'; }
snap() { printf '%-8s RSS %6.1f MiB  fds %5d  goroutines %4s  REST calls %s\n' "$1" "$(echo "$(rss)/1024" | bc -l)" "$(fds)" "$(gor)" "$(calls)"; }
snap before
"$bin" bench publish --ws ws://127.0.0.1:$port --rest http://127.0.0.1:$port --publishers 8 --channels 100 --duration 20s --quiet > /tmp/slowbody-replay.txt 2>&1 &
apid=$!
pr=0 pf=0 pg=0
while kill -0 $apid 2>/dev/null; do r=$(rss) f=$(fds) g=$(gor); ((r>pr)) && pr=$r; ((f>pf)) && pf=$f; [ -n "$g" ] && ((g>pg)) && pg=$g; sleep 0.2; done
printf '%-8s RSS %6.1f MiB  fds %5d  goroutines %4d\n' peak "$(echo "$pr/1024" | bc -l)" $pf $pg
sleep 3
snap after
grep -iE "accepted|refused|events/s|status" /tmp/slowbody-replay.txt | head -5
kill $pid
