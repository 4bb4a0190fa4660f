# test_table_grow runs tools/recstore-ctl too; bounded so that a hang fails
# fast under TCG emulation.
target_compile_definitions(${name} PRIVATE
  RS_CTL_BIN="$<TARGET_FILE:recstore-ctl>")
add_dependencies(${name} recstore-ctl)
set_tests_properties(${name} PROPERTIES TIMEOUT 300)
