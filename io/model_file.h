// model.h5 and checkpoints: a network's spec and tensors in one HDF5 file,
// readable with h5py (layout in docs/data-format.md, "Model files").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layers/network.h"

namespace dlscale {

// Where a checkpoint stands in training; stored as root attributes.
struct TrainingPosition {
  std::int64_t iteration = 0;  // iterations completed
  std::int64_t epoch = 0;      // epochs completed
};

// Writes the spec and every named tensor to `path` atomically (temp file,
// fsync, rename): a failed write leaves the previous file untouched.
// `extra` tensors (optimizer state) go under /optimizer.
void save_model(const std::string& path, Network& net,
                const std::vector<std::pair<std::string, Tensor*>>& extra = {},
                const TrainingPosition* position = nullptr);

// Rebuilds the network from the file's spec and loads its tensors; any
// missing tensor or shape mismatch is an error naming the file.
std::unique_ptr<Network> load_model(const std::string& path);

}  // namespace dlscale
