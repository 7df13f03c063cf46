// Small RAII layer over the HDF5 C API shared by datasets, models and
// checkpoints. Debian's serial HDF5 is not built thread-safe, so every HDF5
// call in dlscale runs under hdf5_lock().
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/core/tensor.h"

namespace dlscale {

std::unique_lock<std::recursive_mutex> hdf5_lock();

// The innermost messages of HDF5's error stack for the calling thread
// ("truncated file: eof = ..."), or "" when it is empty.
std::string hdf5_error_text();
// Throws Error("<message> (<call> failed at <file>:<line>: <HDF5's reason>)")
// when rc < 0; `message` should name the file being read or written.
void check_h5(long long rc, const char* call, const std::string& message, const char* file, int line);
// check_h5 for calls that return a handle, which it passes through:
//   H5Id set(DLSCALE_H5_ID(H5Dopen2(file, "samples", H5P_DEFAULT), path + ": cannot open /samples"));
hid_t check_h5_id(hid_t id, const char* call, const std::string& message, const char* file, int line);

// Owns one hid_t and closes it with the right H5*close for its type.
class H5Id {
 public:
  H5Id() = default;
  explicit H5Id(hid_t id) : id_(id) {}
  ~H5Id();
  H5Id(H5Id&& o) noexcept : id_(o.id_) { o.id_ = -1; }
  H5Id& operator=(H5Id&& o) noexcept;
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  hid_t get() const { return id_; }
  // Gives up ownership: the caller closes the handle (and checks the close).
  hid_t release() {
    const hid_t id = id_;
    id_ = -1;
    return id;
  }
  explicit operator bool() const { return id_ >= 0; }

 private:
  hid_t id_ = -1;
};

// Opening and creating files; errors name the path. HDF5's own error stack
// printing is turned off: dlscale reports one clear line instead.
H5Id open_h5_read(const std::string& path);
H5Id create_h5(const std::string& path);  // truncates
// A dataset creation property list without object timestamps: every file
// dlscale writes (models, checkpoints, shards) then comes out byte for byte
// the same from the same contents, so `cmp` can check determinism.
H5Id untimed_dataset_creation(const std::string& what);

// Tensors as float32/float64 datasets at `name` (a path relative to loc; the
// parent groups are created).
void write_tensor(hid_t loc, const std::string& name, const Tensor& t);
// Reads into a tensor of the dataset's own type; `file` names it in errors.
Tensor read_tensor(hid_t loc, const std::string& name, const std::string& file);
bool h5_exists(hid_t loc, const std::string& name);

void write_string_attribute(hid_t loc, const std::string& name, const std::string& value);
std::string read_string_attribute(hid_t loc, const std::string& name, const std::string& file);
void write_int_attribute(hid_t loc, const std::string& name, std::int64_t value);
std::int64_t read_int_attribute(hid_t loc, const std::string& name, const std::string& file);

// Closes a file opened for writing and checks the close: HDF5 writes its last
// metadata then, and the OS may report a deferred write error only at close
// (NFS does). A file whose close failed must never be committed.
void close_h5_file(H5Id& file, const std::string& path);

// Makes `tmp_path` durable (fsync) and renames it onto `final_path`, so
// readers see either the old file or the complete new one.
void commit_file(const std::string& tmp_path, const std::string& final_path);
// fsync of a file or folder; errors name the path.
void sync_path(const std::string& path);

}  // namespace dlscale

#define DLSCALE_CHECK_H5(call, message) \
  ::dlscale::check_h5(static_cast<long long>(call), #call, (message), __FILE__, __LINE__)
#define DLSCALE_H5_ID(call, message) ::dlscale::check_h5_id((call), #call, (message), __FILE__, __LINE__)
