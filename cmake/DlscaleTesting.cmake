# dlscale_add_test(NAME SOURCES a.cpp b.cpp [MPI_SIZE n] [NO_MPI] [LABELS l...])
# Builds one GoogleTest executable; with MPI_SIZE it runs under
# mpirun -n n --oversubscribe, as every distributed test must. NO_MPI tests
# (those that start the dlscale binary themselves) do not initialize MPI, so
# their children never inherit a singleton's MPI environment. Every test runs
# through tests/mpi_session.sh, so each has an Open MPI session folder of its
# own (shell tests that start MPI put ${DLSCALE_MPI_SESSION} in front too).
set(DLSCALE_MPI_SESSION ${PROJECT_SOURCE_DIR}/tests/mpi_session.sh)
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
    add_test(NAME ${name} COMMAND ${DLSCALE_MPI_SESSION} ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_MPI_SIZE} --oversubscribe
                                  ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${name}> ${MPIEXEC_POSTFLAGS})
    set_tests_properties(${name} PROPERTIES PROCESSORS ${T_MPI_SIZE})
  else()
    add_test(NAME ${name} COMMAND ${DLSCALE_MPI_SESSION} $<TARGET_FILE:${name}>)
  endif()
  set_tests_properties(${name} PROPERTIES
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;DLSCALE_TEST_DATA=${PROJECT_SOURCE_DIR}/tests/data"
    TIMEOUT 600)
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
