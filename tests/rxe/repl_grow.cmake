# test_repl_grow: etcd and three nodes in the guest, r 2; a table with
# max_capacity filled past its capacity (each member grows its copy), then
# grown by command on every member.
set_tests_properties(${name} PROPERTIES TIMEOUT 300)
add_executable(repl_grow_driver ${CMAKE_CURRENT_SOURCE_DIR}/rxe/repl_grow_driver.c)
target_link_libraries(repl_grow_driver PRIVATE rs_testlib)
