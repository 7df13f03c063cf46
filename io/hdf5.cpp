// The RAII layer over the HDF5 C API: the global lock, handle ownership,
// error text taken from HDF5's own stack, tensors and attributes, and
// durable file commits.
#include "io/hdf5.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

namespace dlscale {

std::unique_lock<std::recursive_mutex> hdf5_lock() {
  static std::recursive_mutex mutex;
  std::unique_lock<std::recursive_mutex> lock(mutex);
  // Automatic error printing is a per-thread setting in thread-safe builds,
  // so every thread that touches HDF5 silences it once; dlscale reports the
  // stack itself through hdf5_error_text().
  thread_local bool quiet = false;
  if (!quiet) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    quiet = true;
  }
  return lock;
}

namespace {
herr_t collect_error(unsigned, const H5E_error2_t* entry, void* data) {
  auto* messages = static_cast<std::vector<std::string>*>(data);
  if (entry->desc && *entry->desc) messages->push_back(entry->desc);
  return 0;
}
}  // namespace

std::string hdf5_error_text() {
  auto lock = hdf5_lock();
  std::vector<std::string> messages;  // outermost call first
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &messages);
  if (messages.empty()) return "";
  // The outermost entry says what failed, the innermost says why.
  if (messages.size() == 1) return messages.front();
  return messages.front() + ": " + messages.back();
}

void check_h5(long long rc, const char* call, const std::string& message, const char* file, int line) {
  if (rc >= 0) return;
  fail_call(message, call, hdf5_error_text(), file, line);
}

hid_t check_h5_id(hid_t id, const char* call, const std::string& message, const char* file, int line) {
  check_h5(id, call, message, file, line);
  return id;
}

H5Id::~H5Id() {
  if (id_ < 0) return;
  auto lock = hdf5_lock();
  switch (H5Iget_type(id_)) {
    case H5I_FILE:
      H5Fclose(id_);
      break;
    case H5I_GROUP:
      H5Gclose(id_);
      break;
    case H5I_DATATYPE:
      H5Tclose(id_);
      break;
    case H5I_DATASPACE:
      H5Sclose(id_);
      break;
    case H5I_DATASET:
      H5Dclose(id_);
      break;
    case H5I_ATTR:
      H5Aclose(id_);
      break;
    case H5I_GENPROP_LST:
      H5Pclose(id_);
      break;
    default:
      H5Idec_ref(id_);
      break;
  }
}

H5Id& H5Id::operator=(H5Id&& o) noexcept {
  if (this != &o) {
    H5Id old(id_);  // closes the previous handle
    id_ = o.id_;
    o.id_ = -1;
  }
  return *this;
}

