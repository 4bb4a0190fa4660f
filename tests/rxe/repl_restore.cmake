# test_repl_restore: etcd and three nodes in the guest (r 2); etcd goes
# back to a copy of its data directory; the workload is repl_driver's
# (built by repl.cmake).
set_tests_properties(${name} PROPERTIES TIMEOUT 200)
