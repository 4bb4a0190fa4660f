# test_adversary runs tools/recstore-server as its node (a child process,
# so that its RSS is its own); bounded so that a hang fails fast under TCG.
target_compile_definitions(${name} PRIVATE
  RS_SERVER_BIN="$<TARGET_FILE:recstore-server>")
add_dependencies(${name} recstore-server)
set_tests_properties(${name} PROPERTIES TIMEOUT 420)
if(RS_SANITIZE STREQUAL "thread")
  # test_adversary.c's __tsan_default_suppressions() must be in the dynamic
  # symbol table for the TSan runtime (a shared library) to find it.
  target_link_options(${name} PRIVATE -rdynamic)
endif()
