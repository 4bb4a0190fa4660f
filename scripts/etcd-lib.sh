# etcd-lib.sh - sourced by the main job and the rxe tests that need etcd.
#
# etcd_start DIR: one etcd (Debian's etcd-server) with its data in DIR/etcd
# (tmpfs in the guest) on a free port; sets url and etcd_pid, prints the
# time to a healthy member; calls the caller's fail() when it cannot.
etcd_start() {
  local dir=$1 try port i ok t0
  etcd_bin=$(command -v etcd || true)
  [ -n "$etcd_bin" ] || fail "no etcd (scripts/install-deps.sh installs etcd-server)"
  for try in 1 2 3; do
    port=$((20000 + (RANDOM * 7 + try * 131) % 30000))
    url=http://127.0.0.1:$port
    t0=$(date +%s.%N)
    "$etcd_bin" --name t --data-dir "$dir/etcd" \
      --listen-client-urls "$url" --advertise-client-urls "$url" \
      --listen-peer-urls "http://127.0.0.1:$((port + 1))" \
      --initial-advertise-peer-urls "http://127.0.0.1:$((port + 1))" \
      --initial-cluster "t=http://127.0.0.1:$((port + 1))" \
      >"$dir/etcd.log" 2>&1 &
    etcd_pid=$!
    ok=
    for ((i = 0; i < 600; i++)); do
      if curl -sf --max-time 2 "$url/health" 2>/dev/null | grep -q '"health":"true"'; then
        ok=1
        break
      fi
      kill -0 "$etcd_pid" 2>/dev/null || break
      sleep 0.1
    done
    [ -n "$ok" ] && break
    kill -KILL "$etcd_pid" 2>/dev/null || true
    wait "$etcd_pid" 2>/dev/null || true
    etcd_pid=
    grep -q "address already in use" "$dir/etcd.log" || fail "etcd did not start"
    rm -rf "$dir/etcd"
  done
  [ -n "$etcd_pid" ] || fail "no free port for etcd"
  echo "etcd $("$etcd_bin" --version | sed -n 's/etcd Version: //p') healthy at $url after $(elapsed "$t0") s"
}
