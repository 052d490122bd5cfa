# data: the shard format (shard.h: writer -> reader round trips, damaged
# files refused naming the file and offset), and instance building on
# synthetic shards against the rules of the original script.
cloze_add_unit_test(test_shard)
cloze_add_unit_test(test_data TIMEOUT 120)
# the same rules re-implemented in Python from the original script
add_executable(data_dump ${CLOZE_TEST_DIR}/data_dump.c)
target_link_libraries(data_dump PRIVATE cloze)
cloze_add_script_test(test_data_reference
  COMMAND ${CLOZE_PYTHON} ${CLOZE_TEST_DIR}/test_data_reference.py $<TARGET_FILE:data_dump>
  LABELS "python" TIMEOUT 300)
