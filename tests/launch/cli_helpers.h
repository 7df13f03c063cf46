// Helpers for end-to-end tests of the dlscale binary: synthetic datasets on
// disk, running the binary and reading what it wrote.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "io/shard_writer.h"
#include "runtime/rng.h"

namespace dlscale::testing {

namespace fs = std::filesystem;

// A fresh folder per test under the build tree.
inline fs::path scratch_dir(const std::string& name) {
  fs::path dir = fs::current_path() / "scratch" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// num_classes classes of 1×8×8 uint8 images: class c lights up row c (plus
// noise), so a small network learns it in a few epochs.
inline RawDataset separable_images(std::int64_t n, int num_classes, std::uint64_t seed) {
  RawDataset d;
  d.sample_shape = {1, 8, 8};
  d.sample_type = SampleType::u8;
  Rng rng(seed);
  for (std::int64_t i = 0; i < n; ++i) {
    int c = static_cast<int>(rng.below(num_classes));
    d.labels.push_back(c);
    for (int p = 0; p < 64; ++p) {
      int v = static_cast<int>(rng.below(60)) + (p / 8 == c ? 180 : 0);
      d.samples.push_back(static_cast<std::uint8_t>(std::min(v, 255)));
    }
  }
  return d;
}

struct RunResult {
  int exit_code = -1;
  std::string out, err;
};

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

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
