#!/usr/bin/env bash
# test_observe_e2e.sh BUILD_DIR - observability end to end, over real verbs.
#
# A memory node (recstore-server, metrics endpoint on, tracing on with
# sampling 0 so that it records exactly the requests its client sampled)
# and recstore-bench (tracing on, RS_TRACE_SAMPLE below) as two processes:
#
#  1. /metrics is scraped with curl while the bench runs and once more while
#     the bench sits idle and connected at its end: every scrape parses, the
#     counters never go down, and the last one equals what the client says
#     it sent (requests and keys by type, no errors, a connection, rows served = keys of the client's GET and GET_OR_INIT).
#  2. Idle: node and client, connected and doing nothing, are each measured
#     over 10 s from /proc (scripts/idle-cpu.sh) and must stay under 1% of a
#     core; the figures are printed.
#  3. The client's and the node's JSONL trace files go to recstore-trace
#     --check: every node trace is matched by a client trace, the per-stage
#     table holds client.op, client.wait, server.total, server.apply and
#     server.index, and no trace breaks client.op >= client.wait >=
#     server.total >= server stage (to 1 us: durations are whole
#     microseconds, each truncated on its own).
#
# Exit 0 pass, 77 no RDMA device, anything else fails (with the logs; with
# RS_E2E_KEEP=DIR the traces, scrapes and logs are copied to DIR).
set -euo pipefail
. "$(dirname "$0")/../../scripts/sh-lib.sh"

rxe_test_args "$@"
top=$(cd "$(dirname "$0")/../.." && pwd)
sample=${RS_E2E_SAMPLE:-0.5}
d=$(mktemp -d "${TMPDIR:-/tmp}/rs-e2e-XXXXXX")
node_pid= bench_pid=
sh_dir=$d sh_logs="node.log bench.log report.txt" sh_pids="bench_pid node_pid"
fail_hook() {
  if [ -n "${RS_E2E_KEEP:-}" ]; then # a writable directory to keep the files in
    cp -r "$d" "$RS_E2E_KEEP/" && echo "files kept in $RS_E2E_KEEP/${d##*/}"
  fi
  echo "FAIL: $*" # again after the logs: the line a truncated log keeps
}
trap cleanup EXIT
ulimit -l unlimited 2>/dev/null || true

# Value of Prometheus series $2 (exact name and labels) in file $1; 0 when
# absent (a counter that never moved may not be rendered).
series() {
  awk -v s="$2" '$1 == s { v = $2 } END { printf "%.0f\n", v + 0 }' "$1"
}

# ---- the node ------------------------------------------------------------
for try in 1 2 3 4 5; do
  mport=$((20000 + (RANDOM * 7 + try * 131) % 30000))
  RS_TRACE=$d/node.jsonl RS_TRACE_SAMPLE=0 \
    RS_STAGE_FILE=$d/stages.txt RS_STAGE_INTERVAL_MS=500 \
    "$bin/recstore-server" --listen "$RS_RDMA_IP:0" --workers 2 \
    --metrics-port "$mport" >"$d/node.log" 2>&1 &
  node_pid=$!
  if await "$d/node.log" "metrics on port" 120 "$node_pid"; then
    break
  fi
  wait "$node_pid" 2>/dev/null || true
  node_pid=
  grep -q metrics "$d/node.log" || fail "node did not start"
  echo "metrics port $mport taken, trying another"
done
[ -n "$node_pid" ] || fail "no free metrics port"
addr=$(sed -n 's/.*listening on \(.*\)$/\1/p' "$d/node.log" | head -n 1)
url=http://127.0.0.1:$mport/metrics
echo "node pid $node_pid on $addr, metrics at $url"

# ---- the bench, scraped while it runs ---------------------------------------
RS_TRACE=$d/client.jsonl RS_TRACE_SAMPLE=$sample \
  "$bin/recstore-bench" --nodes "$addr" --tables 4 --dim 32 --batch 256 \
  --keys 2000 --iters 12 --server-pid "$node_pid" --idle 300 \
  >"$d/bench.log" 2>&1 &
bench_pid=$!
n=0
while ! grep -q "bench: idle, connected" "$d/bench.log"; do
  kill -0 "$bench_pid" 2>/dev/null || fail "bench exited early"
  n=$((n + 1))
  curl -sf --max-time 30 "$url" >"$d/scrape.$n" || fail "scrape $n failed"
  sleep 0.2
