# KilnPlugin.cmake -- helpers for building kiln plugins.
#
# Used both in-tree (included by kiln's top-level CMakeLists.txt) and by
# out-of-tree plugin projects (installed next to kilnConfig.cmake and pulled
# in automatically by `find_package(kiln)`).
#
#   kiln_add_plugin(<name> SOURCES <src>...
#                   [LIBRARIES <lib>...]          # extra libs to link (e.g. PkgConfig::FOO)
#                   [INCLUDE_DIRECTORIES <dir>...]
#                   [OUTPUT_DIRECTORY <dir>]
#                   [INSTALL_DESTINATION <dir>]   # relative to CMAKE_INSTALL_PREFIX
#                   [NO_INSTALL] [ALLOW_UNDEFINED] [EXPORT_ALL])
#
#   kiln_add_test_plugin(<name> SOURCES <src>... [same options])
#       Same, but written to ${CMAKE_BINARY_DIR}/tests/plugins and never installed.
#
#   kiln_add_plugin_library(<name> SOURCES <src>...
#                           [LIBRARIES <lib>...] [INCLUDE_DIRECTORIES <dir>...])
#       Code several plugins share, compiled once: a STATIC library of
#       position-independent code built like a plugin's sources (plugin-api
#       headers, -DKILN_PLUGIN, hidden visibility), for kiln_add_plugin's
#       LIBRARIES.  Its kiln_* calls go through the host table of the plugin
#       it is linked into; it may call functions that plugin defines (the
#       plugin's objects come first on the link line).  Never installed.
#
# The result is a MODULE library target called <name> producing lib<name>.so.
# It links NOTHING from kiln: it only sees the plugin-api headers (through
# the kiln::plugin-api interface target) and may use libc and libm.
# It is compiled with -fvisibility=hidden and -DKILN_PLUGIN and linked with a
# version script that exports only `kiln_plugin_entry` (the entry point must
# therefore be declared with default visibility, e.g. through the export macro
# of the plugin-api header) and with -Wl,-z,defs so that any undefined symbol
# is a link error.  -z defs is dropped when KILN_SANITIZE is ON (the sanitizer
# runtime is provided by the host executable) or with ALLOW_UNDEFINED.
# EXPORT_ALL skips the version script (for test plugins that need it).
include_guard(GLOBAL)

