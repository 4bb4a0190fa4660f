# test_repl_ttl_resend: etcd and two nodes in the guest (r 2), a table with
# a TTL whose expiries' REPLs the backups refuse for a while; the workload
# is repl_driver's (built by repl.cmake).
set_tests_properties(${name} PROPERTIES TIMEOUT 200)
