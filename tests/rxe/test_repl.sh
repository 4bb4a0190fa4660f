#!/usr/bin/env bash
# test_repl.sh BUILD_DIR - replication and failover over real verbs
# (docs/replication.md).
#
#  1. One etcd on tmpfs; three memory nodes (r 2, an initial cluster of 3,
#     lease 3 s) form epoch 1 with all three active.
#  2. Two clients stream UPDATEs of every key (SGD, lr 1, gradient -1: a
#     row counts the steps applied to it) and a third reads every key in a
#     loop (at any ready replica: it must READ some at a backup), all
#     through the cluster's seeds; each writer keeps per key the
#     steps acknowledged and the ones whose outcome it does not know.
#  3. One node is SIGKILLed mid-stream. The writers and the reader carry
#     on: they refresh the configuration from the survivors and resend;
#     the reader READs the keys it READ at the dead node at their other
#     replica at once (counted). The gap in acknowledged writes and in
#     reads is printed.
#  4. After the stream: every key's row lies in [acknowledged, acknowledged
#     + uncertain] (no acknowledged step lost; none applied twice beyond
#     the calls that failed; the client resends, so in practice every row
#     is exact), the reader never saw a row go back by more than the
#     unacknowledged steps in flight, and both survivors
#     hold every row bit for bit the same. A tagged UPDATE sent twice
#     moves its row once (exactly-once records). Gets whose read lease a
#     test hook ends after their READs renew it and keep the READs.
#  5. The surviving decider is SIGSTOPped past its lease: the last node
#     is promoted alone. Two clients that only read (so learn nothing
#     from writes) READ a key at the paused node, one as the key's primary,
#     one as its backup, again and again, and once the store acknowledged
#     a step of the key without it: they see the step (read lease; the
#     primary's hold on a key whose replica set lost a member), not the
#     paused node's memory, which still answers READs. SIGCONT: an UPDATE
#     in the old epoch sent straight
#     to the resumed node is refused (RS_E_EPOCH) and the row the cluster
#     serves does not move; the node comes back as joining, not active.
#  6. It is SIGKILLed; under two writers and a reader a new node (mem-4)
#     joins, copies its ranges from the last one (docs/replication.md,
#     "Copying ranges") while writes of them are forwarded to it, and
#     becomes active: every row is exact and bit-identical on both, and
#     an exactly-once call applied before the join and resent after it is
#     not applied again by the new node (its records came with the
#     copy). Then
#     the new node, primary of half the keys, is SIGKILLed under writes:
#     still none lost, none applied twice.
#  7. Three more nodes join the survivor; under two writers and a reader
#     the survivor and one of the new nodes are drained at once, by two
#     commands (recstore-ctl drain, docs/replication.md, "Removing a
#     node"): they leave only after the two others copied the ranges
#     they held while writes of them were forwarded to them (the race
#     checked in their logs); no writer call fails, every row is exact
#     and bit-identical on the two, and the drained nodes say so and
#     stop cleanly.
#
# Exit 0 pass, 77 no RDMA device, anything else fails (with the logs).
set -euo pipefail
. "$(dirname "$0")/../../scripts/sh-lib.sh"

rxe_test_args "$@"
drv=$bin/tests/repl_driver
# ---- 1. etcd and three nodes ---------------------------------------------------
. "$(dirname "$0")/../../scripts/etcd-lib.sh"
etcd_test_begin repl 3
etcd_initial=3
node_start() { etcd_node_start "$@"; }
for i in 1 2 3; do
  node_start $i "${ips[$((i - 1))]}"
done
node_await n1 n2 n3
ctl() { "$bin/recstore-ctl" --etcd "$url" --cluster t cluster "$@"; }
ctl --until-active 3 --timeout 60 >"$d/three.out" 2>&1 ||
  fail "the configuration never had the three nodes active"
