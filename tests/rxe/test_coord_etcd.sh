#!/usr/bin/env bash
# test_coord_etcd.sh BUILD_DIR - membership in etcd, end to end, over real
# verbs (docs/replication.md).
#
#  1. One etcd (Debian's etcd-server) on tmpfs; the time to a healthy
#     member is printed.
#  2. The etcd backend passes the conformance cases of the coordination
#     interface (tests/lib/coord_cases.c, the same the in-memory backend
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
#     outage once rather than per retry, and stops cleanly on SIGTERM;
#     recstore-ctl drain retries the unreachable etcd until its timeout,
#     then fails with the store's error.
#  6. A second etcd over https with client certificates and
#     authentication (a CA and certificates made with openssl; users root
#     and recstore, the latter with rights on /t/ and /recstore/ only;
#     tokens live 1 s): the conformance cases pass as recstore (password
#     and certificate), and the refusals and the token renewal of its
#     `security` case hold; a node whose coord section names the CA, its
#     certificate and recstore's password file registers, and
#     recstore-ctl with the same settings shows it active; plain http and
#     a client without a certificate are refused.
#
# Exit 0 pass, 77 no RDMA device, anything else fails (with the logs).
set -euo pipefail
. "$(dirname "$0")/../../scripts/sh-lib.sh"

rxe_test_args "$@"
if grep -q "^RS_SANITIZE:[A-Z]*=thread$" "$bin/CMakeCache.txt" 2>/dev/null; then
  # the test command's budget (43 s here): the etcd backend's threads
  # (the agent) run under TSan in test_repl and test_members
  echo "coord_etcd: skipped in the TSan tree"
  exit 77
fi
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
# a drain command rides out an unreachable etcd until its timeout (it
# tries again), then fails with the store's error
if "$bin/recstore-ctl" --etcd "$url" --cluster t drain "$survivor" --no-wait \
  --timeout 2 >"$d/drain-down.out" 2>&1; then
  cat "$d/drain-down.out"; fail "a drain with etcd down succeeded"
fi
grep -q "trying again" "$d/drain-down.out" && grep -q "recstore-ctl: drain $survivor: etcd" "$d/drain-down.out" ||
  { cat "$d/drain-down.out"; fail "the drain did not retry the unreachable etcd, then fail with its error"; }
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
# ---- 6. etcd over https, client certificates, authentication --------------------
t0=$(date +%s.%N)
etcd_tls=$d/tls
etcd_certs "$etcd_tls"
mkdir -p "$d/sec"
etcd_start "$d/sec" "$etcd_tls"
b64() { printf '%s' "$1" | base64 -w0; }
printf 'recstore-password-for-tests\n' >"$d/rs.pw"
chmod 600 "$d/rs.pw"
etcd_api /v3/auth/role/add '{"name":"root"}' >/dev/null
etcd_api /v3/auth/user/add '{"name":"root","password":"root-password-for-tests"}' >/dev/null
etcd_api /v3/auth/user/grant '{"user":"root","role":"root"}' >/dev/null
etcd_api /v3/auth/role/add '{"name":"rs"}' >/dev/null
for p in /t/ /recstore/; do
  end=${p%/}0 # the prefix's range end: its last byte ('/') + 1
  etcd_api /v3/auth/role/grant "{\"name\":\"rs\",\"perm\":{\"permType\":\"READWRITE\",\"key\":\"$(b64 "$p")\",\"range_end\":\"$(b64 "$end")\"}}" >/dev/null
done
etcd_api /v3/auth/user/add '{"name":"recstore","password":"recstore-password-for-tests"}' >/dev/null
etcd_api /v3/auth/user/grant '{"user":"recstore","role":"rs"}' >/dev/null
etcd_api /v3/auth/enable '{}' >/dev/null
echo "etcd with TLS and authentication set up in $(elapsed "$t0") s"
export RS_ETCD_CA=$etcd_tls/ca.crt RS_ETCD_CERT=$etcd_tls/recstore.crt \
  RS_ETCD_KEY=$etcd_tls/recstore.key RS_ETCD_USER=recstore \
  RS_ETCD_PASSWORD_FILE=$d/rs.pw
t0=$(date +%s.%N)
"$bin/tests/coord_etcd_conformance" "$url" >"$d/conformance-tls.out" 2>&1 ||
  fail "conformance cases against etcd with TLS and authentication"
grep -q "PASSED" "$d/conformance-tls.out" || fail "conformance (TLS): no PASSED line"
grep -q "^\[       OK \] security" "$d/conformance-tls.out" ||
  fail "conformance (TLS): the security case did not run"
echo "conformance over https as user recstore: $(grep -c '^\[       OK' "$d/conformance-tls.out") cases passed in $(elapsed "$t0") s"
cat >"$d/n3.json" <<EOT
{"name": "n3", "listen": {"addr": "$RS_RDMA_IP", "port": 0}, "workers": 1,
 "storage": {"size": "32M"},
 "coord": {"endpoints": ["$url"], "cluster": "s", "lease_ms": 3000,
           "replicas": 1, "user": "recstore", "password_file": "$d/rs.pw",
           "tls": {"ca_file": "$RS_ETCD_CA", "cert_file": "$RS_ETCD_CERT",
                   "key_file": "$RS_ETCD_KEY"}}}
EOT
"$bin/recstore-server" -c "$d/n3.json" >"$d/n3.log" 2>&1 &
n1_pid=$!
await "$d/n3.log" "listening on" 120 "$n1_pid" || fail "n3 did not start"
"$bin/recstore-ctl" --etcd "$url" --cluster s cluster --until-active 1 \
  --timeout 60 >"$d/sec.out" 2>&1 || { cat "$d/sec.out"; fail "n3 never became active over https"; }
grep -Eq '^  n3 +[0-9.]+:[0-9]+ +active ' "$d/sec.out" || fail "n3 not active"
grep -q "coord: member 'n3' of cluster 's' through https://.* (https, client certificate, etcd user recstore)" "$d/n3.log" ||
  fail "n3 did not log how it reaches etcd"
# the same etcd refuses plain http, and a client without a certificate
if curl -sf --max-time 5 "http://${url#https://}/health" >/dev/null 2>&1; then
  fail "etcd answered plain http"
fi
if env -u RS_ETCD_CERT -u RS_ETCD_KEY -u RS_ETCD_USER -u RS_ETCD_PASSWORD_FILE \
  "$bin/recstore-ctl" --etcd "$url" --cluster s cluster >"$d/nocred.out" 2>&1; then
  fail "recstore-ctl without a certificate read the configuration"
fi
kill -TERM "$n1_pid"
wait "$n1_pid" || fail "n3 exit status after SIGTERM"
n1_pid=
echo "https etcd: a node registered with a certificate and a password; refused without"
echo "ok: whole test $(elapsed "$t_start") s"
