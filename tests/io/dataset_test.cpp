// The dataset format end to end: write_dataset → open_dataset → read, the
// reader's slicing, and the layout of the shard files.
#include "io/dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "io/file_checksum.h"
#include "io/hdf5.h"
#include "io/io_test_util.h"

namespace dlscale {
namespace {

using test::TempDir;

// Checks every value and label of x against the synthetic formula.
void expect_samples(const DatasetInfo& info, const std::vector<std::int64_t>& indices, const Tensor& x,
                    const std::vector<std::int32_t>& labels) {
  const std::int64_t per = numel(info.sample_shape);
  ASSERT_EQ(x.dim(0), static_cast<std::int64_t>(indices.size()));
  ASSERT_EQ(labels.size(), indices.size());
  for (std::size_t k = 0; k < indices.size(); ++k) {
    EXPECT_EQ(labels[k], test::label_value(indices[k], info.num_classes)) << "position " << k;
    for (std::int64_t e = 0; e < per; ++e) {
      double want = test::expected_value(info.sample_type, indices[k], e);
      double got = x.at(static_cast<std::int64_t>(k) * per + e);
      if (x.dtype() == DType::f64) {
        ASSERT_EQ(got, want) << "sample " << indices[k] << " element " << e;
      } else {
        ASSERT_NEAR(got, want, 1e-6) << "sample " << indices[k] << " element " << e;
      }
    }
  }
}

std::vector<std::int64_t> all_indices(std::int64_t n) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), std::int64_t{0});
  return v;
}

TEST(Dataset, RoundTripUint8Images) {
  TempDir tmp;
  write_dataset(tmp / "ds", test::make_dataset(10, {1, 4, 5}, SampleType::u8), 3);
  DatasetInfo info = open_dataset(tmp / "ds");
  EXPECT_EQ(info.sample_shape, (Shape{1, 4, 5}));
  EXPECT_EQ(info.sample_type, SampleType::u8);
  EXPECT_EQ(info.num_samples, 10);
  EXPECT_EQ(info.num_classes, 10);
  ASSERT_EQ(info.shards.size(), 3u);
  // Contiguous ranges split as evenly as possible.
  EXPECT_EQ(info.shards[0].count, 3);
  EXPECT_EQ(info.shards[1].first, 3);
  EXPECT_EQ(info.shards[2].count, 4);
  DatasetReader reader(info);
  Tensor x;
  std::vector<std::int32_t> labels;
  for (DType dtype : {DType::f32, DType::f64}) {
    reader.read(all_indices(10), dtype, x, labels);
    EXPECT_EQ(x.shape(), (Shape{10, 1, 4, 5}));
    EXPECT_EQ(x.dtype(), dtype);
    expect_samples(info, all_indices(10), x, labels);
  }
}

TEST(Dataset, RoundTripFloat32Features) {
  TempDir tmp;
  write_dataset(tmp / "ds", test::make_dataset(7, {6}, SampleType::f32, 4), 2);
  DatasetInfo info = open_dataset(tmp / "ds/");  // a trailing slash is fine
  EXPECT_EQ(info.sample_shape, (Shape{6}));
  EXPECT_EQ(info.sample_type, SampleType::f32);
  EXPECT_EQ(info.num_classes, 4);  // max label + 1
  DatasetReader reader(info);
  Tensor x;
  std::vector<std::int32_t> labels;
  for (DType dtype : {DType::f32, DType::f64}) {
    reader.read(all_indices(7), dtype, x, labels);
    EXPECT_EQ(x.shape(), (Shape{7, 6}));
    expect_samples(info, all_indices(7), x, labels);
  }
}

TEST(Dataset, ReadSpanningTwoShardsTouchesOnlyAskedSamples) {
  TempDir tmp;
  write_dataset(tmp / "ds", test::make_dataset(10, {2, 3}, SampleType::f32), 2);
  DatasetInfo info = open_dataset(tmp / "ds");
  ASSERT_EQ(info.shards[1].first, 5);
  DatasetReader reader(info);
  Tensor x;
  std::vector<std::int32_t> labels;
  std::vector<std::int64_t> indices{3, 4, 5, 6};
  reader.read(indices, DType::f32, x, labels);
  expect_samples(info, indices, x, labels);
  EXPECT_EQ(reader.bytes_requested(), 4 * 6 * 4);
}