cat "$d/three.out"
epoch=$(sed -n 's/^cluster t: epoch \([0-9]*\),.*/\1/p' "$d/three.out")
for n in n1 n2 n3; do
  await "$d/$n.log" "repl: epoch $epoch adopted" 30 "${pid[$n]}" ||
    fail "$n did not adopt epoch $epoch"
done
seeds="${addr[n1]},${addr[n2]},${addr[n3]}"

# ---- 2. the workload -------------------------------------------------------------
echo "step 2 at $(elapsed "$t_start") s"
"$drv" init "$seeds" >"$d/init.txt" 2>&1 || fail "init"
for w in w1 w2; do
  "$drv" stream "$seeds" "$d/stop" "$d/$w.keys" >"$d/$w.txt" 2>&1 &
  pids="$pids $!"
  eval "${w}_pid=$!"
done
"$drv" read "$seeds" "$d/stop" "$d/reader.keys" >"$d/reader.txt" 2>&1 &
rd_pid=$!
pids="$pids $!"
# every client streams (sanitizer builds start slowly) before the kill
for f in w1.keys w2.keys reader.keys; do
  for ((i = 0; i < 1200; i++)); do
    [ -e "$d/$f.ready" ] && break
    sleep 0.1
  done
  [ -e "$d/$f.ready" ] || fail "${f%.keys} did not start streaming"
done
sleep 1

# ---- 3. a node dies ---------------------------------------------------------------
echo "step 3 at $(elapsed "$t_start") s"
victim=n2
t0=$(date +%s.%N)
kill -KILL "${pid[$victim]}"
ctl --until-epoch $((epoch + 1)) --timeout 60 >"$d/after.out" 2>&1 ||
  fail "no configuration after $victim died"
took=$(elapsed "$t0")
cat "$d/after.out"
grep -Eq "^  mem-${victim#n} +[0-9.:]+ +down " "$d/after.out" || fail "$victim is not down"
sleep 4 # the stream goes on in the new configuration
touch "$d/stop"
rc=0
wait "$w1_pid" || rc=$?
[ "$rc" = 0 ] || fail "writer 1 exit status $rc"
wait "$w2_pid" || rc=$?
[ "$rc" = 0 ] || fail "writer 2 exit status $rc"
wait "$rd_pid" || rc=$?
[ "$rc" = 0 ] || fail "the reader saw rows go back (exit status $rc)"
cat "$d/w1.txt" "$d/w2.txt" "$d/reader.txt"
# replica reads: the reader READ keys at their backups too
grep -Eq "[1-9][0-9]* keys READ at a backup" "$d/reader.txt" ||
  fail "the reader READ no key at a backup (replica reads)"
# the keys the reader READ at the dead node moved to their other replica
# at once (not after the new configuration). That needs its first READ
# at the dead node to fail (after the transport's retries) before the
# reader learns the next configuration. A lease that ran out while the
# READ failed no longer sends the call to the RPC: a CONFIG round renews
# it for the same epoch and the failed keys are READ at their other
# replica (docs/replication.md, "A lease renewed after the READs"; before
# that, a release run in CI on a loaded host failed here with 0 keys).
# In the sanitizer trees the reader runs several times slower and the
# next configuration may come first: asserted in the release tree,
# printed in the others (the placement itself: test_client_route,
# reader_avoid)
if grep -Eq "^RS_SANITIZE:[A-Z]*=(ON|thread)$" "$bin/CMakeCache.txt" 2>/dev/null; then
  grep -Eo "[0-9]+ keys READ at another replica after a failure" "$d/reader.txt" || true
else
  grep -Eq "[1-9][0-9]* keys READ at another replica after a failure" "$d/reader.txt" ||
    fail "the reader's keys at the dead node were not READ at another replica"
fi
for w in w1 w2; do
  grep -q "failed" "$d/$w.txt" || fail "$w printed no summary"
  # the kill must really have interrupted the stream: keys were resent
  grep -Eq "configuration refreshes, [1-9][0-9]* keys resent" "$d/$w.txt" ||
    fail "$w resent no key: the failover did not touch the stream"
