// Synthetic datasets, scratch folders (scratch.h) and reading back what a
// run wrote, shared by tests that train for real.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "io/shard_writer.h"
#include "runtime/core/rng.h"
#include "scratch.h"

namespace dlscale::testing {

namespace fs = std::filesystem;

// The whole file (text or binary); "" when it cannot be read.
inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
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

}  // namespace dlscale::testing
