# test_observe_e2e: node + bench + curl + recstore-trace, and 2 x 10 s idle
set_tests_properties(${name} PROPERTIES TIMEOUT 420)
