# test_repl_ttl: etcd and two nodes in the guest (r 2), a table with a TTL
# of 1 s; the workload is repl_driver's (built by repl.cmake).
set_tests_properties(${name} PROPERTIES TIMEOUT 200)