namespace {

// Little-endian unsigned of `bytes` bytes at p.
std::uint64_t read_le(const unsigned char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Reads `n` bytes at `address` (relative to the superblock's base) into
// out; false when they are not all inside the file.
bool read_at(std::ifstream& in, std::uint64_t file_size, std::uint64_t base, std::uint64_t address,
             unsigned char* out, std::size_t n) {
  if (base >= file_size || address >= file_size - base || file_size - base - address < n) return false;
  in.clear();
  in.seekg(static_cast<std::streamoff>(base + address));
  in.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(n));
  return static_cast<std::size_t>(in.gcount()) == n;
}

// Two libhdf5 1.10 bugs in reading a local heap (both found by
// tests/fuzz/fuzz_shard):
// - it adds the data segment's size to addresses without checking for
//   overflow, so a size near 2^64 passes its end-of-file checks and ends in
//   a memcpy of a negative size, or in a failed allocation that leaves the
//   metadata accumulator's buffer null and a later read copying from it. A
//   segment that does not lie wholly inside the file is refused here;
// - it builds the free list by following each free block's "next" offset
//   and allocating 32 bytes per step, without noticing a loop: on a damaged
//   heap it allocates until memory runs out (35 million allocations, then
//   the 2 GiB limit). Following the list here costs one small read per free
//   block; a block seen twice is the loop. An offset past the data segment
//   is left to HDF5, which refuses it.
void check_local_heap(std::ifstream& in, const std::string& path, std::uint64_t file_size, std::uint64_t base,
                      std::uint64_t heap, int o, int l) {
  constexpr std::uint64_t kNone = 1;  // H5HL_FREE_NULL: the end of the list
  unsigned char header[8 + 2 * 8 + 8];
  if (!read_at(in, file_size, base, heap, header, 8 + 2 * l + o)) return;
  const std::uint64_t data_size = read_le(header + 8, l), data = read_le(header + 8 + 2 * l, o);
  const std::uint64_t in_file = file_size - base;  // read_at above succeeded, so base < file_size
  if (data_size > in_file || data > in_file - data_size)
    fail("cannot open " + path + ": it is damaged (its root group's name heap has a data segment of " +
         std::to_string(data_size) + " bytes at " + std::to_string(data) + ", outside the file)");
  std::set<std::uint64_t> seen;
  for (std::uint64_t next = read_le(header + 8 + l, l); next != kNone && next < data_size;) {
    if (!seen.insert(next).second)
      fail("cannot open " + path + ": it is damaged (its root group's name heap has a free list that loops)");
    unsigned char field[8];
    // data + next cannot overflow: the segment lies inside the file (above) and next < data_size.
    if (!read_at(in, file_size, base, data + next, field, l)) return;
    next = read_le(field, l);
  }
}

struct SymbolTable {
  std::uint64_t btree = 0, heap = 0;
};

// The symbol-table message (type 0x11: B-tree and heap address) in the first
// chunk of the version 1 object header at `address`, if it holds one.
std::optional<SymbolTable> header_symbol_table(std::ifstream& in, std::uint64_t file_size, std::uint64_t base,
                                               std::uint64_t address, int o) {
  unsigned char prefix[16];  // version, reserved, messages, reference count, chunk size, padding
  if (!read_at(in, file_size, base, address, prefix, sizeof prefix) || prefix[0] != 1) return std::nullopt;
  const std::uint64_t messages = read_le(prefix + 2, 2);
  std::vector<unsigned char> chunk(std::min<std::uint64_t>(read_le(prefix + 8, 4), 1 << 16));
  if (!read_at(in, file_size, base, address + sizeof prefix, chunk.data(), chunk.size())) return std::nullopt;
  std::size_t at = 0;  // each message: type (2), size (2), flags (1), reserved (3), data
  for (std::uint64_t m = 0; m < messages && at + 8 <= chunk.size(); ++m) {
    const std::uint64_t type = read_le(&chunk[at], 2), length = read_le(&chunk[at + 2], 2);
    if (type == 0x11 && at + 8 + 2 * o <= chunk.size())
      return SymbolTable{read_le(&chunk[at + 8], o), read_le(&chunk[at + 8 + o], o)};
    at += 8 + length;
  }
  return std::nullopt;
}

// libhdf5 1.10 crashes (a memcpy from a null accumulator buffer, in
// H5Lexists and in h5dump alike) on a file whose root group's symbol table
// names a heap that is not there; found by tests/fuzz/fuzz_shard, twice:
// through the copy a version 0/1 superblock caches (what HDF5 writes by
// default), and, with that cache switched off, through the root group's
// object header. So before HDF5 walks the root group, both are checked:
// the B-tree and local heap must lie inside the file and begin with their
// signatures, and the heap's data segment must lie inside the file and its
// free list must end. Other layouts are left to
// HDF5. Dataset shards are checked against their CRC-32 before this
// (io/dataset.cpp); these checks keep the other files (models, checkpoints)
// and shards written with a damaged layout away from the same libhdf5 bugs.
void check_root_group_tables(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char sb[128] = {};
  in.read(reinterpret_cast<char*>(sb), sizeof sb);
  const auto got = static_cast<std::size_t>(in.gcount());
  static const unsigned char signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  if (got < 8 || std::memcmp(sb, signature, 8) != 0 || sb[8] > 1) return;
  const int o = sb[13], l = sb[14];  // sizes of offsets and of lengths
  if ((o != 4 && o != 8) || (l != 4 && l != 8)) return;
  const std::size_t addresses = sb[8] == 0 ? 24 : 28;  // version 1 adds 4 bytes of B-tree settings
  // Base, free space, end of file, driver block; then the root entry: name, header, cache type, reserved, scratch.
  const std::size_t entry = addresses + 4 * o, cache_type = entry + 2 * o, scratch = cache_type + 8;
  if (got < scratch + 2 * o) return;
  const std::uint64_t base = read_le(sb + addresses, o);
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  auto check = [&](const SymbolTable& table, const char* source) {
    auto expect = [&](std::uint64_t address, const char* tag, const char* what) {
      unsigned char found[4] = {};
      if (!read_at(in, size, base, address, found, 4) || std::memcmp(found, tag, 4) != 0)
        fail("cannot open " + path + ": it is damaged (its root group's " + what + " is not where " + source +
             " says)");
    };
    expect(table.btree, "TREE", "B-tree");
    expect(table.heap, "HEAP", "name heap");
    check_local_heap(in, path, size, base, table.heap, o, l);
  };
  if (read_le(sb + cache_type, 4) == 1)
    check({read_le(sb + scratch, o), read_le(sb + scratch + o, o)}, "the superblock");
  if (auto table = header_symbol_table(in, size, base, read_le(sb + entry + o, o), o))
    check(*table, "its object header");
}

}  // namespace

H5Id open_h5_read(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("cannot open " + path + ": the file does not exist");
  check_root_group_tables(path);
  auto lock = hdf5_lock();
  return H5Id(DLSCALE_H5_ID(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT),
                            "cannot open " + path + ": it is not an HDF5 file, or it is truncated or damaged"));
}

