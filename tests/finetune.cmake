# fine-tuning (owner: fine-tuning): task readers, features, metrics
cloze_add_unit_test(test_finetune_data LIBS cloze_finetune LABELS data TIMEOUT 120)
