#!/usr/bin/env bash
# test_members.sh BUILD_DIR - membership changes over real verbs that
# test_repl.sh does not cover (docs/replication.md, "Copying ranges",
# "Tables"; docs/client.md, "Cluster mode"):
#
#  1. One etcd on tmpfs; two memory nodes (r 2, an initial cluster of 2,
#     lease 3 s); tables rt, keep and gone with rows. A client opens now
#     and keeps that configuration (no refresh) until step 2 ends.
#  2. A third node joins and stops after the first round of its copy (the
#     test hook RS_TEST_COPY_HOLD). Meanwhile a table is created (it
#     reaches the joiner too: creates and drops go to the JOINING members,
#     fenced by the epoch) and written: writes of its keys are forwarded
#     to the joiner, which must take them while its copy is still held
#     (the writer's calls would time out otherwise), table gone is
#     dropped and table rt grown (at the joiner too). Released, the joiner becomes active.
#     Then the client of step 1, whose configuration predates the
#     joiner, creates table late, writes and reads its keys, and drops
#     keep: its epoch is refused, it refreshes and redoes both, so the
#     joiner gets them. Every member ends with exactly the cluster's
#     tables (rt new late).
#  3. The two others free the rows of the ranges n3 took from them (after
#     the read lease; counted in STATS), and every replica still holds
#     every key of its ranges of every table (n3 holds keys of each). n2
#     is drained: it frees every row (an unfenced GET finds none) and the
#     two others hold every key. A drain of either of them is refused: it
#     would leave fewer than r members holding copies.
#  4. The first seed is SIGSTOPped: a client opening through it and the
#     others gives up on it after its bounded CONFIG wait (counted) and
#     opens through the next one.
#
# Exit 0 pass, 77 no RDMA device, anything else fails (with the logs).
set -euo pipefail
. "$(dirname "$0")/../../scripts/sh-lib.sh"

rxe_test_args "$@"
if grep -Eq "^RS_SANITIZE:[A-Z]*=(ON|thread)$" "$bin/CMakeCache.txt" 2>/dev/null; then
  # the test command's budget (80 s under ASan, 111 s under TSan): the
  # join, copy, free and drain paths run under ASan in test_repl (steps 6
  # and 7), a join and its copy under TSan in test_repl_grow, and this
  # test in the release tree
  echo "members: skipped in the sanitizer trees"
  exit 77
fi
drv=$bin/tests/repl_driver
# ---- 1. etcd, two nodes, three tables ------------------------------------------
. "$(dirname "$0")/../../scripts/etcd-lib.sh"
etcd_test_begin members 3
etcd_initial=2
node_start() { etcd_node_start "$@"; }
ctl() { "$bin/recstore-ctl" --etcd "$url" --cluster t cluster "$@"; }
node_start 1 "${ips[0]}"
node_start 2 "${ips[1]}"
node_await n1 n2
ctl --until-active 2 --timeout 60 >"$d/two.out" 2>&1 ||
  fail "the configuration never had the two nodes active"
seeds="${addr[n1]},${addr[n2]}"
for tv in rt:0 keep:1 gone:2; do
  "$drv" tables "$seeds" create "${tv%:*}" >>"$d/tables.txt" 2>&1 || fail "create ${tv%:*}"
  "$drv" tput "$seeds" "${tv%:*}" "${tv#*:}" >>"$d/tables.txt" 2>&1 || fail "put ${tv%:*}"
done
# a client whose configuration will predate n3 (it waits for $d/go)
"$drv" tlate "$seeds" "$d/go" late keep 4 >"$d/tlate.txt" 2>&1 &
tlate=$!
pids="$pids $tlate" # stopped by the cleanup if the test fails before it ends
await "$d/go.ready" "tlate: opened in epoch" 60 "$tlate" ||
  fail "the early client did not open"
e_open=$(sed -n 's/^tlate: opened in epoch \([0-9]*\)$/\1/p' "$d/go.ready")

# ---- 2. tables while a node copies, and from a client that predates it ------------
touch "$d/hold"
RS_TEST_COPY_HOLD=$d/hold node_start 3 "${ips[2]}"
node_await n3
await "$d/n3.log" "copy held while" 120 "${pid[n3]}" ||
  fail "n3 never held its copy (RS_TEST_COPY_HOLD)"
"$drv" tables "$seeds" create new >>"$d/tables.txt" 2>&1 || fail "create new"
grep -q "table 'new' created (id" "$d/n3.log" ||
  fail "the create did not reach the joining n3"
# its writes reach the joiner as forwarded writes: it must take them while
# its copy is held (the client gives up after 20 s)
"$drv" tput "$seeds" new 3 >"$d/tput-new.txt" 2>&1 ||
  fail "writes of a table created while n3 copied were not taken"
"$drv" tables "$seeds" drop gone >>"$d/tables.txt" 2>&1 || fail "drop gone"
# a grow reaches the joiner too (fenced like a create): it grows its copy
"$drv" tables "$seeds" grow rt >>"$d/tables.txt" 2>&1 || fail "grow rt"
for n in n1 n2 n3; do
  grep -q "table 'rt' grew from 4096 to 8192 rows" "$d/$n.log" ||
    fail "the grow of rt did not reach $n"
done
[ -e "$d/hold" ] || fail "the hold ended early"
grep -q "table 'gone' dropped" "$d/n3.log" ||
  fail "the drop did not reach the joining n3"
rm -f "$d/hold"
ctl --until-active 3 --timeout 120 >"$d/three.out" 2>&1 ||
  fail "n3 never became active"