H5Id create_h5(const std::string& path) {
  auto lock = hdf5_lock();
  return H5Id(DLSCALE_H5_ID(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "cannot create " + path));
}

H5Id untimed_dataset_creation(const std::string& what) {
  auto lock = hdf5_lock();
  H5Id dcpl(DLSCALE_H5_ID(H5Pcreate(H5P_DATASET_CREATE), what));
  DLSCALE_CHECK_H5(H5Pset_obj_track_times(dcpl.get(), 0), what);
  return dcpl;
}

bool h5_exists(hid_t loc, const std::string& name) {
  auto lock = hdf5_lock();
  // H5Lexists fails (rather than answering false) when a parent group is
  // missing, so walk the path one component at a time.
  std::size_t pos = 0;
  while (true) {
    std::size_t slash = name.find('/', pos);
    std::string prefix = name.substr(0, slash);
    if (!prefix.empty() && prefix != "/" && H5Lexists(loc, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash == std::string::npos) return true;
    pos = slash + 1;
  }
}

namespace {
// The file behind `loc`, so write errors can name it ("disk full" on which file?).
std::string file_of(hid_t loc) {
  ssize_t n = H5Fget_name(loc, nullptr, 0);
  if (n <= 0) return "HDF5 file";
  std::string name(static_cast<std::size_t>(n) + 1, '\0');
  H5Fget_name(loc, name.data(), name.size());
  name.resize(static_cast<std::size_t>(n));
  return name;
}
}  // namespace

void write_tensor(hid_t loc, const std::string& name, const Tensor& t) {
  auto lock = hdf5_lock();
  const std::string what = file_of(loc) + ": cannot write dataset '" + name + "'";
  std::vector<hsize_t> dims(t.shape().begin(), t.shape().end());
  H5Id space(DLSCALE_H5_ID(
      dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
      what));
  H5Id lcpl(DLSCALE_H5_ID(H5Pcreate(H5P_LINK_CREATE), what));
  DLSCALE_CHECK_H5(H5Pset_create_intermediate_group(lcpl.get(), 1), what);
  bool f64 = t.dtype() == DType::f64;
  hid_t file_type = f64 ? H5T_IEEE_F64LE : H5T_IEEE_F32LE;
  hid_t mem_type = f64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
  H5Id dcpl = untimed_dataset_creation(what);
  H5Id set(DLSCALE_H5_ID(H5Dcreate2(loc, name.c_str(), file_type, space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT),
                         what));
  if (!t.empty()) DLSCALE_CHECK_H5(H5Dwrite(set.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.raw()), what);
}

Tensor read_tensor(hid_t loc, const std::string& name, const std::string& file) {
  auto lock = hdf5_lock();
  if (!h5_exists(loc, name)) fail(file + ": dataset '" + name + "' is missing");
  H5Id set(DLSCALE_H5_ID(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), file + ": cannot open dataset '" + name + "'"));
  H5Id type(DLSCALE_H5_ID(H5Dget_type(set.get()), file + ": cannot read the type of '" + name + "'"));
  std::size_t size = H5Tget_size(type.get());
  if (H5Tget_class(type.get()) != H5T_FLOAT || (size != 4 && size != 8))
    fail(file + ": dataset '" + name + "' is not float32 or float64");
  H5Id space(H5Dget_space(set.get()));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  check_h5(rank, "H5Sget_simple_extent_ndims", file + ": cannot read the shape of '" + name + "'", __FILE__, __LINE__);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  DType dtype = size == 8 ? DType::f64 : DType::f32;
  Tensor t(Shape(dims.begin(), dims.end()), dtype);
  if (!t.empty()) {
    hid_t mem_type = dtype == DType::f64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
    DLSCALE_CHECK_H5(H5Dread(set.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.raw()),
                     file + ": cannot read dataset '" + name + "'");
  }
  return t;
}

