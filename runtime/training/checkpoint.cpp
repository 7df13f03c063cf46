// Writing, finding and restoring checkpoints.
#include "runtime/training/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string_view>

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


// Moves a checkpoint out of the way, never deleting it: into dir/set-aside/,
// where neither --resume auto nor pruning looks.
void set_aside(const fs::path& file, const std::string& why, std::vector<std::string>& notes) {
  const fs::path aside = file.parent_path() / "set-aside";
  fs::create_directories(aside);
  fs::path target = aside / file.filename();
  for (int n = 1; fs::exists(target); ++n) target = aside / (file.filename().string() + "." + std::to_string(n));
  std::error_code ec;
  fs::rename(file, target, ec);
  if (ec) fail("cannot move " + file.string() + " to " + target.string() + ": " + ec.message());
  notes.push_back("moved " + file.string() + " to " + target.string() + " (" + why + ")");
}

// Reads every byte with plain POSIX calls: an error here is the filesystem's
// (EIO, ESTALE, EACCES), not the file's contents, and must not be mistaken
// for a damaged checkpoint. false when the file has gone.
bool read_through(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return false;
  auto io_error = [&](const char* what) {
    fail("cannot " + std::string(what) + " checkpoint " + path + ": " + std::strerror(errno) +
         "; a checkpoint that cannot be read now is not known to be damaged, so the run stops instead of "
         "resuming from an older one (which would lose work): fix the filesystem and resume again");
  };
  if (fd < 0) io_error("open");
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      errno = e;
      io_error("read");
    }
  }
  ::close(fd);
  return true;
}

// "" when the checkpoint at path is whole, else why it is damaged. Throws
// when it cannot be judged (an I/O error, a lock held elsewhere).
std::string damage_of(const std::string& path) {
  if (!read_through(path)) return "it has gone";
  try {
    // Reading every tensor and attribute is what proves a checkpoint whole.
    load_model(path);
    auto lock = hdf5_lock();
    H5Id file = open_h5_read(path);
    read_string_attribute(file.get(), "random_streams", path);
    return "";
  } catch (const Error& e) {
    const std::string why = e.what();
    if (why.find("unable to lock file") != std::string::npos)
      fail("cannot open checkpoint " + path + ": another process holds an HDF5 lock on it (" + why +
           "); the run stops instead of resuming from an older checkpoint");
    return why;
  }
}

// A fingerprint of everything restored that must agree across ranks.
std::string restored_fingerprint(const TrainingState& s, Network& net, Optimizer& optimizer) {
  std::size_t h = std::hash<std::int64_t>{}(s.iteration);
  auto mix = [&h](const Tensor& t) {
    h ^= std::hash<std::string_view>{}(std::string_view(static_cast<const char*>(t.raw()), t.bytes())) +
         0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  };
  for (auto& [name, t] : net.named_tensors()) mix(*t);
  for (auto& [name, t] : optimizer.state()) mix(*t);
  return std::to_string(s.iteration) + " " + std::to_string(h);
}

// The stored position means "batch b of epoch e as the sampler ordered it
// for this batch size, seed and shuffle": a resume that changes any of them
// would continue at another place than where the run stopped. Checkpoints
// written before these attributes existed are only checked by the trainer.
void refuse_changed_meaning(const std::string& path, std::map<std::string, std::string>& attrs,
                            const CheckpointIdentity& id) {
  auto refuse = [&](const char* option, const std::string& then, const std::string& now) {
    throw UsageError(path + " was written with " + option + " = " + then + ", this run has " + option + " = " + now +
                     "; its position (epoch " + attrs["epoch"] + ", batch " + attrs["batch_in_epoch"] +
                     " of the epoch) means another place in the data with another " + option + ", so resume with " +
                     option + " = " + then + " (or start a new run)");
  };
  if (attrs.count("mini_batch_size") && attrs["mini_batch_size"] != std::to_string(id.mini_batch_size))
    refuse("mini-batch-size", attrs["mini_batch_size"], std::to_string(id.mini_batch_size));
  if (attrs.count("seed") && attrs["seed"] != std::to_string(id.seed))
    refuse("seed", attrs["seed"], std::to_string(id.seed));
  if (attrs.count("shuffle") && attrs["shuffle"] != id.shuffle) refuse("shuffle", attrs["shuffle"], id.shuffle);
  if (attrs.count("sampler_version") && attrs["sampler_version"] != std::to_string(kSamplerVersion))
    throw UsageError(path + " was written by a dlscale whose sampler orders samples otherwise (sampler version " +
                     attrs["sampler_version"] + ", this one " + std::to_string(kSamplerVersion) +
                     "); its position cannot be continued: start a new run, or resume with that version");
}

}  // namespace

