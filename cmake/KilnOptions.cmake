# kiln build options, language standard, warnings and sanitizers.
# Included once from the top-level CMakeLists.txt.
include_guard(GLOBAL)

# ---------------------------------------------------------------- options ---
if(DEFINED ENV{CI} AND NOT "$ENV{CI}" STREQUAL "")
    set(_kiln_werror_default ON)
else()
    set(_kiln_werror_default OFF)
endif()

option(KILN_WERROR "Treat compiler warnings as errors (default ON when $CI is set)" ${_kiln_werror_default})
option(KILN_SANITIZE "Build everything with AddressSanitizer + UBSan" OFF)
option(KILN_BUILD_TESTS "Build and register the test suite" ON)
option(KILN_BUILD_BENCH "Build the benchmarks in bench/" ON)
option(KILN_OPENMP "Share the vector and aicore kernels' loops out to OpenMP threads (docs/threads.md)" ON)

# --------------------------------------------------------------- language ---
set(CMAKE_C_STANDARD 11)
set(CMAKE_C_STANDARD_REQUIRED ON)
set(CMAKE_C_EXTENSIONS OFF)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)

# ---------------------------------------------------------------- warnings --
# Applied to every C target defined in this project (core, cli, plugins,
# tests, benches).  Third-party headers under /usr/include are system headers
# and therefore do not trigger them.
set(KILN_WARNING_FLAGS
    -Wall -Wextra -Wshadow -Wundef -Wwrite-strings -Wstrict-prototypes
    -Wmissing-prototypes -Wold-style-definition -Wvla)
if(KILN_WERROR)
    list(APPEND KILN_WARNING_FLAGS -Werror)
endif()
foreach(_flag IN LISTS KILN_WARNING_FLAGS)
    add_compile_options($<$<COMPILE_LANGUAGE:C>:${_flag}>)
endforeach()

# --------------------------------------------------------------- sanitizer --
# Global so that core, cli, plugins, test plugins, tests and benches all get it.
if(KILN_SANITIZE)
    set(KILN_SANITIZE_FLAGS
        -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
    add_compile_options(${KILN_SANITIZE_FLAGS})
    add_link_options(${KILN_SANITIZE_FLAGS})
endif()

message(STATUS "kiln: build type=${CMAKE_BUILD_TYPE} werror=${KILN_WERROR} "
               "sanitize=${KILN_SANITIZE} openmp=${KILN_OPENMP} tests=${KILN_BUILD_TESTS} bench=${KILN_BUILD_BENCH}")
