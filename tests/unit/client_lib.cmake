# test_client_lib compiles a program against the build's client library:
# with the build's compiler and, in sanitizer trees, its sanitizer flags
# (an instrumented library needs the runtime linked into the program).
set(rs_cl_flags "")
if(RS_SANITIZE STREQUAL "thread")
  set(rs_cl_flags "-fsanitize=thread")
elseif(RS_SANITIZE)
  set(rs_cl_flags "-fsanitize=address,undefined")
endif()
set_tests_properties(${name} PROPERTIES ENVIRONMENT
  "CC=${CMAKE_C_COMPILER};RS_TEST_CFLAGS=${rs_cl_flags}")
