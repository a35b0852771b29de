# A CMake toolchain file for a bare-metal Cortex-M4 with its single-precision
# FPU, hard-float ABI, and newlib without an operating system (Debian's
# gcc-arm-none-eabi and libnewlib-arm-none-eabi):
#
#   cmake -S . -B build -DCMAKE_TOOLCHAIN_FILE=arm-none-eabi.cmake \
#         -DCMAKE_PREFIX_PATH=/usr/local
#
# Another core needs other -mcpu, -mfpu and -mfloat-abi flags (a Cortex-M0
# has no FPU: -mcpu=cortex-m0 -mthumb -mfloat-abi=soft).
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_CXX_COMPILER arm-none-eabi-g++)

# Every function and object in a section of its own, so that the linker
# drops what the firmware never calls (most of the runtime's kernels).
set(CMAKE_C_FLAGS_INIT
    "-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -ffunction-sections -fdata-sections")
set(CMAKE_CXX_FLAGS_INIT "${CMAKE_C_FLAGS_INIT}")
# newlib's stubs for the system calls a bare-metal program does not make
set(CMAKE_EXE_LINKER_FLAGS_INIT "--specs=nosys.specs -Wl,--gc-sections")

# CMake's compiler checks cannot link a program before the project's own
# start-up code and linker script exist: they build a static library.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

# Headers and libraries come from the cross toolchain only. Programs and
# CMake packages may come from the build machine: remat runs there, and
# find_package(remat) finds its package under CMAKE_PREFIX_PATH.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
