# Third-party dependencies of kiln.  All found through pkg-config.
# Provides the imported targets PkgConfig::JANSSON, PkgConfig::PCRE2,
# PkgConfig::NETTLE (SHA-256: model cache keys, paused builds, weights) and
# (when tests are enabled) PkgConfig::CUNIT, plus Threads::Threads.
# Missing packages: run `bash tools/install-deps.sh`.
include_guard(GLOBAL)

find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(NETTLE REQUIRED IMPORTED_TARGET nettle)
if(KILN_BUILD_TESTS)
    pkg_check_modules(CUNIT REQUIRED IMPORTED_TARGET cunit)
endif()
