# dist / optim / ckpt tests.
cloze_add_unit_test(test_ckpt)
set_tests_properties(test_ckpt PROPERTIES DEPENDS cloze-ckpt)
add_dependencies(test_ckpt cloze-ckpt)
