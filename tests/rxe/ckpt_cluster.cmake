# test_ckpt_cluster: etcd, a three-node r 2 cluster checkpointed under
# updates, restores onto one node and onto a two-node r 2 cluster; the
# driver program is the workload and the record comparisons.
set_tests_properties(${name} PROPERTIES TIMEOUT 300)
add_executable(ckpt_cluster_driver ${CMAKE_CURRENT_SOURCE_DIR}/rxe/ckpt_cluster_driver.c)
target_link_libraries(ckpt_cluster_driver PRIVATE rs_testlib)