TEST(Dataset, RandomOrderAndRepeatedIndicesKeepTheirOrder) {
  TempDir tmp;
  write_dataset(tmp / "ds", test::make_dataset(40, {1, 3, 3}, SampleType::u8), 4);
  DatasetInfo info = open_dataset(tmp / "ds");
  DatasetReader reader(info);
  std::vector<std::int64_t> indices = all_indices(40);
  std::mt19937 gen(7);
  std::shuffle(indices.begin(), indices.end(), gen);
  indices.resize(25);
  indices.push_back(indices[3]);  // a repeat
  Tensor x;
  std::vector<std::int32_t> labels;
  reader.read(indices, DType::f64, x, labels);
  expect_samples(info, indices, x, labels);
  EXPECT_EQ(reader.bytes_requested(), static_cast<std::int64_t>(indices.size()) * 9);
}

TEST(Dataset, BytesRequestedCountsExactlyTheAskedSamples) {
  TempDir tmp;
  write_dataset(tmp / "ds", test::make_dataset(100, {1, 28, 28}, SampleType::u8), 4);
  DatasetReader reader(open_dataset(tmp / "ds"));
  Tensor x;
  std::vector<std::int32_t> labels;
  reader.read(std::vector<std::int64_t>{99, 0, 50, 51, 52}, DType::f32, x, labels);
  EXPECT_EQ(reader.bytes_requested(), 5 * 784);
  reader.read(std::vector<std::int64_t>{10}, DType::f32, x, labels);
  EXPECT_EQ(reader.bytes_requested(), 6 * 784);
  EXPECT_EQ(x.shape(), (Shape{1, 1, 28, 28}));
}

TEST(Dataset, IndexOutOfRangeIsAnError) {
  TempDir tmp;
  write_dataset(tmp / "ds", test::make_dataset(5, {2}, SampleType::f32), 1);
  DatasetReader reader(open_dataset(tmp / "ds"));
  Tensor x;
  std::vector<std::int32_t> labels;
  EXPECT_ERROR_CONTAINS(reader.read(std::vector<std::int64_t>{1, 5}, DType::f32, x, labels), "sample index 5");
}

// index.json records each shard's CRC-32 in the form other tools write it:
// zlib's CRC-32 (Python's zlib.crc32), 8 lowercase hex digits.
TEST(Dataset, IndexRecordsEachShardsCrc32) {
  TempDir tmp;
  test::write_text(tmp / "check", "123456789");
  EXPECT_EQ(crc32_text(file_crc32(tmp / "check")), "cbf43926");  // the standard CRC-32 check value
  EXPECT_EQ(parse_crc32("CBF43926"), 0xcbf43926u);
  EXPECT_FALSE(parse_crc32("cbf4392").has_value());
  write_dataset(tmp / "ds", test::make_dataset(10, {2}, SampleType::f32), 3);
  auto index = nlohmann::json::parse(test::read_text(tmp / "ds/index.json"));
  DatasetInfo info = open_dataset(tmp / "ds");
  for (std::size_t i = 0; i < 3; ++i) {
    const std::string path = info.shards[i].path;
    EXPECT_EQ(index["shards"][i]["crc32"], crc32_text(file_crc32(path))) << path;
    EXPECT_EQ(info.shards[i].crc32, file_crc32(path)) << path;
  }
}

// Shard layout: chunked along N at about 64 KiB, uncompressed.
std::vector<hsize_t> chunk_of(const std::string& shard, int rank, int* filters) {
  H5Id file = open_h5_read(shard);
  auto lock = hdf5_lock();
  H5Id set(H5Dopen2(file.get(), "samples", H5P_DEFAULT));
  H5Id dcpl(H5Dget_create_plist(set.get()));
  std::vector<hsize_t> chunk(static_cast<std::size_t>(rank));
  EXPECT_EQ(H5Pget_layout(dcpl.get()), H5D_CHUNKED);
  H5Pget_chunk(dcpl.get(), rank, chunk.data());
  *filters = H5Pget_nfilters(dcpl.get());
  return chunk;
}

