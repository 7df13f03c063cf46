# The sanitizers' run-time options of a lane, for sourcing:
#   . tests/sanitizers/env.sh address|thread
# tests/sanitizers/lane.sh sources it before ctest; source it yourself to run
# a test of build-asan/ or build-tsan/ by hand. Everything is exported, so it
# reaches the ranks mpirun starts on this machine (Open MPI passes its own
# environment to local ranks) and every dlscale a test starts.
# An option already set in the environment comes after the lane's, and so wins.
_dlscale_supp=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# Open MPI and PMIx unload their components in MPI_Finalize; a leak or race
# reported after that has "<unknown module>" where the library's name should
# be, and no suppression by name could match it.
export OMPI_MCA_mca_base_component_disable_dlclose=1
export PMIX_MCA_mca_base_component_disable_dlclose=1

case ${1:-} in
  address)
    # allocator_may_return_null: a request too large to serve makes new throw
    # std::bad_alloc (and malloc return null) as it does in production, where
    # dlscale turns it into its out-of-memory message, instead of aborting.
    # detect_stack_use_after_return: a pointer to a returned frame (a view of
    # a temporary tensor, a lambda's captured local) is caught too.
    export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:detect_stack_use_after_return=1:fast_unwind_on_malloc=0:malloc_context_size=30:check_initialization_order=1:strict_init_order=1:print_suppressions=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    export LSAN_OPTIONS="suppressions=$_dlscale_supp/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
    # halt_on_error with -fno-sanitize-recover: the first finding ends the test.
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$_dlscale_supp/ubsan.supp${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
    ;;
  thread)
    # Every race is reported (not only the first), and the process then exits
    # with 66, failing its test. die_after_fork=0: tests start dlscale and
    # mpirun from processes that already have threads, and the children exec
    # at once.
    export TSAN_OPTIONS="suppressions=$_dlscale_supp/tsan.supp:second_deadlock_stack=1:die_after_fork=0:print_suppressions=0${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
    # OpenMP: clang's libomp loads Archer (libarcher.so, beside it in
    # /usr/lib/llvm-14/lib), which tells ThreadSanitizer about OpenMP's
    # barriers and tasks. Without it every parallel region reports races
    # that are not there; libgomp (GCC) has no such tool, hence clang here.
    # lane.sh checks that libomp finds it (OMP_TOOL_VERBOSE_INIT).
    ;;
  *)
    echo "usage: . tests/sanitizers/env.sh address|thread" >&2
    return 2 2>/dev/null || exit 2
    ;;
esac
unset _dlscale_supp
