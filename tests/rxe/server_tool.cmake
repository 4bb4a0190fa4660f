# test_server_tool runs tools/recstore-server and tools/recstore-ctl.
target_compile_definitions(${name} PRIVATE
  RS_SERVER_BIN="$<TARGET_FILE:recstore-server>"
  RS_CTL_BIN="$<TARGET_FILE:recstore-ctl>")
add_dependencies(${name} recstore-server recstore-ctl)
set_tests_properties(${name} PROPERTIES TIMEOUT 300)
