// io/hdf5.h: tensors and attributes round trip, paths in error messages,
// and commit_file's rename.
#include "io/hdf5.h"

#include <gtest/gtest.h>

#include <string>

#include "io/io_test_util.h"

namespace dlscale {
namespace {

using test::TempDir;

TEST(Hdf5, TensorsRoundTripInNestedGroups) {
  TempDir tmp;
  std::string path = tmp / "t.h5";
  Tensor a({2, 3}, DType::f32), b({4}, DType::f64);
  for (int i = 0; i < 6; ++i) a.set(i, i * 0.5);
  for (int i = 0; i < 4; ++i) b.set(i, 1.0 / (i + 3));
  {
    H5Id file = create_h5(path);
    write_tensor(file.get(), "layers/dense1/weight", a);
    write_tensor(file.get(), "bias", b);
  }
  H5Id file = open_h5_read(path);
  EXPECT_TRUE(h5_exists(file.get(), "layers/dense1/weight"));
  EXPECT_TRUE(h5_exists(file.get(), "layers"));
  EXPECT_FALSE(h5_exists(file.get(), "layers/dense2/weight"));
  EXPECT_FALSE(h5_exists(file.get(), "nothing/here"));
  Tensor ra = read_tensor(file.get(), "layers/dense1/weight", path);
  Tensor rb = read_tensor(file.get(), "bias", path);
  EXPECT_EQ(ra.shape(), a.shape());
  EXPECT_EQ(ra.dtype(), DType::f32);
  EXPECT_EQ(rb.dtype(), DType::f64);
  EXPECT_EQ(std::memcmp(ra.raw(), a.raw(), a.bytes()), 0);
  EXPECT_EQ(std::memcmp(rb.raw(), b.raw(), b.bytes()), 0);
  EXPECT_ERROR_CONTAINS(read_tensor(file.get(), "missing", path), path + ": dataset 'missing' is missing");
}

TEST(Hdf5, Attributes) {
  TempDir tmp;
  std::string path = tmp / "a.h5";
  {
    H5Id file = create_h5(path);
    write_string_attribute(file.get(), "format", "first");
    write_string_attribute(file.get(), "format", "dlscale-model");  // replaces
    write_int_attribute(file.get(), "version", 3);
    write_int_attribute(file.get(), "big", std::int64_t{1} << 40);
  }
  H5Id file = open_h5_read(path);
  EXPECT_EQ(read_string_attribute(file.get(), "format", path), "dlscale-model");
  EXPECT_EQ(read_int_attribute(file.get(), "version", path), 3);
  EXPECT_EQ(read_int_attribute(file.get(), "big", path), std::int64_t{1} << 40);
  EXPECT_ERROR_CONTAINS(read_int_attribute(file.get(), "nope", path), path + ": attribute 'nope' is missing");
  EXPECT_ERROR_CONTAINS(read_int_attribute(file.get(), "format", path), "is not an integer");
}

TEST(Hdf5, OpenErrorsNameThePath) {
  TempDir tmp;
  EXPECT_ERROR_CONTAINS(open_h5_read(tmp / "none.h5"), tmp / "none.h5");
  test::write_text(tmp / "bad.h5", "garbage, not HDF5");
  EXPECT_ERROR_CONTAINS(open_h5_read(tmp / "bad.h5"), tmp / "bad.h5" + ": it is not an HDF5 file");
  EXPECT_ERROR_CONTAINS(create_h5(tmp / "no/such/folder/x.h5"), tmp / "no/such/folder/x.h5");
}

// A small HDF5 file at path (one float32 dataset, HDF5's default layout,
// superblock version 0); returns its bytes.
std::string write_small_file(const std::string& path) {
  {
    H5Id file = create_h5(path);
    write_tensor(file.get(), "x", Tensor({3}, DType::f32));
  }
  return test::read_text(path);
}

// Writes v into s at `at` as 8 little-endian bytes.
void put_u64(std::string& s, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) s[at + i] = static_cast<char>(v >> (8 * i));
}

// libhdf5 1.10 crashes on a file whose superblock caches a root-group heap
// or B-tree that is not there (tests/fuzz regressions/fuzz_shard); such a
// file must be refused with an error before HDF5 walks it, and an intact
// one opened as before.
TEST(Hdf5, RootGroupTablesAreCheckedBeforeHdf5WalksThem) {
  TempDir tmp;
  std::string path = tmp / "t.h5";
  const std::string bytes = write_small_file(path);
  ASSERT_EQ(bytes[8], 0) << "HDF5's default superblock is version 0";
  EXPECT_NO_THROW(open_h5_read(path));
  for (const std::string tag : {"HEAP", "TREE"}) {
    SCOPED_TRACE(tag);
    const std::size_t at = bytes.find(tag);
    ASSERT_NE(at, std::string::npos);
    std::string damaged = bytes;
    damaged.replace(at, 4, "\0\0\0\0", 4);
    test::write_text(path, damaged);
    EXPECT_ERROR_CONTAINS(open_h5_read(path), path + ": it is damaged (its root group's");
  }
  // With the superblock's cache switched off, HDF5 takes the addresses from
  // the root group's object header; they are checked there too.
  std::string uncached = bytes;
  const std::size_t heap = uncached.find("HEAP");
  uncached.replace(heap, 4, "\0\0\0\0", 4);
  ASSERT_EQ(uncached[72], 1) << "the root entry's cache type (at 24 + 4*8 + 2*8): a cached symbol table";
  uncached[72] = 0;
  test::write_text(path, uncached);
  EXPECT_ERROR_CONTAINS(open_h5_read(path),
                        path + ": it is damaged (its root group's name heap is not where its object header says)");
  // The cached addresses themselves pointing past the end of the file.
  std::string past = bytes;
  for (int i = 0; i < 8; ++i) past[88 + i] = static_cast<char>(0x7f);
  test::write_text(path, past);
  EXPECT_ERROR_CONTAINS(open_h5_read(path), "name heap is not where the superblock says");
}

// libhdf5 1.10 follows a local heap's free list without noticing a loop and
// allocates 32 bytes per step until memory runs out (tests/fuzz
// regressions/fuzz_shard/hdf5-oom-35m-small-allocations.bin): a root group
// heap whose free list loops is refused before HDF5 reads it.
TEST(Hdf5, RootHeapFreeListThatLoopsIsRefused) {
  TempDir tmp;
  std::string path = tmp / "t.h5";
  const std::string bytes = write_small_file(path);
  const std::size_t heap = bytes.find("HEAP");
  ASSERT_NE(heap, std::string::npos);
  auto u64 = [&](std::size_t at) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(bytes[at + i]);
    return v;
  };
  // Header: signature, version, 3 reserved; data size, free-list head, data address (8 bytes each here).
  // A free block starts with the offset of the next one (1: none), then its size.
  const std::uint64_t data_size = u64(heap + 8), head = u64(heap + 16), data = u64(heap + 24);
  ASSERT_LT(head + 16, data_size) << "HDF5 leaves free space in a new root group's heap";
  ASSERT_EQ(u64(data + head), 1u) << "one free block";
  EXPECT_NO_THROW(open_h5_read(path));
  std::string itself = bytes;
  put_u64(itself, data + head, head);  // the block says the next one is itself
  std::string two = bytes;
  put_u64(two, data + head, head + 8);      // the next block is 8 bytes on,
  put_u64(two, data + head + 8, head);      // and that one's next is the first again
  for (const std::string& looped : {itself, two}) {
    test::write_text(path, looped);
    EXPECT_ERROR_CONTAINS(open_h5_read(path),
                          path + ": it is damaged (its root group's name heap has a free list that loops)");
  }
}

