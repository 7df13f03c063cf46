// Helpers for end-to-end tests of the dlscale binary: synthetic datasets on
// disk, running the binary and reading what it wrote.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "synthetic_data.h"

namespace dlscale::testing {

namespace fs = std::filesystem;

struct RunResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs a shell command line, capturing stdout and stderr.
inline RunResult run_command(const std::string& command, const fs::path& dir) {
  const auto out = dir / "stdout.txt", err = dir / "stderr.txt";
  std::string line = command + " >" + out.string() + " 2>" + err.string();
  int status = std::system(line.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

inline std::string dlscale_binary() { return DLSCALE_BINARY; }

}  // namespace dlscale::testing
