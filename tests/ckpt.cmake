# ckpt: the checkpoint container (write, read, verify, scan, prune, the
# background writer) and the cloze-ckpt program on it.
cloze_add_unit_test(test_ckpt)
add_dependencies(test_ckpt cloze-ckpt) # it runs the cloze-ckpt program
