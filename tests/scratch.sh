# Sourced by the shell tests, as tests/scratch.h is included by the C++ ones:
# a fresh folder $scratch under $TMPDIR (never the source or build tree),
# made the working directory, removed when the script succeeds and kept (its
# path printed) when it fails.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/dlscale-test-XXXXXX")
trap 'rc=$?; if [ "$rc" -eq 0 ]; then rm -rf "$scratch"; else echo "test files kept in $scratch" >&2; fi; exit "$rc"' EXIT
cd "$scratch"