set(_KILN_PLUGIN_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")

# Version script, generated into the binary dir.  configure_file() only
# rewrites it when the content changes, so plugins are not relinked on every
# re-configure.
set(KILN_PLUGIN_VERSION_SCRIPT "${CMAKE_BINARY_DIR}/kiln_plugin.map"
    CACHE INTERNAL "Linker version script used for kiln plugins")
file(WRITE "${CMAKE_BINARY_DIR}/CMakeFiles/kiln_plugin.map.tmp"
     "{\n  global:\n    kiln_plugin_entry;\n  local:\n    *;\n};\n")
configure_file("${CMAKE_BINARY_DIR}/CMakeFiles/kiln_plugin.map.tmp"
               "${KILN_PLUGIN_VERSION_SCRIPT}" COPYONLY)

# Default install location of plugins, relative to CMAKE_INSTALL_PREFIX.
# The kiln executable looks for plugins in <exe dir>/../lib/kiln/plugins, so
# this is deliberately "lib" (not a multiarch libdir).
if(NOT DEFINED KILN_PLUGIN_INSTALL_SUBDIR)
    set(KILN_PLUGIN_INSTALL_SUBDIR "lib/kiln/plugins")
endif()

function(_kiln_plugin_impl NAME KIND)
    cmake_parse_arguments(ARG "NO_INSTALL;ALLOW_UNDEFINED;EXPORT_ALL"
        "OUTPUT_DIRECTORY;INSTALL_DESTINATION" "SOURCES;LIBRARIES;INCLUDE_DIRECTORIES" ${ARGN})
    if(ARG_UNPARSED_ARGUMENTS)
        message(FATAL_ERROR "kiln_add_plugin(${NAME}): unknown arguments: ${ARG_UNPARSED_ARGUMENTS}")
    endif()
    if(NOT ARG_SOURCES)
        message(FATAL_ERROR "kiln_add_plugin(${NAME}): SOURCES is required")
    endif()
    if(NOT TARGET kiln::plugin-api)
        message(FATAL_ERROR "kiln_add_plugin(${NAME}): target kiln::plugin-api not found "
                            "(use find_package(kiln) or build inside the kiln tree)")
    endif()

    add_library(${NAME} MODULE ${ARG_SOURCES})
    set_target_properties(${NAME} PROPERTIES
        PREFIX "lib"
        OUTPUT_NAME "${NAME}"
        SUFFIX ".so"
        DEFINE_SYMBOL ""
        C_STANDARD 11
        C_STANDARD_REQUIRED ON
        C_EXTENSIONS OFF
        C_VISIBILITY_PRESET hidden
        POSITION_INDEPENDENT_CODE ON)
    target_compile_definitions(${NAME} PRIVATE KILN_PLUGIN _GNU_SOURCE)
    target_include_directories(${NAME} PRIVATE ${ARG_INCLUDE_DIRECTORIES})
    target_link_libraries(${NAME} PRIVATE kiln::plugin-api ${ARG_LIBRARIES} m)

    if(NOT ARG_EXPORT_ALL)
        # -Xlinker hands the option over as one argument: -Wl,... would split a
        # build path that contains a comma.  SHELL: keeps the pair together and
        # the quotes keep a path with spaces in one piece.
        target_link_options(${NAME} PRIVATE
            "SHELL:-Xlinker \"--version-script=${KILN_PLUGIN_VERSION_SCRIPT}\"")
        set_property(TARGET ${NAME} APPEND PROPERTY LINK_DEPENDS "${KILN_PLUGIN_VERSION_SCRIPT}")
    endif()
    if(NOT KILN_SANITIZE AND NOT ARG_ALLOW_UNDEFINED)
        target_link_options(${NAME} PRIVATE "-Wl,-z,defs")
    endif()

    if(ARG_OUTPUT_DIRECTORY)
        set(_outdir "${ARG_OUTPUT_DIRECTORY}")
    elseif(KIND STREQUAL "test")
        set(_outdir "${CMAKE_BINARY_DIR}/tests/plugins")
    elseif(DEFINED KILN_PLUGIN_OUTPUT_DIR)
        set(_outdir "${KILN_PLUGIN_OUTPUT_DIR}")   # in-tree: build/lib/kiln/plugins
    else()
        set(_outdir "")
    endif()
    if(_outdir)
        set_target_properties(${NAME} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${_outdir}")
    endif()

    if(NOT KIND STREQUAL "test" AND NOT ARG_NO_INSTALL)
        if(ARG_INSTALL_DESTINATION)
            set(_dest "${ARG_INSTALL_DESTINATION}")
        else()
            set(_dest "${KILN_PLUGIN_INSTALL_SUBDIR}")
        endif()
        install(TARGETS ${NAME} LIBRARY DESTINATION "${_dest}")
    endif()
endfunction()

function(kiln_add_plugin_library NAME)
    cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES;INCLUDE_DIRECTORIES" ${ARGN})
    if(ARG_UNPARSED_ARGUMENTS)
        message(FATAL_ERROR "kiln_add_plugin_library(${NAME}): unknown arguments: "
                            "${ARG_UNPARSED_ARGUMENTS}")
    endif()
    if(NOT ARG_SOURCES)
        message(FATAL_ERROR "kiln_add_plugin_library(${NAME}): SOURCES is required")
    endif()
    add_library(${NAME} STATIC ${ARG_SOURCES})
    set_target_properties(${NAME} PROPERTIES
        C_STANDARD 11
        C_STANDARD_REQUIRED ON
        C_EXTENSIONS OFF
        C_VISIBILITY_PRESET hidden
        POSITION_INDEPENDENT_CODE ON)
    target_compile_definitions(${NAME} PRIVATE KILN_PLUGIN _GNU_SOURCE)
    target_include_directories(${NAME} PUBLIC ${ARG_INCLUDE_DIRECTORIES})
    target_link_libraries(${NAME} PUBLIC kiln::plugin-api ${ARG_LIBRARIES})
endfunction()

function(kiln_add_plugin NAME)
    _kiln_plugin_impl(${NAME} plugin ${ARGN})
endfunction()

function(kiln_add_test_plugin NAME)
    _kiln_plugin_impl(${NAME} test ${ARGN})
endfunction()
