# data: instance building on synthetic shards. Needs the shard writer
# (src/data/shard.c), which lands separately.
if(EXISTS ${PROJECT_SOURCE_DIR}/src/data/shard.c)
  cloze_add_unit_test(test_data TIMEOUT 120)
  # the same rules re-implemented in Python from the original script
  add_executable(data_dump ${CLOZE_TEST_DIR}/data_dump.c)
  target_link_libraries(data_dump PRIVATE cloze)
  cloze_add_script_test(test_data_reference
    COMMAND ${CLOZE_PYTHON} ${CLOZE_TEST_DIR}/test_data_reference.py $<TARGET_FILE:data_dump>
    LABELS "python" TIMEOUT 300)
endif()
