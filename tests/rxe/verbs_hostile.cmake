set_tests_properties(${name} PROPERTIES TIMEOUT 300)
