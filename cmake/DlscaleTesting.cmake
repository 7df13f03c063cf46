# dlscale_add_test(NAME SOURCES a.cpp b.cpp [MPI_SIZE n] [NO_MPI] [LABELS l...])
# Builds one GoogleTest executable; with MPI_SIZE it runs under
# mpirun -n n --oversubscribe, as every distributed test must. NO_MPI tests
# (those that start the dlscale binary themselves) do not initialize MPI, so
# their children never inherit a singleton's MPI environment. Every test runs
# through tests/mpi_session.sh, so each has an Open MPI session folder of its
# own (shell tests that start MPI put ${DLSCALE_MPI_SESSION} in front too).
set(DLSCALE_MPI_SESSION ${PROJECT_SOURCE_DIR}/tests/mpi_session.sh)
set(DLSCALE_TEST_ENVIRONMENT
    "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;DLSCALE_TEST_DATA=${PROJECT_SOURCE_DIR}/tests/data")
function(dlscale_add_test name)
  cmake_parse_arguments(T "NO_MPI" "MPI_SIZE" "SOURCES;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  if(T_NO_MPI)
    target_link_libraries(${name} PRIVATE dlscale::dlscale GTest::gtest_main)
  else()
    target_link_libraries(${name} PRIVATE dlscale::dlscale GTest::gtest ${DLSCALE_TEST_MAIN})
  endif()
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  if(T_MPI_SIZE)
    dlscale_add_test_run(${name} ${name} MPI_SIZE ${T_MPI_SIZE} LABELS ${T_LABELS})
  else()
    add_test(NAME ${name} COMMAND ${DLSCALE_MPI_SESSION} $<TARGET_FILE:${name}>)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${DLSCALE_TEST_ENVIRONMENT}" TIMEOUT 600)
    if(T_LABELS)
      set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
    endif()
  endif()
endfunction()

# dlscale_add_test_run(NAME TARGET MPI_SIZE n [ENVIRONMENT V=x ...] [LABELS l...])
# One more run of a test binary built by dlscale_add_test: another rank count,
# or extra environment (glibc's malloc checks, say).
function(dlscale_add_test_run name target)
  cmake_parse_arguments(T "" "MPI_SIZE" "ENVIRONMENT;LABELS" ${ARGN})
  add_test(NAME ${name} COMMAND ${DLSCALE_MPI_SESSION} ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_MPI_SIZE} --oversubscribe
                                ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${target}> ${MPIEXEC_POSTFLAGS})
  set_tests_properties(${name} PROPERTIES PROCESSORS ${T_MPI_SIZE}
                       ENVIRONMENT "${DLSCALE_TEST_ENVIRONMENT};${T_ENVIRONMENT}" TIMEOUT 600)
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