done
echo "scrapes while the bench ran: $n"
curl -sf --max-time 30 "$url" >"$d/final.prom" || fail "final scrape failed"
grep -q '^rs_build_info' "$d/final.prom" || fail "no rs_build_info in /metrics"

# counters only grow, scrape after scrape, up to the final one
types="get get_or_init put update delete"
prev=
for f in $(for ((i = 1; i <= n; i++)); do echo "$d/scrape.$i"; done) \
    "$d/final.prom"; do
  grep -q '^rs_build_info' "$f" || fail "scrape $f is not a metrics page"
  cur=$(series "$f" rs_keys_served_total)
  for t in $types; do
    cur="$cur $(series "$f" "rs_requests_total{type=\"$t\"}")"
  done
  if [ -n "$prev" ]; then
    awk -v a="$prev" -v b="$cur" 'BEGIN {
      n = split(a, x, " "); split(b, y, " ")
      for (i = 1; i <= n; i++) if (y[i] + 0 < x[i] + 0) exit 1 }' ||
      fail "a counter went down between scrapes: [$prev] -> [$cur]"
  fi
  prev=$cur
done
mid=0
for ((i = 1; i <= n; i++)); do
  k=$(series "$d/scrape.$i" rs_keys_served_total)
  [ "$k" -gt 0 ] && [ "$k" -lt "$(series "$d/final.prom" rs_keys_served_total)" ] &&
    mid=$((mid + 1))
done
echo "scrapes that caught the run in progress: $mid of $n"

# the last scrape against what the client sent
result() { sed -n "s/^result $1 //p" "$d/bench.log"; }
sum_keys=0
for t in $types; do
  want_r=$(result "client_requests_$t")
  want_k=$(result "client_keys_$t")
  [ -n "$want_r" ] && [ -n "$want_k" ] || fail "bench did not report $t"
  got_r=$(series "$d/final.prom" "rs_requests_total{type=\"$t\"}")
  got_k=$(series "$d/final.prom" "rs_batch_keys_sum{type=\"$t\"}")
  printf '  %-12s requests client %6s node %6s   keys client %8s node %8s\n' \
    "$t" "$want_r" "$got_r" "$want_k" "$got_k"
  [ "$got_r" = "$want_r" ] || fail "$t requests: node $got_r, client $want_r"
  [ "$got_k" = "$want_k" ] || fail "$t keys: node $got_k, client $want_k"
  case $t in get | get_or_init) sum_keys=$((sum_keys + want_k)) ;; esac
done
# rows served: every key of a GET or GET_OR_INIT (the bench reports none
# missing: it warmed every row)
grep -q ' 0 missing' "$d/bench.log" || fail "the bench saw missing keys"
grep ' missing' "$d/bench.log" | grep -qv ' 0 missing' && fail "the bench saw missing keys"
got=$(series "$d/final.prom" rs_keys_served_total)
[ "$got" = "$sum_keys" ] || fail "rs_keys_served_total $got, client asked for $sum_keys rows"
[ "$(result client_requests_update)" -gt 0 ] || fail "the bench sent no updates"
[ "$(result client_requests_get)" -gt 0 ] || fail "the bench sent no RPC gets"
errs=$(awk '/^rs_request_errors_total/ { s += $2 } END { printf "%.0f", s + 0 }' "$d/final.prom")
[ "$errs" = 0 ] || fail "the node counted $errs request errors"
conns=$(series "$d/final.prom" rs_connections)
[ "$conns" -ge 1 ] || fail "rs_connections is $conns with the client connected"
echo "metrics match the client: $sum_keys keys served, 0 errors, $conns connection(s)"

# ---- idle, connected ---------------------------------------------------------
sleep 1 # let the adaptive spin windows run out
bash "$top/scripts/idle-cpu.sh" -t "$node_pid" 10 >"$d/idle.node" &
in=$!
bash "$top/scripts/idle-cpu.sh" -t "$bench_pid" 10 >"$d/idle.client" &
ic=$!
wait "$in" || fail "measuring the idle node"
wait "$ic" || fail "measuring the idle client"
node_pct=$(head -n 1 "$d/idle.node")
client_pct=$(head -n 1 "$d/idle.client")
echo "idle node, client connected: $node_pct% of a core over 10 s"
tail -n +2 "$d/idle.node"
echo "idle client, connected: $client_pct% of a core over 10 s"
tail -n +2 "$d/idle.client"
awk -v p="$node_pct" 'BEGIN { exit !(p < 1.0) }' || fail "idle node at $node_pct%"
awk -v p="$client_pct" 'BEGIN { exit !(p < 1.0) }' || fail "idle client at $client_pct%"

