# Layering of suite/ (docs/structure.md): every file of one stage folder includes suite/
# headers of its own stage and of the stages it depends on, nothing else. Run with
#   cmake -DROOT=<source root> -DSTAGE=<folder under suite/> -DALLOWED=<stage,stage,...>
#         [-DSTAMP=<file touched on success>] -P CheckStageIncludes.cmake
# suite/CMakeLists.txt runs it before each stage library compiles (ALLOWED: the stage's
# DEPENDS), so an include against the flow fails the build; tests/CMakeLists.txt runs it as a
# test. An include of a suite/ header outside every stage folder fails too.
cmake_minimum_required(VERSION 3.25)  # policies: if(IN_LIST)
foreach(var ROOT STAGE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "CheckStageIncludes.cmake: -D${var}= is required")
  endif()
endforeach()
string(REPLACE "," ";" allowed "${ALLOWED}")
list(APPEND allowed "${STAGE}")
file(GLOB_RECURSE files RELATIVE "${ROOT}"
  "${ROOT}/suite/${STAGE}/*.h" "${ROOT}/suite/${STAGE}/*.cpp" "${ROOT}/suite/${STAGE}/*.cu" "${ROOT}/suite/${STAGE}/*.cuh")
list(SORT files)
set(problems "")
foreach(file ${files})
  file(STRINGS "${ROOT}/${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]suite/")
  foreach(line ${lines})
    if(NOT line MATCHES "^[ \t]*#[ \t]*include[ \t]*[<\"]suite/")
      continue()  # the rest of a line that held a ';' (a list separator to CMake)
    endif()
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]*)[>\"].*$" "\\1" header "${line}")
    if(header MATCHES "^suite/([^/]+)/")
      set(stage "${CMAKE_MATCH_1}")
    else()
      set(stage "")
    endif()
    if(stage STREQUAL "" OR NOT stage IN_LIST allowed)
      string(APPEND problems "\n  ${file} includes ${header}")
    endif()
  endforeach()
endforeach()
if(problems)
  list(REMOVE_ITEM allowed "${STAGE}")
  list(JOIN allowed ", " allowed_text)
  if(allowed_text STREQUAL "")
    set(allowed_text "none")
  endif()
  message(FATAL_ERROR "suite/${STAGE} includes against the flow of the stages:${problems}\n"
    "suite/${STAGE} may include its own headers and those of the stages it depends on (${allowed_text}; "
    "tpb_suite_stage(${STAGE} DEPENDS ...) in suite/CMakeLists.txt, docs/structure.md). Move the code to the "
    "stage it belongs to, or pass what it needs from a stage above.")
endif()
if(DEFINED STAMP)
  file(TOUCH "${STAMP}")
endif()