namespace {
// Replaces an attribute of the same name so rewriting a file is idempotent.
H5Id create_attribute(hid_t loc, const std::string& name, hid_t type, hid_t space) {
  if (H5Aexists(loc, name.c_str()) > 0)
    DLSCALE_CHECK_H5(H5Adelete(loc, name.c_str()), file_of(loc) + ": cannot replace attribute " + name);
  H5Id attr(DLSCALE_H5_ID(H5Acreate2(loc, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT),
                          file_of(loc) + ": cannot create attribute " + name));
  return attr;
}

H5Id open_attribute(hid_t loc, const std::string& name, const std::string& file) {
  if (H5Aexists(loc, name.c_str()) <= 0) fail(file + ": attribute '" + name + "' is missing");
  H5Id attr(DLSCALE_H5_ID(H5Aopen(loc, name.c_str(), H5P_DEFAULT), file + ": cannot open attribute '" + name + "'"));
  return attr;
}
}  // namespace

void write_string_attribute(hid_t loc, const std::string& name, const std::string& value) {
  auto lock = hdf5_lock();
  // Variable-length UTF-8 so h5py returns a str, not bytes.
  H5Id type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  H5Id space(H5Screate(H5S_SCALAR));
  H5Id attr = create_attribute(loc, name, type.get(), space.get());
  const char* text = value.c_str();
  DLSCALE_CHECK_H5(H5Awrite(attr.get(), type.get(), &text), file_of(loc) + ": cannot write attribute " + name);
}

std::string read_string_attribute(hid_t loc, const std::string& name, const std::string& file) {
  auto lock = hdf5_lock();
  H5Id attr = open_attribute(loc, name, file);
  H5Id type(H5Aget_type(attr.get()));
  if (H5Tget_class(type.get()) != H5T_STRING) fail(file + ": attribute '" + name + "' is not a string");
  std::string message = file + ": cannot read attribute '" + name + "'";
  if (H5Tis_variable_str(type.get()) > 0) {
    H5Id mem(H5Tcopy(H5T_C_S1));
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));  // HDF5 will not convert between ASCII and UTF-8
    char* text = nullptr;
    DLSCALE_CHECK_H5(H5Aread(attr.get(), mem.get(), &text), message);
    std::string value = text ? text : "";
    H5free_memory(text);
    return value;
  }
  std::size_t size = H5Tget_size(type.get());
  std::string value(size, '\0');
  DLSCALE_CHECK_H5(H5Aread(attr.get(), type.get(), value.data()), message);
  value.resize(std::strlen(value.c_str()));  // fixed-length strings are null padded
  return value;
}

void write_int_attribute(hid_t loc, const std::string& name, std::int64_t value) {
  auto lock = hdf5_lock();
  H5Id space(H5Screate(H5S_SCALAR));
  H5Id attr = create_attribute(loc, name, H5T_STD_I64LE, space.get());
  DLSCALE_CHECK_H5(H5Awrite(attr.get(), H5T_NATIVE_INT64, &value), file_of(loc) + ": cannot write attribute " + name);
}

std::int64_t read_int_attribute(hid_t loc, const std::string& name, const std::string& file) {
  auto lock = hdf5_lock();
  H5Id attr = open_attribute(loc, name, file);
  H5Id type(H5Aget_type(attr.get()));
  if (H5Tget_class(type.get()) != H5T_INTEGER) fail(file + ": attribute '" + name + "' is not an integer");
  std::int64_t value = 0;
  DLSCALE_CHECK_H5(H5Aread(attr.get(), H5T_NATIVE_INT64, &value), file + ": cannot read attribute '" + name + "'");
  return value;
}

void sync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open " + path + " to flush it: " + std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some filesystems refuse fsync on a folder; the data files were synced.
  if (rc != 0 && err != EINVAL && err != EBADF) fail("cannot flush " + path + " to disk: " + std::strerror(err));
}

void close_h5_file(H5Id& file, const std::string& path) {
  auto lock = hdf5_lock();
  DLSCALE_CHECK_H5(H5Fclose(file.release()), "cannot finish writing " + path + " (closing it failed: disk full or an I/O error?)");
}

void commit_file(const std::string& tmp_path, const std::string& final_path) {
  sync_path(tmp_path);
  if (std::rename(tmp_path.c_str(), final_path.c_str()) != 0)
    fail("cannot rename " + tmp_path + " to " + final_path + ": " + std::strerror(errno));
  std::string dir = std::filesystem::path(final_path).parent_path().string();
  sync_path(dir.empty() ? "." : dir);
}

}  // namespace dlscale
