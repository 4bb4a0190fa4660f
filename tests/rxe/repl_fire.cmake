# test_repl_fire: etcd and two nodes of one worker each in the guest (r 2),
# then a third that joins; the workload is repl_driver's (repl.cmake).
set_tests_properties(${name} PROPERTIES TIMEOUT 200)
