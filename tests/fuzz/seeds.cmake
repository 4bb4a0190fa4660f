# The seed step of a harness's smoke test (tests/fuzz/CMakeLists.txt):
#   cmake -DFUZZER=prog -DDIR=dir -P seeds.cmake
# empties DIR, has the harness write its seeds there (RS_FUZZ_SEED_DIR),
# and writes DIR.list, their paths comma-separated, for -seed_inputs=@.
# The smoke run gets no corpus directory, so it adds nothing to DIR: each
# run starts from the same seeds.
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
execute_process(COMMAND ${CMAKE_COMMAND} -E env RS_FUZZ_SEED_DIR=${DIR}
                ${FUZZER} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER}: writing the seeds failed (${rc})")
endif()
file(GLOB seeds ${DIR}/*)
list(LENGTH seeds n)
if(n EQUAL 0)
  message(FATAL_ERROR "${FUZZER}: no seeds in ${DIR}")
endif()
string(REPLACE ";" "," list "${seeds}")
file(WRITE ${DIR}.list "${list}")
