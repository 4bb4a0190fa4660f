#!/usr/bin/env bash
# test_members.sh BUILD_DIR - membership changes over real verbs that
# test_repl.sh does not cover (docs/replication.md, "Copying ranges",
# "Tables"; docs/client.md, "Cluster mode"):
#
#  1. One etcd on tmpfs; two memory nodes (r 2, an initial cluster of 2,
#     lease 3 s); tables rt, keep and gone with rows.
#  2. A third node joins and stops after the first round of its copy (the
#     test hook RS_TEST_COPY_HOLD). Meanwhile a table is created on the
#     active members (not on the joiner: clients create on ACTIVE ones)
#     and written: writes of its keys are forwarded to the joiner, which
#     lacks the table; the joiner must create it and take them while its
#     copy is still held (without that the writer's calls time out), and
#     table gone is dropped. Released, the joiner becomes active with
#     exactly the cluster's tables (gone dropped, the new one there) and
#     every row of its ranges of each.
#  3. The two others free the rows of the ranges n3 took from them (after
#     the read lease; counted in STATS), and every replica still holds
#     every key of its ranges of every table. n2 is drained: it frees
#     every row (an unfenced GET finds none) and the two others hold
#     every key.
#  4. The first seed is SIGSTOPped: a client opening through it and the
#     others gives up on it after its bounded CONFIG wait (counted) and
#     opens through the next one.
#
# Exit 0 pass, 77 no RDMA device, anything else fails (with the logs).
set -euo pipefail
. "$(dirname "$0")/../../scripts/sh-lib.sh"

rxe_test_args "$@"
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

# ---- 2. tables created and dropped while a node copies ---------------------------
touch "$d/hold"
RS_TEST_COPY_HOLD=$d/hold node_start 3 "${ips[2]}"
node_await n3
await "$d/n3.log" "copy held while" 120 "${pid[n3]}" ||
  fail "n3 never held its copy (RS_TEST_COPY_HOLD)"
"$drv" tables "$seeds" create new >>"$d/tables.txt" 2>&1 || fail "create new"
# its writes reach the joiner as forwarded writes of a table it lacks: it
# must take them while its copy is held (the client gives up after 20 s)
"$drv" tput "$seeds" new 3 >"$d/tput-new.txt" 2>&1 ||
  fail "writes of a table created while n3 copied were not taken (n3 lacks it)"
[ -e "$d/hold" ] || fail "the hold ended early"
grep -q "repl: table 'new' created as on" "$d/n3.log" ||
  fail "n3 did not create the table created while it copied"
"$drv" tables "$seeds" drop gone >>"$d/tables.txt" 2>&1 || fail "drop gone"
rm -f "$d/hold"
ctl --until-active 3 --timeout 120 >"$d/three.out" 2>&1 ||
  fail "n3 never became active"
cat "$d/three.out"
grep -q "repl: table 'gone' dropped" "$d/n3.log" ||
  fail "n3 kept the table dropped while it copied"
for n in n1 n2 n3; do
  "$drv" tdir "${addr[$n]}" >"$d/dir-$n.txt" 2>&1 || fail "tables of $n"
done
cat "$d/dir-n3.txt"
grep -qx "tables: keep new rt" "$d/dir-n3.txt" ||
  fail "n3's tables are not the cluster's (keep new rt)"
cmp -s "$d/dir-n1.txt" "$d/dir-n3.txt" && cmp -s "$d/dir-n2.txt" "$d/dir-n3.txt" ||
  fail "the members' tables differ"
seeds="$seeds,${addr[n3]}"
for tv in keep:1 new:3; do
  "$drv" tcheck "$seeds" "${tv%:*}" "${tv#*:}" >"$d/tcheck-${tv%:*}.txt" 2>&1 ||
    fail "rows of table ${tv%:*}"
  cat "$d/tcheck-${tv%:*}.txt"
  [ "$(grep -Ec "^tcheck: .* holds [1-9][0-9]* of its" "$d/tcheck-${tv%:*}.txt")" = 3 ] ||
    fail "not every node (n3 too) holds keys of ${tv%:*}"
done
"$bin/recstore-ctl" -s "${addr[n3]}" stats >"$d/stats3.txt" 2>&1 || true
grep -E "repl\.tables_(created|dropped)" "$d/stats3.txt" || true
grep -Eq "repl\.tables_dropped 1$" "$d/stats3.txt" ||
  fail "n3's STATS do not count the table it dropped"
echo "tables: n3 joined with keep, new (created while it copied) and without gone"

# ---- 3. the rows of the ranges n3 took are freed on the others ----------------
e3=$(sed -n 's/^cluster t: epoch \([0-9]*\),.*/\1/p' "$d/three.out")
for n in n1 n2; do
  await "$d/$n.log" "repl: epoch $e3: [1-9][0-9]* rows of ranges this node no longer holds freed" \
    60 "${pid[$n]}" || fail "$n freed no row of the ranges it gave n3"
  grep -h "repl: epoch $e3: .* freed" "$d/$n.log"
done
"$bin/recstore-ctl" -s "$seeds" stats >"$d/stats-freed.txt" 2>&1 || true
grep -E "^node|repl\.freed_rows" "$d/stats-freed.txt" || true
[ "$(grep -Ec "repl\.freed_rows [1-9]" "$d/stats-freed.txt")" -ge 2 ] ||
  fail "STATS do not count the freed rows"
# every replica still holds every key of its ranges: nothing was lost
for tv in rt:0 keep:1 new:3; do
  "$drv" tcheck "$seeds" "${tv%:*}" "${tv#*:}" >"$d/tcheck2-${tv%:*}.txt" 2>&1 ||
    fail "rows of table ${tv%:*} after the sweep"
  tail -n 1 "$d/tcheck2-${tv%:*}.txt"
done

# a drained node frees every row it holds
"$bin/recstore-ctl" --etcd "$url" --cluster t drain mem-2 --timeout 120 \
  >"$d/drain.out" 2>&1 || { cat "$d/drain.out"; fail "drain of mem-2"; }
grep -q "^mem-2: down in epoch" "$d/drain.out" || fail "mem-2 is not down"
e_down=$(sed -n 's/^mem-2: down in epoch \([0-9]*\).*/\1/p' "$d/drain.out")
await "$d/n2.log" "repl: epoch $e_down: [1-9][0-9]* rows of ranges this node no longer holds freed" \
  60 "${pid[n2]}" || fail "the drained n2 freed no row"
grep -h "repl: epoch $e_down: .* freed" "$d/n2.log"
for t in rt keep new; do
  "$drv" tempty "${addr[n2]}" $t >"$d/tempty-$t.txt" 2>&1 ||
    { cat "$d/tempty-$t.txt"; fail "the drained n2 still holds rows of $t"; }
  "$drv" tcheck "${addr[n1]},${addr[n3]}" $t $(case $t in rt) echo 0 ;; keep) echo 1 ;; new) echo 3 ;; esac) \
    >"$d/tcheck3-$t.txt" 2>&1 || fail "rows of table $t after the drain"
  tail -n 1 "$d/tcheck3-$t.txt"
done
seeds="${addr[n1]},${addr[n3]}"

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
