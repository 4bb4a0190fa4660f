# etcd-lib.sh - sourced by the main job and the rxe tests that need etcd.
#
# etcd_start DIR [TLS_DIR]: one etcd (Debian's etcd-server) with its data in
# DIR/etcd (tmpfs in the guest) on a free port; sets url and etcd_pid,
# prints the time to a healthy member; calls the caller's fail() when it
# cannot. With TLS_DIR (etcd_certs made it): https with client
# certificates (--client-cert-auth), tokens that live 1 s, and the lowest
# bcrypt cost for the test users' passwords (each authenticate hashes one;
# the default cost 10 takes seconds under the guest's emulation).
etcd_start() {
  local dir=$1 tls=${2:-} try port t0 scheme=http
  local -a sec=() cc=()
  etcd_bin=$(command -v etcd || true)
  [ -n "$etcd_bin" ] || fail "no etcd (scripts/install-deps.sh installs etcd-server)"
  if [ -n "$tls" ]; then
    scheme=https
    sec=(--cert-file "$tls/server.crt" --key-file "$tls/server.key"
      --trusted-ca-file "$tls/ca.crt" --client-cert-auth --auth-token-ttl 1
      --bcrypt-cost 4)
    cc=(--cacert "$tls/ca.crt" --cert "$tls/root.crt" --key "$tls/root.key")
  fi
  for try in 1 2 3; do
    port=$((20000 + (RANDOM * 7 + try * 131) % 30000))
    url=$scheme://127.0.0.1:$port
    t0=$(date +%s.%N)
    etcd_args=(--name t --data-dir "$dir/etcd"
      --listen-client-urls "$url" --advertise-client-urls "$url"
      --listen-peer-urls "http://127.0.0.1:$((port + 1))"
      --initial-advertise-peer-urls "http://127.0.0.1:$((port + 1))"
      --initial-cluster "t=http://127.0.0.1:$((port + 1))" "${sec[@]}")
    etcd_cc=("${cc[@]}") etcd_dir=$dir
    : >"$dir/etcd.log"
    etcd_run && break
    kill -KILL "$etcd_pid" 2>/dev/null || true
    wait "$etcd_pid" 2>/dev/null || true
    etcd_pid=
    grep -q "address already in use" "$dir/etcd.log" || fail "etcd did not start"
    rm -rf "$dir/etcd"
  done
  [ -n "$etcd_pid" ] || fail "no free port for etcd"
  echo "etcd $("$etcd_bin" --version | sed -n 's/etcd Version: //p') healthy at $url after $(elapsed "$t0") s"
}

