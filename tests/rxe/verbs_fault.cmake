# test_verbs_fault: bounded so that a hang fails fast under TCG emulation
set_tests_properties(${name} PROPERTIES TIMEOUT 400)