cat "$d/three.out"
e3=$(sed -n 's/^cluster t: epoch \([0-9]*\),.*/\1/p' "$d/three.out")
# the early client: still in its epoch of before n3, it creates late and
# drops keep
touch "$d/go"
wait "$tlate" || { cat "$d/tlate.txt"; fail "the early client's create, writes or drop"; }
pids=${pids/ $tlate/}
cat "$d/tlate.txt"
[ "$(sed -n 's/^tlate: epoch \([0-9]*\) at open, \([0-9]*\) at the create$/\2/p' "$d/tlate.txt")" = "$e_open" ] &&
  [ "$e_open" -lt "$e3" ] ||
  fail "the early client's configuration did not predate n3 (epoch $e_open, n3 active in $e3)"
grep -q "table 'late' created (id" "$d/n3.log" ||
  fail "the early client's create did not reach n3"
for n in n1 n2 n3; do
  "$drv" tdir "${addr[$n]}" >"$d/dir-$n.txt" 2>&1 || fail "tables of $n"
done
cat "$d/dir-n3.txt"
grep -qx "tables: late new rt" "$d/dir-n3.txt" ||
  fail "n3's tables are not the cluster's (late new rt)"
cmp -s "$d/dir-n1.txt" "$d/dir-n3.txt" && cmp -s "$d/dir-n2.txt" "$d/dir-n3.txt" ||
  fail "the members' tables differ"
seeds="$seeds,${addr[n3]}"
echo "tables: n3 got new (created while it copied) and late (from a client of epoch $e_open), lost gone and keep"

# ---- 3. the rows of the ranges n3 took are freed on the others ----------------
for n in n1 n2; do
  await "$d/$n.log" "repl: epoch $e3: [1-9][0-9]* rows of ranges this node no longer holds freed" \
    60 "${pid[$n]}" || fail "$n freed no row of the ranges it gave n3"
  grep -h "repl: epoch $e3: .* freed" "$d/$n.log"
done
"$bin/recstore-ctl" -s "$seeds" stats >"$d/stats-freed.txt" 2>&1 || true
grep -E "^node|repl\.freed_rows" "$d/stats-freed.txt" || true
[ "$(grep -Ec "repl\.freed_rows [1-9]" "$d/stats-freed.txt")" -ge 2 ] ||
  fail "STATS do not count the freed rows"
# every replica still holds every key of its ranges: nothing was lost, and
# n3 holds keys of every table
for tv in rt:0 new:3 late:4; do
  "$drv" tcheck "$seeds" "${tv%:*}" "${tv#*:}" >"$d/tcheck2-${tv%:*}.txt" 2>&1 ||
    { cat "$d/tcheck2-${tv%:*}.txt"; fail "rows of table ${tv%:*} after the sweep"; }
  cat "$d/tcheck2-${tv%:*}.txt"
  [ "$(grep -Ec "^tcheck: .* holds [1-9][0-9]* of its" "$d/tcheck2-${tv%:*}.txt")" = 3 ] ||
    fail "not every node (n3 too) holds keys of ${tv%:*}"
done

# a drained node frees every row it holds
"$bin/recstore-ctl" --etcd "$url" --cluster t drain mem-2 --timeout 120 \
  >"$d/drain.out" 2>&1 || { cat "$d/drain.out"; fail "drain of mem-2"; }
grep -q "^mem-2: down in epoch" "$d/drain.out" || fail "mem-2 is not down"
e_down=$(sed -n 's/^mem-2: down in epoch \([0-9]*\).*/\1/p' "$d/drain.out")
await "$d/n2.log" "repl: epoch $e_down: [1-9][0-9]* rows of ranges this node no longer holds freed" \
  60 "${pid[n2]}" || fail "the drained n2 freed no row"
grep -h "repl: epoch $e_down: .* freed" "$d/n2.log"
for t in rt new late; do
  "$drv" tempty "${addr[n2]}" $t >"$d/tempty-$t.txt" 2>&1 ||
    { cat "$d/tempty-$t.txt"; fail "the drained n2 still holds rows of $t"; }
  "$drv" tcheck "${addr[n1]},${addr[n3]}" $t $(case $t in rt) echo 0 ;; new) echo 3 ;; late) echo 4 ;; esac) \
    >"$d/tcheck3-$t.txt" 2>&1 || fail "rows of table $t after the drain"
  tail -n 1 "$d/tcheck3-$t.txt"
done
seeds="${addr[n1]},${addr[n3]}"
# two members left with r 2: draining either would leave keys one copy
for id in mem-1 mem-3; do
  if "$bin/recstore-ctl" --etcd "$url" --cluster t drain $id --no-wait \
    >"$d/floor-$id.out" 2>&1; then
    cat "$d/floor-$id.out"; fail "a drain of $id below r was taken"
  fi
  grep -q "fewer than r = 2" "$d/floor-$id.out" ||
    { cat "$d/floor-$id.out"; fail "the drain of $id was not refused for the floor"; }
done
cat "$d/floor-mem-1.out"

# ---- 4. open with the first seed stopped ------------------------------------------
kill -STOP "${pid[n1]}"
"$drv" open "$seeds" >"$d/open.txt" 2>&1 || { kill -CONT "${pid[n1]}"; fail "open with the first seed stopped"; }
kill -CONT "${pid[n1]}"
cat "$d/open.txt"
grep -Eq "^open: epoch [1-9][0-9]*, [1-9][0-9]* CONFIG waits cut" "$d/open.txt" ||
  fail "the client did not give up on the stopped seed (it waited its whole timeout)"

# ---- the nodes stop cleanly ------------------------------------------------------
node_stop n1 n2 n3
if grep -l "Sanitizer" "$d"/*.log "$d"/*.txt 2>/dev/null; then
  fail "a sanitizer report (above)"
fi
echo "ok: whole test $(elapsed "$t_start") s"
