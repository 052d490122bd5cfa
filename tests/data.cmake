# data: instance building on synthetic shards. Needs the shard writer
# (src/data/shard.c), which lands separately.
if(EXISTS ${PROJECT_SOURCE_DIR}/src/data/shard.c)
  cloze_add_unit_test(test_data TIMEOUT 120)
endif()
