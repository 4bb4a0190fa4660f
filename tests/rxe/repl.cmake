# test_repl: etcd and three nodes in the guest, r 2, a node SIGKILLed under
# two writers and a reader; the driver program is the workload.
set_tests_properties(${name} PROPERTIES TIMEOUT 400)
add_executable(repl_driver ${CMAKE_CURRENT_SOURCE_DIR}/rxe/repl_driver.c)
target_link_libraries(repl_driver PRIVATE rs_testlib)
