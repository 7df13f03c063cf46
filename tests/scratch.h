// Where tests write: one temporary folder per test process (per mpirun job
// for the MPI tests, tests/test_main.cpp), $TMPDIR/dlscale-test-XXXXXX, never
// the source tree nor the build tree. The process also works from that
// folder, so a relative path that a test or a program it starts writes
// (dlscale train's default runs/, a Slurm job's slurm-*.out) lands there too.
// It is removed at exit when every test passed; after a failure it is kept,
// and its path printed, so what the run left can be looked at.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace dlscale::testing {

namespace fs = std::filesystem;

// Removes a scratch root after the tests: only when they all passed.
inline void finish_scratch_root(const fs::path& root, bool passed) {
  if (!passed) {
    std::fprintf(stderr, "test files kept in %s\n", root.c_str());
    return;
  }
  std::error_code ec;
  fs::remove_all(root, ec);
}

namespace detail {
struct ScratchRoot {
  fs::path path;
  pid_t owner = -1;  // the process that removes it at exit; -1: test_main's rank 0 does
  ~ScratchRoot() {
    // A forked child that exits normally must not remove its parent's files.
    if (owner == ::getpid()) finish_scratch_root(path, ::testing::UnitTest::GetInstance()->Passed());
  }
};
inline ScratchRoot& scratch_root_state() {
  static ScratchRoot root;
  return root;
}
}  // namespace detail

// A new, empty folder under $TMPDIR (or /tmp).
inline fs::path make_scratch_root() {
  std::string path = (fs::temp_directory_path() / "dlscale-test-XXXXXX").string();
  if (!mkdtemp(path.data()))
    throw std::runtime_error("cannot create a test folder " + path + ": " + std::strerror(errno));
  return path;
}

// Makes root this process's scratch root and its working directory; owner:
// this process removes it at exit (otherwise whoever made it does).
inline void use_scratch_root(const fs::path& root, bool owner) {
  auto& state = detail::scratch_root_state();
  state.path = root;
  state.owner = owner ? ::getpid() : -1;
  fs::current_path(root);
}

// This process's scratch root, made on first use.
inline const fs::path& scratch_root() {
  auto& state = detail::scratch_root_state();
  if (state.path.empty()) use_scratch_root(make_scratch_root(), true);
  return state.path;
}

// A fresh, empty folder per test under the scratch root. One process per
// folder: under mpirun, rank 0 makes a shared folder (scratch_root() / name)
// and the others wait for it.
inline fs::path scratch_dir(const std::string& name) {
  fs::path dir = scratch_root() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace dlscale::testing
