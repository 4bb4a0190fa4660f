# test_server_evict: bounded so that a hang fails fast under TCG emulation
set_tests_properties(${name} PROPERTIES TIMEOUT 240)