TEST(Dataset, ShardsAreChunkedAlongSamples) {
  TempDir tmp;
  write_dataset(tmp / "small", test::make_dataset(300, {1, 28, 28}, SampleType::u8), 2);
  int filters = -1;
  EXPECT_EQ(chunk_of(tmp / "small/shard-00000.h5", 4, &filters), (std::vector<hsize_t>{65536 / 784, 1, 28, 28}));
  EXPECT_EQ(filters, 0);
  write_dataset(tmp / "big", test::make_dataset(3, {20000}, SampleType::f32), 1);  // 80 KB per sample
  EXPECT_EQ(chunk_of(tmp / "big/shard-00000.h5", 2, &filters), (std::vector<hsize_t>{1, 20000}));
}

TEST(Dataset, WriteRefusesAnExistingFolderUnlessOverwrite) {
  TempDir tmp;
  write_dataset(tmp / "ds", test::make_dataset(5, {2}, SampleType::f32), 1);
  EXPECT_ERROR_CONTAINS(write_dataset(tmp / "ds", test::make_dataset(6, {2}, SampleType::f32), 1), "already exists");
  write_dataset(tmp / "ds", test::make_dataset(8, {2}, SampleType::f32), 2, 0, true);
  EXPECT_EQ(open_dataset(tmp / "ds").num_samples, 8);
  // Nothing is left beside the dataset.
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(tmp.path())) names.push_back(entry.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"ds"});
  // A folder that is not a dataset is never replaced.
  std::filesystem::create_directories(tmp / "mine");
  test::write_text(tmp / "mine/notes.txt", "keep me");
  EXPECT_ERROR_CONTAINS(write_dataset(tmp / "mine", test::make_dataset(5, {2}, SampleType::f32), 1, 0, true),
                        "not a dlscale dataset");
  EXPECT_TRUE(std::filesystem::exists(tmp / "mine/notes.txt"));
}

// Shards carry no HDF5 timestamps: converting the same data twice, a
// second apart, gives the same bytes (reproducible datasets, and a
// deterministic seed corpus for tests/fuzz).
TEST(Dataset, SameDataGivesByteIdenticalShards) {
  TempDir tmp;
  write_dataset(tmp / "a", test::make_dataset(9, {3}, SampleType::u8), 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  write_dataset(tmp / "b", test::make_dataset(9, {3}, SampleType::u8), 2);
  for (const char* name : {"shard-00000.h5", "shard-00001.h5", "index.json"}) {
    SCOPED_TRACE(name);
    const std::string a = test::read_text(tmp / (std::string("a/") + name));
    ASSERT_FALSE(a.empty());
    EXPECT_TRUE(a == test::read_text(tmp / (std::string("b/") + name)));
  }
}

TEST(Dataset, MoreShardsThanSamplesWritesOneSamplePerShard) {
  TempDir tmp;
  write_dataset(tmp / "ds", test::make_dataset(3, {2}, SampleType::f32), 8);
  DatasetInfo info = open_dataset(tmp / "ds");
  EXPECT_EQ(info.shards.size(), 3u);
}

TEST(Dataset, WriterRejectsBadInput) {
  TempDir tmp;
  RawDataset empty = test::make_dataset(0, {2}, SampleType::f32);
  EXPECT_ERROR_CONTAINS(write_dataset(tmp / "ds", empty, 1), "empty");
  RawDataset nan = test::make_dataset(4, {2}, SampleType::f32);
  float bad = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(nan.samples.data() + 5 * 4, &bad, 4);  // sample 2, element 1
  EXPECT_ERROR_CONTAINS(write_dataset(tmp / "ds", nan, 1), "sample 2 contains NaN");
  RawDataset labels = test::make_dataset(4, {2}, SampleType::f32, 10);
  EXPECT_ERROR_CONTAINS(write_dataset(tmp / "ds", labels, 1, 2), "outside [0, 2)");
  EXPECT_FALSE(std::filesystem::exists(tmp / "ds"));
}

}  // namespace
}  // namespace dlscale
