# test_ckpt_e2e: two nodes, a checkpoint under updates, a restore onto one
set_tests_properties(${name} PROPERTIES TIMEOUT 300)
