// Broken datasets: every problem must be an Error that names the file (and
// the sample) at fault, never a crash or an HDF5 error dump.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/dataset.h"
#include "io/file_checksum.h"
#include "io/hdf5.h"
#include "io/io_test_util.h"

namespace dlscale {
namespace {

using nlohmann::json;
using test::TempDir;

// A 12-sample, 2-shard dataset in tmp/ds; returns its folder.
std::string good_dataset(const TempDir& tmp, SampleType type = SampleType::u8, int classes = 10) {
  write_dataset(tmp / "ds", test::make_dataset(12, {1, 2, 2}, type, classes), 2);
  return tmp / "ds";
}

json load_index(const std::string& dir) { return json::parse(test::read_text(dir + "/index.json")); }
void save_index(const std::string& dir, const json& index) { test::write_text(dir + "/index.json", index.dump()); }

// Records each shard's current CRC-32, as a tool that rewrote the shards
// on purpose (and its index with them) would.
void refresh_checksums(const std::string& dir) {
  json index = load_index(dir);
  for (json& shard : index["shards"])
    shard["crc32"] = crc32_text(file_crc32(dir + "/" + shard["file"].get<std::string>()));
  save_index(dir, index);
}

TEST(DatasetErrors, MissingFolderAndIndexNameThePath) {
  TempDir tmp;
  EXPECT_ERROR_CONTAINS(open_dataset(tmp / "nowhere"), tmp / "nowhere");
  std::filesystem::create_directories(tmp / "empty");
  EXPECT_ERROR_CONTAINS(open_dataset(tmp / "empty"), tmp / "empty/index.json");
}

TEST(DatasetErrors, BadJson) {
  TempDir tmp;
  std::string dir = good_dataset(tmp);
  test::write_text(dir + "/index.json", "{\"format\": \"dlscale-dataset\", ");
  EXPECT_ERROR_CONTAINS(open_dataset(dir), "index.json is not valid JSON");
}

TEST(DatasetErrors, WrongFieldsAreNamed) {
  TempDir tmp;
  std::string dir = good_dataset(tmp);
  json index = load_index(dir);
  index["format"] = "something-else";
  save_index(dir, index);
  EXPECT_ERROR_CONTAINS(open_dataset(dir), "'format'");
  index = load_index(tmp / "ds");
  index["format"] = "dlscale-dataset";
  index["dtype"] = "int16";
  save_index(dir, index);
  EXPECT_ERROR_CONTAINS(open_dataset(dir), "'dtype'");
  index["dtype"] = "uint8";
  index.erase("num_classes");
  save_index(dir, index);
  EXPECT_ERROR_CONTAINS(open_dataset(dir), "'num_classes' is missing");
}

TEST(DatasetErrors, CountsThatDoNotAddUp) {
  TempDir tmp;
  std::string dir = good_dataset(tmp);
  json index = load_index(dir);
  index["num_samples"] = 13;
  save_index(dir, index);
  EXPECT_ERROR_CONTAINS(open_dataset(dir), "num_samples is 13 but the shards hold 12");
}

TEST(DatasetErrors, ShardCountDisagreeingWithTheFileNamesTheShard) {
  TempDir tmp;
  std::string dir = good_dataset(tmp);
  json index = load_index(dir);
  index["shards"][0]["num_samples"] = 5;
  index["shards"][1]["num_samples"] = 7;
  save_index(dir, index);
  EXPECT_ERROR_CONTAINS(open_dataset(dir), "shard-00000.h5: /samples has shape 6x1x2x2 but index.json says 5x1x2x2");
}

TEST(DatasetErrors, ShapeAndTypeMismatchNameTheShard) {
  TempDir tmp;
  std::string dir = good_dataset(tmp);
  json index = load_index(dir);
  index["sample_shape"] = {4};
  save_index(dir, index);
  EXPECT_ERROR_CONTAINS(open_dataset(dir), "shard-00000.h5: /samples has shape");
  index["sample_shape"] = {1, 2, 2};
  index["dtype"] = "float32";
  save_index(dir, index);
  EXPECT_ERROR_CONTAINS(open_dataset(dir), "shard-00000.h5: /samples is not float32");
}

// Replaces shard-00000.h5's /labels by 6 labels of `type`.
void rewrite_labels(const std::string& shard, hid_t type) {
  auto lock = hdf5_lock();
  H5Id file(H5Fopen(shard.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  ASSERT_TRUE(file);
  ASSERT_GE(H5Ldelete(file.get(), "labels", H5P_DEFAULT), 0);
  hsize_t count = 6;
  H5Id space(H5Screate_simple(1, &count, nullptr));
  H5Id set(H5Dcreate2(file.get(), "labels", type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  ASSERT_TRUE(set);
}

// A label type libhdf5 would convert from at its stored width: a 442 MB
// wide integer made it allocate 1.7 GB for 4 labels (tests/fuzz
// regressions/fuzz_shard/hdf5-oom-labels-type-442mb-wide.bin).
TEST(DatasetErrors, LabelsOfAWrongOrOverWideTypeNameTheShard) {
  TempDir tmp;
  std::string dir = good_dataset(tmp);
  H5Id wide(H5Tcopy(H5T_STD_I32LE));
  ASSERT_GE(H5Tset_size(wide.get(), 16), 0);
  for (hid_t type : {wide.get(), H5T_IEEE_F32LE}) {
    rewrite_labels(dir + "/shard-00000.h5", type);
    refresh_checksums(dir);
    EXPECT_ERROR_CONTAINS(open_dataset(dir),
                          "shard-00000.h5: /labels must hold integers of at most 8 bytes (dlscale writes int32)");
  }
  rewrite_labels(dir + "/shard-00000.h5", H5T_STD_I64LE);  // wider than int32 but sound: read as before
  refresh_checksums(dir);
  EXPECT_NO_THROW(open_dataset(dir));
}

TEST(DatasetErrors, IndexPointingOutsideTheFolder) {
  TempDir tmp;
  std::string dir = good_dataset(tmp);
  for (std::string name : {"../x.h5", "/etc/passwd", "sub/shard.h5"}) {
    json index = load_index(dir);
    index["shards"][1]["file"] = name;
    save_index(dir, index);
    EXPECT_ERROR_CONTAINS(open_dataset(dir), "index points outside the dataset folder");
  }
}

TEST(DatasetErrors, MissingShardFileIsNamed) {
  TempDir tmp;
  std::string dir = good_dataset(tmp);
  std::filesystem::remove(dir + "/shard-00001.h5");
  EXPECT_ERROR_CONTAINS(open_dataset(dir), dir + "/shard-00001.h5");
}

TEST(DatasetErrors, TruncatedShardIsNamed) {
  TempDir tmp;
  write_dataset(tmp / "ds", test::make_dataset(400, {1, 8, 8}, SampleType::u8), 2);
  std::string shard = tmp / "ds/shard-00001.h5";
  auto size = std::filesystem::file_size(shard);
  std::filesystem::resize_file(shard, size / 2);
  EXPECT_ERROR_CONTAINS(open_dataset(tmp / "ds"), shard);
  // Not an HDF5 file at all.
  test::write_text(shard, "this is not hdf5");
  EXPECT_ERROR_CONTAINS(open_dataset(tmp / "ds"), shard);
}

// The message of the Error that open_dataset(dir) throws; "" if none.
std::string open_error(const std::string& dir) {
  try {
    open_dataset(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The integrity guard: a shard whose bytes changed after index.json was
// written is refused by its CRC-32 with an error naming the file, before
// libhdf5 opens it (HDF5's own error would read "not an HDF5 file" for the
// first damage; one changed byte in the middle it may not notice at all).
TEST(DatasetErrors, ChangedShardIsRefusedByItsChecksumBeforeHdf5OpensIt) {
  TempDir tmp;
  std::string dir = good_dataset(tmp);
  const std::string shard = dir + "/shard-00001.h5";
  const std::string intact = test::read_text(shard);
  const std::string crc = load_index(dir)["shards"][1]["crc32"];
  std::string no_signature = intact;
  no_signature.replace(0, 8, 8, '\0');
  std::string one_byte = intact;
  one_byte[intact.size() / 2] = static_cast<char>(one_byte[intact.size() / 2] ^ 0x10);
  for (const std::string& damaged : {no_signature, one_byte}) {
    test::write_text(shard, damaged);
    const std::string message = open_error(dir);
    EXPECT_NE(message.find(shard + ": the file is damaged or was changed after index.json was written"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("index.json says " + crc), std::string::npos) << message;
    EXPECT_NE(message.find("it was not opened"), std::string::npos) << message;
    EXPECT_EQ(message.find("HDF5"), std::string::npos) << message;
  }
  test::write_text(shard, intact);
  EXPECT_EQ(open_dataset(dir).num_samples, 12);
}

TEST(DatasetErrors, IndexWithoutChecksumsIsRefusedWithHowToRemakeIt) {
  TempDir tmp;
  std::string dir = good_dataset(tmp);
  json index = load_index(dir);
  index["shards"][1].erase("crc32");  // as dlscale wrote indexes before shard checksums
  save_index(dir, index);
  EXPECT_ERROR_CONTAINS(open_dataset(dir), "shards[1]: field 'crc32' is missing");
  EXPECT_ERROR_CONTAINS(open_dataset(dir), "dlscale shard ... --overwrite");
  for (json bad : {json(12345678), json("0a1b2c3"), json("0a1b2c3g"), json("0x1b2c3d")}) {
    index["shards"][1]["crc32"] = bad;
    save_index(dir, index);
    EXPECT_ERROR_CONTAINS(open_dataset(dir), "shards[1]: field 'crc32' must be the shard file's CRC-32");
  }
}

TEST(DatasetErrors, EmptyDataset) {
  TempDir tmp;
  std::string dir = good_dataset(tmp);
  json index = load_index(dir);
  index["num_samples"] = 0;
  index["shards"] = json::array();
  save_index(dir, index);
  EXPECT_ERROR_CONTAINS(open_dataset(dir), "is empty");
}

TEST(DatasetErrors, LabelOutOfRangeNamesShardAndSample) {
  TempDir tmp;
  std::string dir = good_dataset(tmp);  // labels (3*i) % 10
  json index = load_index(dir);
  index["num_classes"] = 9;  // sample 3 (label 9) is now out of range; it lives in shard 0
  save_index(dir, index);
  DatasetReader reader(open_dataset(dir));
  Tensor x;
  std::vector<std::int32_t> labels;
  reader.read(std::vector<std::int64_t>{0, 1, 2}, DType::f32, x, labels);  // fine
  EXPECT_ERROR_CONTAINS(reader.read(std::vector<std::int64_t>{2, 3}, DType::f32, x, labels),
                        "shard-00000.h5: sample 3 has label 9, outside [0, 9)");
}

// Overwrites element `element` of local sample `local` in a float32 shard.
void poke_float(const std::string& shard, std::int64_t local, std::int64_t per_sample, std::int64_t element,
                float value) {
  auto lock = hdf5_lock();
  H5Id file(H5Fopen(shard.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  ASSERT_TRUE(file);
  H5Id set(H5Dopen2(file.get(), "samples", H5P_DEFAULT));
  H5Id space(H5Dget_space(set.get()));
  hsize_t start[4] = {static_cast<hsize_t>(local), 0, static_cast<hsize_t>(element / 2),
                      static_cast<hsize_t>(element % 2)};
  hsize_t count[4] = {1, 1, 1, 1};
  ASSERT_EQ(per_sample, 4);
  H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
  hsize_t one = 1;
  H5Id mem(H5Screate_simple(1, &one, nullptr));
  ASSERT_GE(H5Dwrite(set.get(), H5T_NATIVE_FLOAT, mem.get(), space.get(), H5P_DEFAULT, &value), 0);
}

TEST(DatasetErrors, NaNOrInfInputNamesShardAndSample) {
  TempDir tmp;
  std::string dir = good_dataset(tmp, SampleType::f32);
  poke_float(dir + "/shard-00001.h5", 2, 4, 3, std::numeric_limits<float>::quiet_NaN());  // global sample 8
  poke_float(dir + "/shard-00001.h5", 4, 4, 0, std::numeric_limits<float>::infinity());   // global sample 10
  refresh_checksums(dir);  // written so on purpose: past the integrity check, the values are checked
  DatasetReader reader(open_dataset(dir));
  Tensor x;
  std::vector<std::int32_t> labels;
  reader.read(std::vector<std::int64_t>{7, 9}, DType::f64, x, labels);
  EXPECT_ERROR_CONTAINS(reader.read(std::vector<std::int64_t>{8}, DType::f32, x, labels),
                        "shard-00001.h5: sample 8 contains NaN or Inf");
  EXPECT_ERROR_CONTAINS(reader.read(std::vector<std::int64_t>{11, 10}, DType::f64, x, labels),
                        "shard-00001.h5: sample 10 contains NaN or Inf");
}

}  // namespace
}  // namespace dlscale
