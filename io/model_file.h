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

// What a checkpoint adds to a model file: solver state under /optimizer and
// string attributes at the root (training position, random states, hashes).
struct FileExtras {
  std::vector<std::pair<std::string, Tensor*>> tensors;
  std::vector<std::pair<std::string, std::string>> attributes;
};

// Writes the spec and every named tensor to `path` atomically (temp file,
// fsync, rename): a failed write leaves the previous file untouched.
void save_model(const std::string& path, Network& net, const FileExtras& extras = {});

// Rebuilds the network from the file's spec and loads its tensors; any
// missing tensor or shape mismatch is an error naming the file.
std::unique_ptr<Network> load_model(const std::string& path);
// Loads the file's tensors into `net`, which must have the file's layers.
void load_weights(const std::string& path, Network& net);

}  // namespace dlscale