std::string write_checkpoint(const std::string& dir, Network& net, Optimizer& optimizer, const TrainingState& state,
                             const CheckpointIdentity& id, Communicator& comm, int keep) {
  // '\n' cannot occur in a stream state; '|' separates a rank's streams.
  const auto streams = comm.allgather(net.random_state());
  char name[64];
  std::snprintf(name, sizeof name, "ckpt-%lld.h5", static_cast<long long>(state.iteration));
  const std::string path = (fs::path(dir) / name).string();
  if (comm.rank() != 0) return path;
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
                       {"mini_batch_size", std::to_string(id.mini_batch_size)},
                       {"seed", std::to_string(id.seed)},
                       {"shuffle", id.shuffle},
                       {"sampler_version", std::to_string(kSamplerVersion)},
                       {"loss_scaling", id.loss_scaling ? "dynamic" : "off"},
                       {"loss_scale", format_double(state.loss_scale.scale)},
                       {"loss_scale_good_steps", std::to_string(state.loss_scale.good_steps)},
                       {"loss_scale_skipped_steps", std::to_string(state.loss_scale.skipped_steps)},
                       {"loss_scale_skips_in_a_row", std::to_string(state.loss_scale.skips_in_a_row)},
                       {"random_streams", join(streams, '\n')}};
  fs::create_directories(dir);
  save_model(path, net, extras);
  if (keep <= 0) return path;
  // Only older checkpoints are candidates: the one just written is whole (its
  // write and close were checked) and stays, whatever else the folder holds.
  std::vector<fs::path> older;
  for (auto& [iteration, path] : checkpoints_in(dir))
    if (iteration < state.iteration) older.push_back(path);
  const std::size_t keep_older = static_cast<std::size_t>(keep - 1);
  for (std::size_t i = 0; i + keep_older < older.size(); ++i) fs::remove(older[i]);
  return path;
}

void claim_checkpoint_folder(const std::string& dir, bool overwrite, Communicator& comm,
                             std::vector<std::string>& notes) {
  std::string error;
  if (comm.rank() == 0) {
    auto found = checkpoints_in(dir);
    if (!found.empty() && !overwrite)
      error = "checkpoint folder " + dir + " holds " + std::to_string(found.size()) +
              " checkpoint(s) of an earlier run (newest " + found.back().second.filename().string() +
              "); continue that run with --resume auto, or start afresh with --overwrite (its checkpoints are "
              "moved to " + dir + "/set-aside), or choose another --output or --checkpoint-path";
    else
      for (auto& [iteration, path] : found) set_aside(path, "--overwrite: a fresh run starts here", notes);
  }
  comm.broadcast(error, 0);
  if (!error.empty()) throw UsageError(error);
}