# etcd_run: etcd as etcd_start set it up (etcd_args, its output added to
# DIR/etcd.log); sets etcd_pid; 0 once it answers healthy, 1 when it
# exits or stays unhealthy for 60 s.
etcd_run() {
  local i
  "$etcd_bin" "${etcd_args[@]}" >>"$etcd_dir/etcd.log" 2>&1 &
  etcd_pid=$!
  for ((i = 0; i < 600; i++)); do
    if curl -sf --max-time 2 "${etcd_cc[@]}" "$url/health" 2>/dev/null | grep -q '"health":"true"'; then
      return 0
    fi
    kill -0 "$etcd_pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# etcd_restart [SECONDS]: SIGKILL the etcd of etcd_start, leave it down
# SECONDS (0), start it again on the same data and port (its keys,
# revisions and leases as it last wrote them: a crash and a restart, not
# a restore), wait until it is healthy; fail otherwise. Its log goes on
# in DIR/etcd.log.
etcd_restart() {
  kill -KILL "$etcd_pid" 2>/dev/null || true
  wait "$etcd_pid" 2>/dev/null || true
  sleep "${1:-0}"
  etcd_run || fail "etcd did not come back after a restart"
}

# etcd_snapshot FILE: `etcdctl snapshot save` of the etcd of etcd_start
# (plain http only), as an operator's backup does.
etcd_snapshot() {
  ETCDCTL_API=3 etcdctl --endpoints "$url" snapshot save "$1" \
    >>"$etcd_dir/etcd.log" 2>&1 || fail "etcdctl snapshot save failed"
}

# etcd_restore FILE: an operator's restore from a snapshot: stop the etcd
# of etcd_start, `etcdctl snapshot restore` FILE into a fresh data
# directory in place of its own, and start it again on the same port.
# Its keys, revisions and leases are the snapshot's from then on.
etcd_restore() {
  local peer=http://127.0.0.1:$((${url##*:} + 1))
  kill -TERM "$etcd_pid" 2>/dev/null || true
  wait "$etcd_pid" 2>/dev/null || true
  rm -rf "$etcd_dir/etcd"
  ETCDCTL_API=3 etcdctl snapshot restore "$1" --name t \
    --data-dir "$etcd_dir/etcd" --initial-cluster "t=$peer" \
    --initial-advertise-peer-urls "$peer" >>"$etcd_dir/etcd.log" 2>&1 ||
    fail "etcdctl snapshot restore failed"
  etcd_run || fail "etcd did not start on the restored snapshot"
}

# etcd_certs DIR: a CA and, signed by it, the certificates etcd_start and
# the tests use (EC P-256, valid 1 day): server (for 127.0.0.1), and client
# certificates root, recstore and nobody. These have no common name: with
# authentication on, etcd 3.4's JSON gateway refuses a client certificate
# that has one ("CommonName of client sending a request against gateway
# will be ignored"); through the gateway a certificate admits the
# connection and the user comes from a password's token.
etcd_certs() {
  local dir=$1 n subj
  mkdir -p "$dir"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -days 1 -subj /CN=recstore-test-ca -keyout "$dir/ca.key" \
    -out "$dir/ca.crt" 2>/dev/null || fail "openssl: the CA"
  for n in server root recstore nobody; do
    subj="/O=recstore-test/OU=$n"
    [ $n != server ] || subj=/CN=server
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -subj "$subj" -keyout "$dir/$n.key" -out "$dir/$n.csr" 2>/dev/null ||
      fail "openssl: the key of $n"
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' \
      >"$dir/$n.ext"
    openssl x509 -req -in "$dir/$n.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
      -CAcreateserial -days 1 -extfile "$dir/$n.ext" -out "$dir/$n.crt" \
      2>/dev/null || fail "openssl: the certificate of $n"
  done
  chmod 600 "$dir"/*.key
}

# etcd_api PATH JSON: a call to the TLS etcd of etcd_start as root (its
# client certificate); prints the reply, fails on an error reply.
etcd_api() {
  local out
  out=$(curl -sS --max-time 10 --cacert "$etcd_tls/ca.crt" \
    --cert "$etcd_tls/root.crt" --key "$etcd_tls/root.key" \
    ${etcd_token:+-H "Authorization: $etcd_token"} \
    -X POST -d "$2" "$url$1") || fail "etcd $1: curl failed"
  case $out in *'"error"'*) fail "etcd $1: $out" ;; esac
  echo "$out"
}

# etcd_test_begin TAG N: the set-up of an rxe test of a cluster (after
# sh-lib.sh's rxe_test_args): its temporary directory d (tmpfs in the
# guest) with cleanup on exit (the logs *.log *.out *.txt, the pids in
# pids and etcd_pid), an etcd, N addresses for nodes in ips (the
# device's own N times without RS_RDMA_IPS) and the arrays pid and addr.
etcd_test_begin() {
  local i
  d=$(mktemp -d "${TMPDIR:-/tmp}/rs-$1-XXXXXX")
  etcd_pid= pids=
  t_start=$(date +%s.%N)
  sh_dir=$d sh_logs="*.log *.out *.txt" sh_pids="pids etcd_pid"
  trap cleanup EXIT
  ulimit -l unlimited 2>/dev/null || true
  etcd_start "$d"
  # a hang shows its logs 30 s before ctest's timeout would kill it mute
  if [ "${RS_TEST_TIMEOUT:-0}" -gt 60 ]; then
    declare -F watchdog_hook >/dev/null || watchdog_hook() { etcd_hang_report; }
    sh_watchdog $((RS_TEST_TIMEOUT - 30 - SECONDS)) # SECONDS: since the test began
  fi
  ips=($RS_RDMA_IP ${RS_RDMA_IPS:-})
  if [ ${#ips[@]} -lt "$2" ]; then
    ips=()
    for ((i = 0; i < $2; i++)); do ips+=("$RS_RDMA_IP"); done
  fi
  declare -gA pid=() addr=()
}

# etcd_hang_report: what a hung cluster test was waiting on (the
# watchdog's default hook; it runs in a process forked at the start, so
# it finds the nodes from their logs): the configuration, and each
# node's replication and copy counters.
etcd_hang_report() {
  local f a
  "$bin/recstore-ctl" --etcd "$url" --cluster t cluster 2>&1 | head -n 40
  for f in "$d"/n*.log; do
    a=$(sed -n 's/^recstore-server: listening on //p' "$f" 2>/dev/null | tail -n 1)
    [ -n "$a" ] || continue
    echo "--- $(basename "$f" .log) ($a): counters"
    timeout 10 "$bin/recstore-ctl" -s "$a" stats 2>&1 |
      grep -E "epoch|repl|copy|wait|busy|refused" | head -n 40 || true
  done
}

# etcd_await_active N NAME...: wait (60 s) until cluster "t" has N
# active members, set `epoch` to its configuration's, and wait (30 s
# each) until every node NAME logged that it adopted that epoch; fail
# otherwise. The recstore-ctl output is in $d/active-N.out.
etcd_await_active() {
  local want=$1 n
  shift
  "$bin/recstore-ctl" --etcd "$url" --cluster t cluster --until-active \
    "$want" --timeout 60 >"$d/active-$want.out" 2>&1 ||
    fail "the cluster never had $want active members"
  epoch=$(sed -n 's/^cluster t: epoch \([0-9]*\),.*/\1/p' "$d/active-$want.out")
  for n in "$@"; do
    await "$d/$n.log" "repl: epoch $epoch adopted" 30 "${pid[$n]}" ||
      fail "$n did not adopt epoch $epoch"
  done
}

# The memory nodes of a test cluster "t" on the etcd of etcd_start (r 2,
# lease 3 s; etcd_replicas overrides r): the caller declares `declare -A pid addr` and sets d, bin,
# pids and etcd_initial (the first configuration's member count); wait
# for them with node_await (sh-lib.sh; sh_dir=$d).
# etcd_node_start I IP [EXTRA JSON FIELDS]: node nI (mem-I), its log nI.log;
# etcd_workers (default 2): its workers.
etcd_node_start() {
  local n=n$1
  cat >"$d/$n.json" <<EOT
{"name": "mem-$1", "listen": {"addr": "$2", "port": 0},
 "workers": ${etcd_workers:-2}, "storage": {"size": "32M"}, ${3:-}
 "coord": {"endpoints": ["$url"], "cluster": "t", "lease_ms": 3000,
           "replicas": ${etcd_replicas:-2}, "initial_members": $etcd_initial}}
EOT
  # RS_TEST_NET_ID: its name for the link-cutting hook (src/common/netcut.h),
  # which is off unless RS_TEST_NET_CUT names a file
  RS_TEST_NET_ID=mem-$1 "$bin/recstore-server" -c "$d/$n.json" >"$d/$n.log" 2>&1 &
  pid[$n]=$!
  pids="$pids $!"
}
