// Writing, finding and restoring checkpoints.
#include "runtime/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "io/hdf5.h"
#include "io/model_file.h"

namespace dlscale {

namespace fs = std::filesystem;

namespace {

std::string format_double(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// ckpt-<iteration>.h5 → iteration, or -1.
std::int64_t checkpoint_iteration(const fs::path& p) {
  long long it = -1;
  char tail[8] = "";
  if (std::sscanf(p.filename().c_str(), "ckpt-%lld.%3s", &it, tail) != 2 || std::string(tail) != "h5") return -1;
  return it;
}

std::vector<std::pair<std::int64_t, fs::path>> checkpoints_in(const std::string& dir) {
  std::vector<std::pair<std::int64_t, fs::path>> found;
  std::error_code ec;
  for (auto& entry : fs::directory_iterator(dir, ec)) {
    auto it = checkpoint_iteration(entry.path());
    if (it >= 0 && entry.path().extension() == ".h5") found.emplace_back(it, entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string join(const std::vector<std::string>& parts, char sep) {
  std::string s;
  for (std::size_t i = 0; i < parts.size(); ++i) s += (i ? std::string(1, sep) : "") + parts[i];
  return s;
}

// Inverse of join: n separators give n + 1 parts, empty ones included (a
// rank without dropout has an empty stream state).
std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts(1);
  for (char c : text) {
    if (c == sep)
      parts.emplace_back();
    else
      parts.back() += c;
  }
  return parts;
}

}  // namespace

void write_checkpoint(const std::string& dir, Network& net, Optimizer& optimizer, const TrainingState& state,
                      const CheckpointIdentity& id, Communicator& comm, int keep) {
  // '\n' cannot occur in a stream state; '|' separates a rank's streams.
  const auto streams = comm.allgather(net.random_state());
  if (comm.rank() != 0) return;
  FileExtras extras;
  extras.tensors = optimizer.state();
  extras.attributes = {{"iteration", std::to_string(state.iteration)},
                       {"epoch", std::to_string(state.epoch)},
                       {"batch_in_epoch", std::to_string(state.batch_in_epoch)},
                       {"samples_seen", std::to_string(state.samples_seen)},
                       {"best_validation_loss", format_double(state.best_validation_loss)},
                       {"validations_without_improvement", std::to_string(state.validations_without_improvement)},
                       {"world_size", std::to_string(comm.size())},
                       {"network_hash", id.network_hash},
                       {"config_hash", id.config_hash},
                       {"loss_scale", format_double(state.loss_scale.scale)},
                       {"loss_scale_good_steps", std::to_string(state.loss_scale.good_steps)},
                       {"loss_scale_skipped_steps", std::to_string(state.loss_scale.skipped_steps)},
                       {"loss_scale_skips_in_a_row", std::to_string(state.loss_scale.skips_in_a_row)},
                       {"random_streams", join(streams, '\n')}};
  fs::create_directories(dir);
  char name[64];
  std::snprintf(name, sizeof name, "ckpt-%lld.h5", static_cast<long long>(state.iteration));
  save_model((fs::path(dir) / name).string(), net, extras);
  if (keep <= 0) return;
  auto all = checkpoints_in(dir);
  for (std::size_t i = 0; i + keep < all.size(); ++i) fs::remove(all[i].second);
}

std::string find_latest_checkpoint(const std::string& dir, std::vector<std::string>& warnings) {
  auto all = checkpoints_in(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const std::string path = it->second.string();
    try {
      // Reading every tensor and attribute is what proves a checkpoint whole.
      load_model(path);
      auto lock = hdf5_lock();
      H5Id file = open_h5_read(path);
      read_string_attribute(file.get(), "random_streams", path);
      return path;
    } catch (const Error& e) {
      warnings.push_back("skipping checkpoint " + path + ": " + e.what());
    }
  }
  return "";
}

TrainingState restore_checkpoint(const std::string& path, Network& net, Optimizer& optimizer,
                                 const CheckpointIdentity& id, Communicator& comm, std::vector<std::string>& notes) {
  std::map<std::string, std::string> attrs;
  {
    auto lock = hdf5_lock();
    H5Id file = open_h5_read(path);
    for (const char* key : {"iteration", "epoch", "batch_in_epoch", "samples_seen", "best_validation_loss",
                            "validations_without_improvement", "world_size", "network_hash", "config_hash",
                            "random_streams"})
      attrs[key] = read_string_attribute(file.get(), key, path);
    for (const char* key : {"loss_scale", "loss_scale_good_steps", "loss_scale_skipped_steps",
                            "loss_scale_skips_in_a_row"})
      if (H5Aexists(file.get(), key) > 0) attrs[key] = read_string_attribute(file.get(), key, path);
  }
  if (attrs["network_hash"] != id.network_hash)
    fail(path + " was written for another network (layers, input or precision differ); resume needs the same network");
  if (attrs["config_hash"] != id.config_hash) notes.push_back("options changed since " + path + " was written");
  load_weights(path, net);
  optimizer.prepare(net.params());
  auto state = optimizer.state();
  {
    auto lock = hdf5_lock();
    H5Id file = open_h5_read(path);
    for (auto& [name, tensor] : state) tensor->copy_from(read_tensor(file.get(), "optimizer/" + name, path));
  }
  const int saved_world = std::stoi(attrs["world_size"]);
  auto streams = split(attrs["random_streams"], '\n');
  if (saved_world == comm.size() && static_cast<int>(streams.size()) == comm.size()) {
    net.set_random_state(streams[comm.rank()]);
  } else {
    notes.push_back("resuming a " + std::to_string(saved_world) + "-rank checkpoint on " + std::to_string(comm.size()) +
                    " ranks: the data is split anew and dropout streams start fresh");
    net.decorrelate_random_streams(comm.rank());
  }
  TrainingState s;
  s.iteration = std::stoll(attrs["iteration"]);
  s.epoch = std::stoll(attrs["epoch"]);
  s.batch_in_epoch = std::stoll(attrs["batch_in_epoch"]);
  s.samples_seen = std::stoll(attrs["samples_seen"]);
  s.best_validation_loss = std::stod(attrs["best_validation_loss"]);
  s.validations_without_improvement = std::stoi(attrs["validations_without_improvement"]);
  // Checkpoints of older versions have no loss-scale state: the run then
  // starts loss scaling afresh.
  if (attrs.count("loss_scale_good_steps")) {
    s.loss_scale.scale = std::stod(attrs["loss_scale"]);
    s.loss_scale.good_steps = std::stoll(attrs["loss_scale_good_steps"]);
    s.loss_scale.skipped_steps = std::stoll(attrs["loss_scale_skipped_steps"]);
    s.loss_scale.skips_in_a_row = std::stoi(attrs["loss_scale_skips_in_a_row"]);
  }
  return s;
}

}  // namespace dlscale