# ---- stop both; the trace files are complete once they have closed ------------
# stop PID WHAT: SIGTERM, and the process must exit 0
stop() {
  local rc=0
  kill -TERM "$1"
  wait "$1" || rc=$?
  [ "$rc" = 0 ] || fail "$2 exit status $rc after SIGTERM"
}
stop "$bench_pid" bench
bench_pid=
grep -q "idle period ended (signal)" "$d/bench.log" || fail "bench did not end on the signal"
stop "$node_pid" node
node_pid=
grep -q "stopped" "$d/node.log" || fail "node did not stop cleanly"

# ---- the node's per-stage windows (RS_STAGE_FILE) -----------------------------
# the windows partition the node's requests: per RPC type, the counts of all
# lines add up to what the client sent; every line is well-formed
[ -s "$d/stages.txt" ] || fail "no stage file"
awk '$2 != "node" || $3 !~ /^stage=/ || $4 !~ /^count=[1-9][0-9]*$/ ||
     $5 !~ /^p50_ms=[0-9.]+$/ || $6 !~ /^p99_ms=[0-9.]+$/ { exit 1 }' \
  "$d/stages.txt" || fail "malformed stage line: $(head -n 3 "$d/stages.txt")"
windows=$(awk '{ print $1 }' "$d/stages.txt" | sort -u | wc -l)
for t in $types; do
  got=$(awk -v s="stage=rpc.$t" '$3 == s { sub(/count=/, "", $4); n += $4 }
        END { printf "%d", n }' "$d/stages.txt")
  want=$(result "client_requests_$t")
  [ "$got" = "$want" ] || fail "stage file: rpc.$t counts $got, client sent $want"
done
echo "stage file: $(wc -l <"$d/stages.txt") lines over $windows second(s), counts match the client"

# ---- the analyzer ----------------------------------------------------------
[ -s "$d/client.jsonl" ] || fail "no client trace file"
[ -s "$d/node.jsonl" ] || fail "no node trace file"
echo "trace lines: client $(wc -l <"$d/client.jsonl"), node $(wc -l <"$d/node.jsonl")"
rc=0
"$bin/recstore-trace" --check --tolerance 1 --slowest 2 --csv "$d/stages.csv" \
  "$d/client.jsonl" "$d/node.jsonl" >"$d/report.txt" || rc=$?
cat "$d/report.txt"
[ "$rc" = 0 ] || fail "recstore-trace --check exit status $rc"
grep -q "malformed lines 0, events dropped by writers 0" "$d/report.txt" ||
  fail "malformed or dropped trace lines"
for st in client.op client.wait server.total server.apply server.index; do
  c=$(awk -F, -v s="$st" '$1 != "group" && $2 == s { n += $3 } END { print n + 0 }' "$d/stages.csv")
  [ "$c" -gt 0 ] || fail "no $st events in the report"
done
line=$(grep "traces matched by id" "$d/report.txt") || fail "no network line"
matched=$(sed 's/.*: \([0-9]*\) traces matched.*/\1/' <<<"$line")
sonly=$(sed 's/.*client-only, \([0-9]*\) server-only.*/\1/' <<<"$line")
[ "$matched" -gt 0 ] || fail "no trace matched between client and node"
[ "$sonly" = 0 ] || fail "$sonly node traces without their client trace"
# every update the node traced is a checked, matched trace
updates=$(grep '"stage":"server.apply"' "$d/node.jsonl" |
  sed 's/.*"trace":"\([0-9a-f]*\)".*/\1/' | sort -u | wc -l)
[ "$updates" -gt 0 ] || fail "no update traced on the node"
checked=$(sed -n 's/^check: \([0-9]*\) traces checked, 0 violating.*/\1/p' "$d/report.txt")
[ -n "$checked" ] && [ "$checked" -ge "$updates" ] ||
  fail "check covered ${checked:-?} traces, $updates updates traced"
echo "ok: $matched matched traces, $updates updates among $checked checked, 0 violations"