done
echo "failover: $victim SIGKILLed at epoch $epoch, epoch $((epoch + 1)) without it after $took s (lease 3 s)"

# ---- 4. nothing lost, nothing doubled, replicas identical -------------------------
echo "step 4 at $(elapsed "$t_start") s"
"$drv" check "$seeds" "${addr[n1]},${addr[n3]}" "$d/w1.keys" "$d/w2.keys" \
  >"$d/check.txt" 2>&1 || fail "check"
cat "$d/check.txt"
"$drv" once "$seeds" >"$d/once.txt" 2>&1 || fail "exactly-once resend"
cat "$d/once.txt"
# a read lease that ends while a get's READs are in flight is renewed by
# one CONFIG round, and the READs stand (a test hook ends it every call)
"$drv" renew "$seeds" >"$d/renew.txt" 2>&1 || { cat "$d/renew.txt"; fail "lease renewal"; }
cat "$d/renew.txt"
"$bin/recstore-ctl" -s "$seeds" stats >"$d/stats.txt" 2>&1 || true
grep -E "^node|repl\.(epoch|forwarded|failed|refused|applied|parallel)|once\.(records|dedup)" "$d/stats.txt" || true
# a primary's keys have either other node as their backup (3 nodes, r 2):
# a write's REPLs to both were in flight at once
grep -Eq "repl\.parallel_repls [1-9]" "$d/stats.txt" ||
  fail "no write had REPLs to two backups in flight at once"
for n in n1 n3; do
  grep -q "repl: epoch $((epoch + 1)) adopted" "$d/$n.log" ||
    fail "$n did not adopt epoch $((epoch + 1))"
done
# ---- 5. a paused node acknowledges nothing in its old epoch -----------------
echo "step 5 at $(elapsed "$t_start") s"
e2=$((epoch + 1))
decider=$(ctl | sed -n 's/^decider: //p')
case $decider in
  mem-1) paused=n1 other=n3 ;;
  mem-3) paused=n3 other=n1 ;;
  *) fail "decider '$decider' is not a survivor" ;;
esac
# two readers that only read, of a key they READ at the node to be paused:
# as its primary, and as its backup (replica reads)
for role in primary backup; do
  "$drv" staleread "$seeds" "${addr[$paused]}" $role "$d/trigger-$role" \
    "$d/sr-$role.txt" >"$d/sr-$role.log" 2>&1 &
  pids="$pids $!"
  eval "sr_$role=$!"
done
for role in primary backup; do
  for ((i = 0; i < 600; i++)); do
    [ -s "$d/sr-$role.txt.ready" ] && break
    sleep 0.1
  done
  [ -s "$d/sr-$role.txt.ready" ] || { cat "$d/sr-$role.log"; fail "the read-only reader ($role) did not start"; }
done
t0=$(date +%s.%N)
kill -STOP "${pid[$paused]}"
ctl --until-epoch $((e2 + 1)) --timeout 60 >"$d/paused.out" 2>&1 ||
  fail "no configuration after $paused was paused"
grep -Eq "^  mem-${paused#n} +[0-9.:]+ +down " "$d/paused.out" ||
  fail "$paused is not down while paused"
echo "pause: $paused SIGSTOPped at epoch $e2, epoch $((e2 + 1)) without it after $(elapsed "$t0") s"
# the store acknowledges a step of each reader's key without the paused
# node, and the reader READs it at once: its lease may still be on epoch
# $e2, and it must not READ the paused node's stale row (the backup's
# first: its key's primary stays, and only its hold keeps the step from
# being acknowledged while the lease lasts)
# (through the node left, as its only seed: a client opening with the
# paused node as its first seed would wait its whole timeout for it)
for role in backup primary; do
  "$drv" bump "${addr[$other]}" "$(cat "$d/sr-$role.txt.ready")" "$d/bump-$role.keys" \
    >"$d/bump-$role.txt" 2>&1 || fail "a step of the $role reader's key"
  cat "$d/bump-$role.txt"
  touch "$d/trigger-$role"
  # its verdict; it exits once the paused node is back (closing a
  # connection to a stopped node waits for it)
  await "$d/sr-$role.log" "^staleread: " 120 "$(eval echo "\$sr_$role")" ||
    { cat "$d/sr-$role.log"; fail "the read-only reader ($role) gave no verdict"; }
  grep "^staleread: " "$d/sr-$role.log"
  grep -q "^staleread: .*(seen;" "$d/sr-$role.log" ||
    fail "a read-only client read a stale row from the paused node ($role; read lease)"
