# test_ckpt_incr: incremental checkpoints on two nodes, a chain restored onto one
set_tests_properties(${name} PROPERTIES TIMEOUT 300)
