# test_nemesis: etcd and three nodes in the guest (r 2), a seeded schedule of
# kills and pauses under two writers and a reader; the workload and the
# checker are repl_driver's (built by repl.cmake).
set_tests_properties(${name} PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77)
