// Saving and loading networks as HDF5 files.
#include "io/model_file.h"

#include <cstdio>
#include <sstream>

#include "io/hdf5.h"

namespace dlscale {

namespace {
constexpr const char* kFormat = "dlscale-model";

std::string join_lines(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) lines.push_back(line);
  return lines;
}
}  // namespace

void save_model(const std::string& path, Network& net, const FileExtras& extras) {
  const std::string tmp = path + ".tmp";
  try {
    auto lock = hdf5_lock();
    H5Id file = create_h5(tmp);
    hid_t root = file.get();
    write_string_attribute(root, "format", kFormat);
    write_int_attribute(root, "version", 1);
    write_string_attribute(root, "input_shape", to_string(net.spec().input_shape));
    write_string_attribute(root, "layers", join_lines(net.spec().layer_lines));
    write_string_attribute(root, "dtype", to_string(net.dtype()));
    write_int_attribute(root, "num_classes", net.num_classes());
    for (auto& [name, value] : extras.attributes) write_string_attribute(root, name, value);
    for (auto& [name, tensor] : net.named_tensors()) write_tensor(root, "params/" + name, *tensor);
    for (auto& [name, tensor] : extras.tensors) write_tensor(root, "optimizer/" + name, *tensor);
    // A full disk often shows only when HDF5 flushes its buffers: check it
    // here, not in a destructor that cannot report it.
    if (H5Fflush(root, H5F_SCOPE_GLOBAL) < 0) fail("cannot write " + tmp + " (disk full?)");
    close_h5_file(file, tmp);
    commit_file(tmp, path);
  } catch (const Error&) {
    std::remove(tmp.c_str());  // the previous file at `path` stays as it was
    throw;
  }
}

namespace {
void read_tensors(hid_t root, const std::string& path, Network& net) {
  for (auto& [name, tensor] : net.named_tensors()) {
    Tensor stored = read_tensor(root, "params/" + name, path);
    if (stored.shape() != tensor->shape())
      fail(path + ": params/" + name + " has shape " + to_string(stored.shape()) + ", the network expects " +
           to_string(tensor->shape()));
    tensor->copy_from(stored.to(net.dtype()));
  }
}

void check_format(hid_t root, const std::string& path) {
  if (read_string_attribute(root, "format", path) != kFormat) fail(path + " is not a dlscale model file");
}
}  // namespace

std::unique_ptr<Network> load_model(const std::string& path) {
  auto lock = hdf5_lock();
  H5Id file = open_h5_read(path);
  hid_t root = file.get();
  check_format(root, path);
  NetworkSpec spec;
  spec.source = path;
  spec.input_shape = parse_shape(read_string_attribute(root, "input_shape", path), path + ": input_shape");
  spec.layer_lines = split_lines(read_string_attribute(root, "layers", path));
  auto net = std::make_unique<Network>(spec, parse_dtype(read_string_attribute(root, "dtype", path)), 0);
  read_tensors(root, path, *net);
  return net;
}

void load_weights(const std::string& path, Network& net) {
  auto lock = hdf5_lock();
  H5Id file = open_h5_read(path);
  hid_t root = file.get();
  check_format(root, path);
  if (split_lines(read_string_attribute(root, "layers", path)) != net.spec().layer_lines)
    fail(path + " holds a network with other layers than the one being trained");
  read_tensors(root, path, net);
}

}  // namespace dlscale
