# DLSCALE_SANITIZE: the sanitizer lanes (docs/reliability.md, "Sanitizer
# lanes"). A comma list, "address,undefined" or "thread", compiled into every
# target this project builds (library, CLI, tests, examples, benchmarks);
# the system's libraries (Open MPI, libhdf5, OpenBLAS, oneDNN) stay as they
# are, and what they report is suppressed by library name in
# tests/sanitizers/*.supp. tests/run.sh --sanitize address|thread builds and
# runs a lane.
#
# Included before DlscaleCuda: a lane is a CPU build. Neither nvcc's device
# code nor the CUDA runtime's own threads and allocations can be checked by
# these host sanitizers (compute-sanitizer is the GPU's tool), so a lane with
# CUDA would check less than it claims.
set(DLSCALE_SANITIZE "" CACHE STRING "Sanitizers for every target: address,undefined or thread (CPU build only)")

if(DLSCALE_SANITIZE)
  string(REPLACE "," ";" _dlscale_sanitizers "${DLSCALE_SANITIZE}")
  foreach(s IN LISTS _dlscale_sanitizers)
    if(NOT s MATCHES "^(address|undefined|thread)$")
      message(FATAL_ERROR "DLSCALE_SANITIZE=${DLSCALE_SANITIZE}: unknown sanitizer '${s}' "
                          "(address, undefined and thread are supported, e.g. -DDLSCALE_SANITIZE=address,undefined)")
    endif()
  endforeach()
  if("thread" IN_LIST _dlscale_sanitizers AND "address" IN_LIST _dlscale_sanitizers)
    message(FATAL_ERROR "DLSCALE_SANITIZE=${DLSCALE_SANITIZE}: ThreadSanitizer cannot be combined with "
                        "AddressSanitizer; build two lanes (address,undefined and thread)")
  endif()
  if(DLSCALE_FUZZ)
    message(FATAL_ERROR "DLSCALE_SANITIZE and DLSCALE_FUZZ=ON: the fuzz build already instruments everything "
                        "with ASan+UBSan; choose one of them")
  endif()
  if(DLSCALE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DLSCALE_SANITIZE=${DLSCALE_SANITIZE} with DLSCALE_CUDA=ON: the sanitizer lanes are CPU "
                        "builds (host sanitizers cannot check CUDA device code); configure with -DDLSCALE_CUDA=OFF")
  endif()
  if(NOT DLSCALE_CUDA STREQUAL "OFF")
    message(STATUS "dlscale: DLSCALE_SANITIZE set, so the CUDA backend is not built (DLSCALE_CUDA=OFF)")
    set(DLSCALE_CUDA OFF)  # this directory's value, read by DlscaleCuda; the cache keeps what was asked
  endif()

  if("thread" IN_LIST _dlscale_sanitizers AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(WARNING "DLSCALE_SANITIZE=thread with ${CMAKE_CXX_COMPILER_ID}: GCC's libgomp is not built for "
                    "ThreadSanitizer, so every OpenMP region reports false races unless OMP_NUM_THREADS=1; "
                    "configure with clang (libomp and its Archer tool), as tests/run.sh --sanitize thread does")
  endif()

  set(_dlscale_sanitize_flags -fsanitize=${DLSCALE_SANITIZE} -fno-omit-frame-pointer -g)
  if("undefined" IN_LIST _dlscale_sanitizers)
    # A finding aborts the test that reached it instead of printing a line
    # that a passing test would hide.
    list(APPEND _dlscale_sanitize_flags -fno-sanitize-recover=undefined)
  endif()
  # Directory-wide, before any target is added: every target of the project
  # gets them, and none from outside it.
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_dlscale_sanitize_flags}>")
  add_link_options(-fsanitize=${DLSCALE_SANITIZE})
  message(STATUS "dlscale: sanitizers ${DLSCALE_SANITIZE} (${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION})")
endif()
