# The third-party paths this configuration settled on, recorded by the cache variable that holds
# each: after every other find, the top-level CMakeLists.txt writes them to third_party.txt in the
# build folder (one per line). scripts/gpu_deps.sh configures the GPU check's build here
# and packs exactly the Debian packages those paths belong to; scripts/gpu_check.sh hands each
# variable back to CMake with the path inside the pack. One list, made by the build itself, so the
# pack cannot miss what the build uses (docs/cuda.md, "On a GPU machine").
# tessera_record_third_party(VAR [FILE]): VAR holds a path a find settled on; FILE, for a directory
# that many packages share (an include directory), names a file in it that belongs to this one.
# Written as "VAR=path" or "VAR=path FILE".
function(tessera_record_third_party var)
  if(NOT ${var})
    message(FATAL_ERROR "tessera_record_third_party: ${var} is not set (found nothing?)")
  endif()
  set(entry "${var}=${${var}}")
  if(ARGC GREATER 1)
    string(APPEND entry " ${ARGV1}")
  endif()
  set_property(GLOBAL APPEND PROPERTY TESSERA_THIRD_PARTY "${entry}")
endfunction()

function(tessera_write_third_party file)
  get_property(entries GLOBAL PROPERTY TESSERA_THIRD_PARTY)
  list(JOIN entries "\n" text)
  file(WRITE ${file} "${text}\n")
endfunction()