std::string choose_resume_checkpoint(const std::string& resume, const std::string& dir, Communicator& comm,
                                     std::vector<std::string>& notes) {
  std::string chosen;
  if (comm.rank() == 0) {
    if (resume == "auto") {
      auto all = checkpoints_in(dir);
      for (auto it = all.rbegin(); it != all.rend() && chosen.empty(); ++it) {
        const std::string damage = damage_of(it->second.string());
        if (damage.empty())
          chosen = it->second.string();
        else
          set_aside(it->second, "skipped, damaged: " + damage, notes);
      }
    } else {
      const std::string damage = damage_of(resume);
      if (!damage.empty()) fail("cannot resume from " + resume + ": " + damage);
      chosen = resume;
      // Checkpoints newer than the one asked for belong to the branch being abandoned.
      const std::int64_t from = checkpoint_iteration(resume);
      if (from >= 0)
        for (auto& [iteration, path] : checkpoints_in(dir))
          if (iteration > from && !fs::equivalent(path, resume))
            set_aside(path, "newer than --resume " + resume + ", so --resume auto cannot jump back to it", notes);
    }
  }
  comm.broadcast(chosen, 0);
  return chosen;
}

TrainingState restore_checkpoint(const std::string& path, Network& net, Optimizer& optimizer,
                                 const CheckpointIdentity& id, Communicator& comm, std::vector<std::string>& notes,
                                 const LossScaleState& fresh_loss_scale) {
  std::map<std::string, std::string> attrs;
  {
    auto lock = hdf5_lock();
    H5Id file = open_h5_read(path);
    for (const char* key : {"iteration", "epoch", "batch_in_epoch", "samples_seen", "best_validation_loss",
                            "validations_without_improvement", "world_size", "network_hash", "config_hash",
                            "random_streams"})
      attrs[key] = read_string_attribute(file.get(), key, path);
    for (const char* key : {"loss_scale", "loss_scale_good_steps", "loss_scale_skipped_steps",
                            "loss_scale_skips_in_a_row", "mini_batch_size", "seed", "shuffle", "sampler_version",
                            "loss_scaling"})
      if (H5Aexists(file.get(), key) > 0) attrs[key] = read_string_attribute(file.get(), key, path);
  }
  if (attrs["network_hash"] != id.network_hash)
    fail(path + " was written for another network (layers, input or precision differ); resume needs the same network");
  refuse_changed_meaning(path, attrs, id);
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
  s.loss_scale = fresh_loss_scale;
  s.iteration = std::stoll(attrs["iteration"]);
  s.epoch = std::stoll(attrs["epoch"]);
  s.batch_in_epoch = std::stoll(attrs["batch_in_epoch"]);
  s.samples_seen = std::stoll(attrs["samples_seen"]);
  s.best_validation_loss = std::stod(attrs["best_validation_loss"]);
  s.validations_without_improvement = std::stoi(attrs["validations_without_improvement"]);
  // Checkpoints of older versions have no loss-scale state, and one written
  // without loss scaling holds scale 1: the run then starts loss scaling
  // afresh, at initial-loss-scale (the state the trainer set before).
  const bool scaled_then = attrs.count("loss_scaling") ? attrs["loss_scaling"] == "dynamic" : true;
  if (id.loss_scaling && !scaled_then)
    notes.push_back(path + " was written without loss scaling: dynamic loss scaling starts at initial-loss-scale");
  if (attrs.count("loss_scale_good_steps") && (scaled_then || !id.loss_scaling)) {
    s.loss_scale.scale = std::stod(attrs["loss_scale"]);
    s.loss_scale.good_steps = std::stoll(attrs["loss_scale_good_steps"]);
    s.loss_scale.skipped_steps = std::stoll(attrs["loss_scale_skipped_steps"]);
    s.loss_scale.skips_in_a_row = std::stoi(attrs["loss_scale_skips_in_a_row"]);
  }
  // Every rank read the file itself: make sure they all hold the same thing.
  const auto all = comm.allgather(restored_fingerprint(s, net, optimizer));
  for (int r = 1; r < comm.size(); ++r)
    if (all[r] != all[0])
      fail("rank " + std::to_string(r) + " restored another state from " + path + " than rank 0 (iteration and "
           "parameter hash '" + all[r] + "' against '" + all[0] + "'); the ranks read different contents of the "
           "same file, so training would mix weights: check the shared filesystem and resume again");
  return s;
}

}  // namespace dlscale
