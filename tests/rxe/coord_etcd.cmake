# test_coord_etcd: etcd in the guest (tmpfs), the etcd conformance cases,
# two nodes with a coord section, a SIGKILLed node removed by the decider.
set_tests_properties(${name} PROPERTIES TIMEOUT 300)
# The conformance program the script runs (not a ctest of its own: it
# needs the etcd the script starts).
add_executable(coord_etcd_conformance
  ${CMAKE_CURRENT_SOURCE_DIR}/rxe/coord_etcd_conformance.c)
target_link_libraries(coord_etcd_conformance PRIVATE rs_testlib)
