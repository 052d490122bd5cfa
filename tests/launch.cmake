# The launcher scripts in launch/: --help and -h print their usage and do
# nothing else (no file, no apt-get, build or mpirun); an unknown option is
# one line and exit 2 (seconds).
cloze_add_script_test(test_launch_help COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_launch_help.sh
                      LABELS "lint" TIMEOUT 120)
# cloze-mpirun adds nothing to a program's one-line error (mpirun's
# non-zero-status banners dropped) and keeps a signal's; CLOZE_MPIRUN (the
# sweep's path of cloze-mpirun) vs CLOZE_MPIRUN_COMMAND (real MPI jobs).
cloze_add_script_test(test_launch_mpirun COMMAND bash ${CLOZE_TEST_DIR}/scripts/test_launch_mpirun.sh
                      LABELS "mpi" TIMEOUT 300)