done
kill -CONT "${pid[$paused]}"
for role in backup primary; do
  rc=0
  wait "$(eval echo "\$sr_$role")" || rc=$?
  [ "$rc" = 0 ] || { cat "$d/sr-$role.log"; fail "the read-only reader ($role) exit status $rc"; }
done
"$drv" stale "${addr[$other]}" "${addr[$paused]}" "$e2" >"$d/stale.txt" 2>&1 ||
  fail "the resumed node took a write of its old epoch"
cat "$d/stale.txt"
ctl --until-epoch $((e2 + 2)) --timeout 60 >"$d/back.out" 2>&1 ||
  fail "the resumed node did not register again"
# (it may already have copied its ranges and be active in the next one;
# its adoption waits out the read leases of the epochs it served in before
# it removes its old rows: srv_copy.c, purge_wait)
await "$d/$paused.log" "repl: epoch $((e2 + 2)) adopted: .* this node joining" 30 "${pid[$paused]}" ||
  fail "the resumed node is not joining (it must not serve its stale rows)"
echo "resume: $paused is joining in epoch $((e2 + 2)), not active"
if grep -Eq "^RS_SANITIZE:[A-Z]*=thread$" "$bin/CMakeCache.txt" 2>/dev/null; then
  # the test command's budget: under TSan (about 90 s more) the joins,
  # copies and drains of steps 6 and 7 run in test_repl_grow (a join and
  # its copy under writes); under ASan and in the release tree here
  node_stop "$other" "$paused"
  if grep -l "Sanitizer" "$d"/*.log "$d"/*.txt 2>/dev/null; then
    fail "a sanitizer report (above)"
  fi
  echo "ok: steps 1-5 (steps 6 and 7 run in the ASan and release trees): $(elapsed "$t_start") s"
  exit 0
fi

# ---- 6. it copies its ranges under writes, becomes active, then dies ---------
echo "step 6 at $(elapsed "$t_start") s"
echo "0 2 0" >"$d/once.keys" # the two calls of step 4 moved key 0
streams="$d/w1.keys $d/w2.keys $d/once.keys $d/bump-primary.keys $d/bump-backup.keys"
stream() { # PHASE: two writers and a reader until $d/stop.PHASE
  local w
  for w in a b; do
    "$drv" stream "$seeds" "$d/stop.$1" "$d/$1$w.keys" >"$d/$1$w.txt" 2>&1 &
    pids="$pids $!"
    eval "${1}${w}_pid=$!"
  done
  "$drv" read "$seeds" "$d/stop.$1" "$d/$1r.keys" >"$d/$1r.txt" 2>&1 &
  pids="$pids $!"
  eval "${1}r_pid=$!"
  for w in a b r; do
    for ((i = 0; i < 1200; i++)); do
      [ -e "$d/$1$w.keys.ready" ] && break
      sleep 0.1
    done
    [ -e "$d/$1$w.keys.ready" ] || fail "phase $1: client $w did not start"
  done
}
unstream() { # PHASE
  local w p rc=0
  touch "$d/stop.$1"
  for w in a b r; do
    eval "p=\$${1}${w}_pid"
    wait "$p" || rc=$?
    [ "$rc" = 0 ] || fail "phase $1: client $w exit status $rc"
  done
  cat "$d/$1a.txt" "$d/$1b.txt" "$d/$1r.txt"
  streams="$streams $d/$1a.keys $d/$1b.keys"
}
# the resumed node goes (whatever it became): the other one holds all
kill -KILL "${pid[$paused]}"
e5=$(ctl | sed -n 's/^cluster t: epoch \([0-9]*\),.*/\1/p')
ctl --until-epoch $((e5 + 1)) --timeout 60 >"$d/alone.out" 2>&1 ||
  fail "no configuration after $paused was killed"