// libhdf5 1.10 adds a local heap's data segment size to addresses without
// checking for overflow: a size near 2^64 ended in a memcpy of a negative
// size, an address of 2^64-1 in a copy from a null buffer (tests/fuzz
// regressions/fuzz_shard/hdf5-crash-heap-*.bin). A root group heap whose
// data segment does not lie inside the file is refused first.
TEST(Hdf5, RootHeapDataSegmentOutsideTheFileIsRefused) {
  TempDir tmp;
  std::string path = tmp / "t.h5";
  const std::string bytes = write_small_file(path);
  const std::size_t heap = bytes.find("HEAP");
  ASSERT_NE(heap, std::string::npos);
  // Header: signature, version, 3 reserved; data size, free-list head, data address (8 bytes each here).
  const std::uint64_t wraps = ~std::uint64_t{0} - 31;  // plus the 32-byte header: 0
  for (auto [field, value] : {std::pair<int, std::uint64_t>{8, wraps}, {8, bytes.size()}, {24, bytes.size() - 4}, {24, ~std::uint64_t{0}}}) {
    SCOPED_TRACE(std::to_string(field) + ": " + std::to_string(value));
    std::string damaged = bytes;
    put_u64(damaged, heap + field, value);
    test::write_text(path, damaged);
    EXPECT_ERROR_CONTAINS(open_h5_read(path), path + ": it is damaged (its root group's name heap has a data segment of");
  }
}

TEST(Hdf5, WriteErrorsNameTheFile) {
  TempDir tmp;
  { H5Id file = create_h5(tmp / "ro.h5"); }
  H5Id file = open_h5_read(tmp / "ro.h5");  // read-only: every write fails
  EXPECT_ERROR_CONTAINS(write_tensor(file.get(), "w", Tensor({2})), tmp / "ro.h5" + ": cannot write dataset 'w'");
  EXPECT_ERROR_CONTAINS(write_int_attribute(file.get(), "n", 1), tmp / "ro.h5" + ": cannot create attribute n");
}

TEST(Hdf5, CommitFileRenamesOntoTheTarget) {
  TempDir tmp;
  {
    H5Id file = create_h5(tmp / "ckpt.h5.tmp");
    write_int_attribute(file.get(), "iteration", 7);
  }
  test::write_text(tmp / "ckpt.h5", "old");
  commit_file(tmp / "ckpt.h5.tmp", tmp / "ckpt.h5");
  EXPECT_FALSE(std::filesystem::exists(tmp / "ckpt.h5.tmp"));
  H5Id file = open_h5_read(tmp / "ckpt.h5");
  EXPECT_EQ(read_int_attribute(file.get(), "iteration", tmp / "ckpt.h5"), 7);
  EXPECT_ERROR_CONTAINS(commit_file(tmp / "gone.tmp", tmp / "x.h5"), tmp / "gone.tmp");
}

}  // namespace
}  // namespace dlscale
