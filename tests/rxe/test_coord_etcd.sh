#!/usr/bin/env bash
# test_coord_etcd.sh BUILD_DIR - membership in etcd, end to end, over real
# verbs (docs/replication.md).
#
#  1. One etcd (Debian's etcd-server) on tmpfs; the time to a healthy
#     member is printed.
#  2. The etcd backend passes the conformance cases of the coordination
#     interface (tests/unit/coord_cases.h, the same the in-memory backend
#     passes: tests/rxe/coord_etcd_conformance.c).
#  3. Two memory nodes with a "coord" section (lease 3 s, r 2) register;
#     `recstore-ctl cluster` shows both active in one configuration.
#  4. The decider node is SIGKILLed (no clean leave): after its lease
#     expires the other node takes the decider key and writes the next
#     configuration: epoch + 1, the dead node down, the survivor the only
#     active member and primary of the whole ring. The time from the kill
#     to that configuration is printed.
#  5. etcd is stopped: the survivor keeps serving (recstore-bench --verify
#     writes rows and reads them back by RDMA READ and by RPC), logs the
#     outage once rather than per retry, and stops cleanly on SIGTERM.
#
# Exit 0 pass, 77 no RDMA device, anything else fails (with the logs).
set -euo pipefail
. "$(dirname "$0")/../../scripts/sh-lib.sh"

rxe_test_args "$@"
etcd_bin=$(command -v etcd || true)
[ -n "$etcd_bin" ] || { echo "FAIL: no etcd (scripts/install-deps.sh installs etcd-server)"; exit 1; }
d=$(mktemp -d "${TMPDIR:-/tmp}/rs-coord-XXXXXX") # tmpfs in the guest
etcd_pid= n1_pid= n2_pid=
t_start=$(date +%s.%N)
sh_dir=$d sh_logs="*.log *.out" sh_tail=30 sh_pids="n1_pid n2_pid etcd_pid"
trap cleanup EXIT
ulimit -l unlimited 2>/dev/null || true

# ---- 1. etcd on tmpfs ----------------------------------------------------
. "$(dirname "$0")/../../scripts/etcd-lib.sh"
etcd_start "$d"
# ---- 2. the conformance cases ----------------------------------------------
t0=$(date +%s.%N)
"$bin/tests/coord_etcd_conformance" "$url" >"$d/conformance.out" 2>&1 ||
  fail "conformance cases against etcd"
grep -q "PASSED" "$d/conformance.out" || fail "conformance: no PASSED line"
echo "conformance: $(grep -c '^\[       OK' "$d/conformance.out") cases passed in $(elapsed "$t0") s"

# ---- 3. two nodes register -----------------------------------------------------
ips=(${RS_RDMA_IPS:-})
ip2=${ips[0]:-$RS_RDMA_IP}
node_conf() { # NAME IP
  cat >"$d/$1.json" <<EOF
{"name": "$1", "listen": {"addr": "$2", "port": 0}, "workers": 1,
 "storage": {"size": "32M"},
 "coord": {"endpoints": ["$url"], "cluster": "t", "lease_ms": 3000,
           "replicas": 2, "initial_members": 2}}
EOF
}
node_conf n1 "$RS_RDMA_IP"
node_conf n2 "$ip2"
"$bin/recstore-server" -c "$d/n1.json" >"$d/n1.log" 2>&1 &
n1_pid=$!
"$bin/recstore-server" -c "$d/n2.json" >"$d/n2.log" 2>&1 &
n2_pid=$!
await "$d/n1.log" "listening on" 120 "$n1_pid" || fail "n1 did not start"
await "$d/n2.log" "listening on" 120 "$n2_pid" || fail "n2 did not start"
ctl() { "$bin/recstore-ctl" --etcd "$url" --cluster t cluster "$@"; }
ctl --until-active 2 --timeout 60 >"$d/two.out" 2>&1 ||
  fail "the configuration never had both nodes active"