# an exactly-once call over every key, applied before the new node joins
"$drv" onceall "$seeds" 0x0a11 "$d/onceall.keys" >"$d/onceall.txt" 2>&1 ||
  fail "the exactly-once call over every key"
cat "$d/onceall.txt"
streams="$streams $d/onceall.keys"
stream p6
# a new node joins under the writes (Prometheus next to etcd's ports)
mport=$((${url##*:} + 2))
t0=$(date +%s.%N)
node_start 4 "${ips[1]}" "\"metrics_port\": $mport,"
node_await n4
ctl --until-active 2 --timeout 120 >"$d/joined.out" 2>&1 ||
  fail "the new node never became active (copying its ranges)"
cat "$d/joined.out"
copied=$(grep -h "ranges copied in" "$d/n4.log" | tail -n 1)
echo "$copied"
# the race this step hunts: writes of its ranges arrived during the copy
echo "$copied" | grep -Eq "rows in .* [1-9][0-9]* forwarded writes applied meanwhile" ||
  fail "n4 copied no rows, or no write was forwarded to it during the copy"
echo "join: n4 active after $(elapsed "$t0") s under writes"
sleep 2 # writes where it is now the primary
unstream p6
# the writers use the new node without reopening: no call failed
for w in a b; do
  grep -Eq '^stream: [0-9]+ calls of [0-9]+ keys, 0 failed ' "$d/p6$w.txt" ||
    fail "phase p6: writer $w had failed calls while n4 joined"
done
# the call resent: its records came with the copy to the new primaries
"$drv" onceall "$seeds,${addr[n4]}" 0x0a11 - "${addr[n4]}" >"$d/resend.txt" 2>&1 ||
  fail "a resend after the copy was applied again (or reached no key of n4)"
cat "$d/resend.txt"
# the copy as Prometheus shows it
curl -sf --max-time 30 "http://127.0.0.1:$mport/metrics" >"$d/n4.prom" ||
  fail "scrape of n4's metrics"
grep "^rs_repl_" "$d/n4.prom"
grep -Eq "^rs_repl_copied_rows_total [1-9]" "$d/n4.prom" ||
  fail "n4's metrics show no copied row"
grep -Eq "^rs_repl_ranges_to_copy 0$" "$d/n4.prom" ||
  fail "n4's metrics show ranges still to copy"
"$drv" check "$seeds,${addr[n4]}" "${addr[$other]},${addr[n4]}" $streams \
  >"$d/check6.txt" 2>&1 || fail "check after the copy"
cat "$d/check6.txt"
e6=$(ctl | sed -n 's/^cluster t: epoch \([0-9]*\),.*/\1/p')
seeds="$seeds,${addr[n4]}"
stream p7
kill -KILL "${pid[n4]}"
ctl --until-epoch $((e6 + 1)) --timeout 60 >"$d/p7.out" 2>&1 ||
  fail "no configuration after n4 died"
sleep 2
unstream p7
"$drv" check "$seeds" "${addr[$other]}" $streams >"$d/check7.txt" 2>&1 ||
  fail "check after the new node died"
cat "$d/check7.txt"

# ---- 7. a node is drained: the others copy its ranges before it goes --------
echo "step 7 at $(elapsed "$t_start") s"
node_start 5 "${ips[1]}"
node_start 6 "${ips[2]}"
node_start 7 "${ips[0]}"
node_await n5 n6 n7
ctl --until-active 4 --timeout 120 >"$d/three2.out" 2>&1 ||
  fail "the three new nodes never became active"
seeds="$seeds,${addr[n5]},${addr[n6]}"
stream p8
leaver=mem-${other#n}
t0=$(date +%s.%N)
# two drains at once (four members, r 2: both pass the floor), by two
# commands: each request is a compare-and-swap on the drains key
"$bin/recstore-ctl" --etcd "$url" --cluster t drain mem-7 --timeout 120 \
  >"$d/drain7.out" 2>&1 &
d7=$!
"$bin/recstore-ctl" --etcd "$url" --cluster t drain "$leaver" --timeout 120 \
  >"$d/drain.out" 2>&1 || { cat "$d/drain.out"; fail "drain of $leaver"; }
wait "$d7" || { cat "$d/drain7.out"; fail "drain of mem-7"; }
cat "$d/drain.out" "$d/drain7.out"
grep -q "^$leaver: down in epoch" "$d/drain.out" || fail "$leaver is not down"
grep -q "^mem-7: down in epoch" "$d/drain7.out" || fail "mem-7 is not down"
echo "drain: $leaver and mem-7 down after $(elapsed "$t0") s under writes"
sleep 2 # writes where the two others are now the primaries
unstream p8
for w in a b; do
  grep -Eq '^stream: [0-9]+ calls of [0-9]+ keys, 0 failed ' "$d/p8$w.txt" ||
    fail "phase p8: writer $w had failed calls during the drain"
done
grep -q "drained" "$d/$other.log" || fail "$leaver did not log that it was drained"
e_leave=$(sed -n 's/.*repl: epoch \([0-9]*\) adopted: .* this node leaving.*/\1/p' \
  "$d/$other.log" | tail -n 1)
[ -n "$e_leave" ] || fail "$leaver never adopted an epoch as leaving"
grep -q "drained" "$d/n7.log" || fail "mem-7 did not log that it was drained"
e_leave7=$(sed -n 's/.*repl: epoch \([0-9]*\) adopted: .* this node leaving.*/\1/p' \
  "$d/n7.log" | head -n 1)
e_leave1=$(sed -n 's/.*repl: epoch \([0-9]*\) adopted: .* this node leaving.*/\1/p' \
  "$d/$other.log" | head -n 1)
e_down=$(sed -n "s/^$leaver: down in epoch \([0-9]*\).*/\1/p" "$d/drain.out")
e_down7=$(sed -n 's/^mem-7: down in epoch \([0-9]*\).*/\1/p' "$d/drain7.out")
# the two drains really ran at once: each was leaving before the other
# went down
[ -n "$e_leave7" ] && [ "$e_leave7" -lt "$e_down" ] && [ "$e_leave1" -lt "$e_down7" ] ||
  fail "the drains did not overlap ($leaver leaving in $e_leave1, down in $e_down; mem-7 leaving in ${e_leave7:-none}, down in $e_down7)"
echo "drains: $leaver leaving from epoch $e_leave1, down in $e_down; mem-7 leaving from $e_leave7, down in $e_down7"
# the race this step hunts: the members taking its place copied its
# ranges while writes of them were forwarded to them
grep -h "repl: epoch $e_leave: ranges copied in" "$d/n5.log" "$d/n6.log" ||
  fail "no member copied the leaver's ranges in epoch $e_leave"
grep -h "repl: epoch $e_leave: ranges copied in" "$d/n5.log" "$d/n6.log" |
  grep -Eq ": [1-9][0-9]* rows in .* [1-9][0-9]* forwarded writes applied meanwhile" ||
  fail "no member copied rows of the leaver with writes forwarded meanwhile"
"$drv" check "$seeds" "${addr[n5]},${addr[n6]}" $streams >"$d/check8.txt" 2>&1 ||
  fail "check after the drain"
cat "$d/check8.txt"

# ---- the nodes stop cleanly (peers, queues, records freed) --------------------
node_stop $other n7 n5 n6

# sanitizer trees: a report in any process fails the test
if grep -l "Sanitizer" "$d"/*.log "$d"/*.txt 2>/dev/null; then
  fail "a sanitizer report (above)"
fi
echo "ok: whole test $(elapsed "$t_start") s"
