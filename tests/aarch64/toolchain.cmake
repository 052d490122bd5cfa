# Cross build for aarch64 with Debian's gcc-aarch64-linux-gnu (tests/aarch64/run.sh).
# The arm64 libraries (BLIS, Open MPI, LZ4, libconfig, utf8proc and what they
# need) are Debian's arm64 packages unpacked into $CLOZE_ARM_ROOT; libc comes
# from the cross compiler's own sysroot (libc6-dev-arm64-cross). Tests run
# under qemu-aarch64 user emulation with the same root as its library prefix.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
if(NOT DEFINED ENV{CLOZE_ARM_ROOT})
  message(FATAL_ERROR "set CLOZE_ARM_ROOT to the unpacked arm64 packages (tests/aarch64/run.sh)")
endif()
set(root $ENV{CLOZE_ARM_ROOT})
set(CMAKE_FIND_ROOT_PATH ${root})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# the .pc files say prefix=/usr: read them inside the root
set(ENV{PKG_CONFIG_LIBDIR} ${root}/usr/lib/aarch64-linux-gnu/pkgconfig:${root}/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_SYSROOT_DIR} ${root})
# Open MPI without its compiler wrapper (an arm64 mpicc cannot run here);
# FORCE: a reused build folder takes the root of this run, not a cached one
set(MPI_SKIP_COMPILER_WRAPPER TRUE CACHE BOOL "" FORCE)
set(MPI_C_HEADER_DIR ${root}/usr/lib/aarch64-linux-gnu/openmpi/include CACHE PATH "" FORCE)
set(MPI_C_LIB_NAMES mpi CACHE STRING "" FORCE)
set(MPI_mpi_LIBRARY ${root}/usr/lib/aarch64-linux-gnu/openmpi/lib/libmpi.so CACHE FILEPATH "" FORCE)
# the linker follows the libraries' own dependencies inside the root
set(rpl ${root}/usr/lib/aarch64-linux-gnu:${root}/lib/aarch64-linux-gnu:${root}/usr/lib/aarch64-linux-gnu/openmpi/lib)
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${rpl}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-Wl,-rpath-link,${rpl}")
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;${root})
