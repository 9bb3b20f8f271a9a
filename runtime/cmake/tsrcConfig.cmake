# tsrcConfig.cmake — find_package(tsrc): tsrc models in a CMake build (docs/runtime.md §18).
#
# Installed by `make install` as PREFIX/lib/cmake/tsrc/tsrcConfig.cmake.  It defines
#   TSRC_EXECUTABLE, TSRC_INCLUDE_DIR   the compiler and the directory of tsr.h
#   tsrc::runtime                       an imported target: libtsr.a, tsr.h, -lm, threads, -ldl
#   tsrc_add_model(NAME SOURCE file.tsr [TARGET cpu|cuda] [CPU name] [OPTIONS more tsrc options])
# tsrc_add_model runs `tsrc -c --name=NAME` at build time (again whenever the .tsr file, a module
# it opens, or tsrc itself, which carries the standard library, changes) and makes NAME a static library target
# of the object, whose users get NAME.h on their include path and the runtime on their link
# line:
#   find_package(tsrc REQUIRED)
#   tsrc_add_model(mlp SOURCE mlp_lib.tsr CPU x86-64-v3)
#   add_executable(demo main.c)               # main.c: #include "mlp.h"
#   target_link_libraries(demo PRIVATE mlp)
get_filename_component(_tsrc_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(TSRC_EXECUTABLE "${_tsrc_prefix}/bin/tsrc")
set(TSRC_INCLUDE_DIR "${_tsrc_prefix}/include")
if(NOT EXISTS "${TSRC_EXECUTABLE}")
  set(tsrc_FOUND FALSE)
  set(tsrc_NOT_FOUND_MESSAGE "tsrc: no compiler at ${TSRC_EXECUTABLE}")
  return()
endif()

if(NOT TARGET tsrc::runtime)
  find_package(Threads REQUIRED)
  add_library(tsrc::runtime STATIC IMPORTED)
  set_target_properties(tsrc::runtime PROPERTIES
    IMPORTED_LOCATION "${_tsrc_prefix}/lib/libtsr.a"
    INTERFACE_INCLUDE_DIRECTORIES "${TSRC_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "m;Threads::Threads;${CMAKE_DL_LIBS}")
endif()

# The function keeps the policies in force where it is defined: CMP0116 NEW, so that Ninja reads
# the depfile's absolute paths whatever cmake_minimum_required the project gives (under OLD it
# wanted them relative to the build directory, and ran tsrc again at every build).
cmake_policy(PUSH)
if(POLICY CMP0116)
  cmake_policy(SET CMP0116 NEW)
endif()
function(tsrc_add_model name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "SOURCE;TARGET;CPU" "OPTIONS")
  if(NOT arg_SOURCE)
    message(FATAL_ERROR "tsrc_add_model(${name}): SOURCE file.tsr is required")
  endif()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tsrc_add_model(${name}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  # The name is the module's, a prefix of C names (tsrc --name): said here, not when building.
  if(NOT name MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "tsrc_add_model(${name}): the name is the module's, which prefixes its C functions: "
                        "letters, digits and _, not starting with a digit (my_model, not my-model)")
  endif()
  get_filename_component(source "${arg_SOURCE}" ABSOLUTE)
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/tsrc_${name}")
  set(flags "--name=${name}")
  if(arg_TARGET STREQUAL "cuda")
    list(APPEND flags "--target=cuda")
  elseif(arg_TARGET AND NOT arg_TARGET STREQUAL "cpu")
    message(FATAL_ERROR "tsrc_add_model(${name}): TARGET is cpu or cuda, not ${arg_TARGET}")
  endif()
  if(arg_CPU)
    list(APPEND flags "--cpu=${arg_CPU}")
  endif()
  # A relative -I directory of OPTIONS is the source directory's, as SOURCE is (tsrc runs in the
  # build directory).
  set(options "")
  set(include_next FALSE)
  foreach(option IN LISTS arg_OPTIONS)
    if(include_next)
      get_filename_component(option "${option}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
      set(include_next FALSE)
    elseif(option STREQUAL "-I")
      set(include_next TRUE)
    elseif(option MATCHES "^-I(.+)$")
      get_filename_component(directory "${CMAKE_MATCH_1}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
      set(option "-I${directory}")
    endif()
    list(APPEND options "${option}")
  endforeach()
  # The modules the program opens (beside it, or from -I directories) are dependencies too:
  # tsrc writes them into a depfile, which CMake reads with Ninja, and with Makefiles from 3.20.
  set(depfile_args "")
  if(CMAKE_GENERATOR MATCHES "Ninja" OR CMAKE_VERSION VERSION_GREATER_EQUAL 3.20)
    set(depfile_args DEPFILE "${dir}/${name}.d")
    list(APPEND flags "--depfile=${dir}/${name}.d")
  endif()
  add_custom_command(
    OUTPUT "${dir}/${name}.o" "${dir}/${name}.h" "${dir}/${name}.json"
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${dir}"
    COMMAND "${TSRC_EXECUTABLE}" -c ${flags} ${options} "${source}" -o "${dir}/${name}.o"
    DEPENDS "${source}" "${TSRC_EXECUTABLE}"
    ${depfile_args}
    COMMENT "tsrc ${arg_SOURCE} -> ${name}.o, ${name}.h"
    VERBATIM)
  # The archive of the object is made by the rules of a language the project enabled: C, or in a
  # C++-only project (project(app CXX)) C++'s.
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("C" IN_LIST languages)
    set(language C)
  elseif("CXX" IN_LIST languages)
    set(language CXX)
  else()
    message(FATAL_ERROR "tsrc_add_model(${name}): the project enables neither C nor C++ (project(NAME C) or project(NAME CXX))")
  endif()
  add_library(${name} STATIC "${dir}/${name}.o" "${dir}/${name}.h")
  set_target_properties(${name} PROPERTIES LINKER_LANGUAGE ${language})
  target_include_directories(${name} PUBLIC "${dir}")
  target_link_libraries(${name} PUBLIC tsrc::runtime)
endfunction()
cmake_policy(POP)