cat "$d/two.out"
grep -Eq '^  n1 +[0-9.]+:[0-9]+ +active .* registered$' "$d/two.out" || fail "n1 not active"
grep -Eq '^  n2 +[0-9.]+:[0-9]+ +active .* registered$' "$d/two.out" || fail "n2 not active"
epoch=$(sed -n 's/^cluster t: epoch \([0-9]*\),.*/\1/p' "$d/two.out")
decider=$(sed -n 's/^decider: //p' "$d/two.out")
[ -n "$epoch" ] || fail "no epoch"
case $decider in
  n1) victim=n1 victim_pid=$n1_pid survivor=n2 ;;
  n2) victim=n2 victim_pid=$n2_pid survivor=n1 ;;
  *) fail "decider '$decider' is neither node" ;;
esac
survivor_addr=$(sed -n 's/.*listening on \(.*\)$/\1/p' "$d/$survivor.log" | head -n 1)
grep -q "r 2," "$d/two.out" || fail "r is not 2"

# ---- 4. the decider dies ---------------------------------------------------------
t0=$(date +%s.%N)
kill -KILL "$victim_pid"
wait "$victim_pid" 2>/dev/null || true
if [ "$victim" = n1 ]; then n1_pid=; else n2_pid=; fi
ctl --until-epoch $((epoch + 1)) --timeout 60 >"$d/after.out" 2>&1 ||
  fail "no configuration after the decider $victim died"
took=$(elapsed "$t0")
cat "$d/after.out"
grep -q "^cluster t: epoch $((epoch + 1))," "$d/after.out" ||
  fail "expected epoch $((epoch + 1)) exactly"
grep -Eq "^  $victim +[0-9.:]+ +down +since epoch $((epoch + 1)) +not registered$" "$d/after.out" ||
  fail "$victim is not down in epoch $((epoch + 1))"
grep -Eq "^  $survivor +[0-9.:]+ +active .* registered$" "$d/after.out" ||
  fail "$survivor is not active"
grep -q "^decider: $survivor$" "$d/after.out" || fail "$survivor did not take the decider key"
grep -Eq "^  $survivor +primary of 100.0% of the ring, replica of 100.0%" "$d/after.out" ||
  fail "$survivor does not hold the whole ring"
echo "failover: $victim SIGKILLed at epoch $epoch, epoch $((epoch + 1)) without it after $took s (lease 3 s)"

# ---- 5. etcd goes away; the node serves on ------------------------------------
kill -TERM "$etcd_pid"
wait "$etcd_pid" 2>/dev/null || true
etcd_pid=
t0=$(date +%s.%N)
"$bin/recstore-bench" --nodes "$survivor_addr" --verify --tables 1 --dim 8 \
  --keys 64 >"$d/verify.out" 2>&1 || fail "the node did not serve with etcd down"
echo "with etcd down: recstore-bench --verify passed against $survivor in $(elapsed "$t0") s"
sleep 2 # a few more failed retries of the agent
kill -0 "${n1_pid:-$n2_pid}" || fail "the survivor died with etcd down"
nfail=$(grep -c "coord: .*attempt [0-9]* failed" "$d/$survivor.log" || true)
[ "$nfail" -ge 1 ] || fail "the outage was not logged"
[ "$nfail" -le 2 ] || fail "the outage was logged $nfail times (rate limit)"
spid=${n1_pid:-$n2_pid}
rc=0
kill -TERM "$spid"
wait "$spid" || rc=$?
if [ "$survivor" = n1 ]; then n1_pid=; else n2_pid=; fi
[ "$rc" = 0 ] || fail "survivor exit status $rc after SIGTERM"
grep -q "stopped" "$d/$survivor.log" || fail "the survivor did not stop cleanly"
for n in n1 n2; do
  echo "--- $n's coordination log"
  grep "coord:" "$d/$n.log" | sed 's/^recstore-server: coord: /  /'
done
echo "ok: whole test $(elapsed "$t_start") s"
