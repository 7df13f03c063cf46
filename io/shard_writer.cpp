// write_dataset: an in-memory dataset → shard files + index.json, written
// into a hidden sibling folder and renamed into place, so a crash or a full
// disk never leaves a half-written dataset that looks complete.
#include "io/shard_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/dataset_format.h"
#include "io/file_checksum.h"
#include "io/hdf5.h"

namespace dlscale {

namespace fs = std::filesystem;
namespace fmt = dataset_format;

namespace {

// Checks sizes, labels and values; returns the number of classes to record.
int validate(const RawDataset& data, int num_classes) {
  const std::int64_t n = data.num_samples();
  if (n == 0) fail("cannot write an empty dataset: there are no samples");
  DLSCALE_REQUIRE(!data.sample_shape.empty(), "the sample shape is empty");
  for (auto d : data.sample_shape)
    DLSCALE_REQUIRE(d >= 1, "the sample shape " + to_string(data.sample_shape) + " has a non-positive size");
  const std::int64_t elements = n * numel(data.sample_shape);
  const auto expected = static_cast<std::size_t>(elements) * fmt::element_size(data.sample_type);
  DLSCALE_REQUIRE(data.samples.size() == expected,
                  "sample buffer holds " + std::to_string(data.samples.size()) + " bytes but " + std::to_string(n) +
                      " samples of shape " + to_string(data.sample_shape) + " need " + std::to_string(expected));
  DLSCALE_REQUIRE(num_classes >= 0, "the number of classes cannot be negative");
  DLSCALE_REQUIRE(data.labels.size() == static_cast<std::size_t>(n * data.labels_per_sample),
                  "labels are not a whole number of samples");
  std::int32_t max_label = 0;
  for (std::size_t k = 0; k < data.labels.size(); ++k) {
    const std::int32_t label = data.labels[k];
    const std::int64_t i = static_cast<std::int64_t>(k) / data.labels_per_sample;
    if (label < 0) fail("sample " + std::to_string(i) + " has negative label " + std::to_string(label));
    if (num_classes > 0 && label >= num_classes)
      fail("sample " + std::to_string(i) + " has label " + std::to_string(label) + ", outside [0, " +
           std::to_string(num_classes) + ")");
    max_label = std::max(max_label, label);
  }
  if (data.sample_type == SampleType::f32) {
    const std::int64_t per_sample = numel(data.sample_shape);
    for (std::int64_t e = 0; e < elements; ++e) {
      float v;
      std::memcpy(&v, data.samples.data() + e * 4, 4);
      if (!std::isfinite(v)) fail("sample " + std::to_string(e / per_sample) + " contains NaN or Inf");
    }
  }
  return num_classes > 0 ? num_classes : max_label + 1;
}

void write_samples(hid_t file, const RawDataset& data, std::int64_t first, std::int64_t count,
                   const std::string& path) {
  const std::int64_t sample_bytes =
      numel(data.sample_shape) * static_cast<std::int64_t>(fmt::element_size(data.sample_type));
  std::vector<hsize_t> dims{static_cast<hsize_t>(count)}, chunk;
  dims.insert(dims.end(), data.sample_shape.begin(), data.sample_shape.end());
  chunk = dims;
  chunk[0] = static_cast<hsize_t>(fmt::chunk_samples(sample_bytes, count));
  H5Id space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  H5Id dcpl = untimed_dataset_creation(path + ": cannot create /samples");
  DLSCALE_CHECK_H5(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()),
                   path + ": cannot chunk /samples");
  H5Id set(DLSCALE_H5_ID(H5Dcreate2(file, fmt::kSamples, fmt::file_type(data.sample_type), space.get(), H5P_DEFAULT,
                                    dcpl.get(), H5P_DEFAULT),
                         path + ": cannot create /samples"));
  const std::uint8_t* src = data.samples.data() + first * sample_bytes;
  DLSCALE_CHECK_H5(H5Dwrite(set.get(), fmt::memory_type(data.sample_type), H5S_ALL, H5S_ALL, H5P_DEFAULT, src),
                   path + ": cannot write /samples");
}

void write_shard(const std::string& path, const RawDataset& data, std::int64_t first, std::int64_t count) {
  {
    auto lock = hdf5_lock();
    H5Id file = create_h5(path);
    write_samples(file.get(), data, first, count, path);
    // N labels, or N×T targets for token windows.
    const hsize_t dims[2] = {static_cast<hsize_t>(count), static_cast<hsize_t>(data.labels_per_sample)};
    H5Id space(H5Screate_simple(data.tokens ? 2 : 1, dims, nullptr));
    H5Id dcpl = untimed_dataset_creation(path + ": cannot create /labels");
    H5Id set(DLSCALE_H5_ID(
        H5Dcreate2(file.get(), fmt::kLabels, H5T_STD_I32LE, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
        path + ": cannot create /labels"));
    DLSCALE_CHECK_H5(H5Dwrite(set.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                              data.labels.data() + first * data.labels_per_sample),
                     path + ": cannot write /labels");
  }
  sync_path(path);
}

struct WrittenShard {
  std::int64_t count = 0;
  std::uint32_t crc32 = 0;
};

void write_index(const std::string& path, const RawDataset& data, int num_classes,
                 const std::vector<WrittenShard>& shards) {
  nlohmann::json index{{"format", fmt::kFormat},
                       {"version", fmt::kVersion},
                       {"sample_shape", data.sample_shape},
                       {"dtype", to_string(data.sample_type)},
                       {"num_classes", num_classes},
                       {"num_samples", data.num_samples()},
                       {"shards", nlohmann::json::array()}};
  if (data.tokens) index["kind"] = "tokens";
  for (std::size_t i = 0; i < shards.size(); ++i)
    index["shards"].push_back({{"file", fmt::shard_file_name(static_cast<int>(i))},
                               {"num_samples", shards[i].count},
                               {"crc32", crc32_text(shards[i].crc32)}});
  std::ofstream out(path);
  out << index.dump(2) << "\n";
  out.close();
  if (!out) fail("cannot write " + path);
  sync_path(path);
}

// Writes every file of the dataset into `tmp`.
void write_files(const fs::path& tmp, const RawDataset& data, int shards, int num_classes) {
  const std::int64_t n = data.num_samples();
  std::vector<WrittenShard> written;
  for (int s = 0; s < shards; ++s) {
    // Contiguous ranges whose sizes differ by at most one.
    std::int64_t first = s * n / shards, end = (s + 1) * n / shards;
    const std::string path = (tmp / fmt::shard_file_name(s)).string();
    write_shard(path, data, first, end - first);
    // Of the bytes on disk after the close, read back (from the page cache):
    // what a reader will compare.
    written.push_back({end - first, file_crc32(path)});
  }
  write_index((tmp / fmt::kIndexFile).string(), data, num_classes, written);
  sync_path(tmp.string());
}

// ".NAME.PID"; appended piecewise because GCC 12 warns falsely (-Wrestrict)
// on `"." + std::string`.
std::string hidden_sibling_stem(const fs::path& target) {
  std::string stem(1, '.');
  stem.append(target.filename().string());
  stem.push_back('.');
  stem.append(std::to_string(::getpid()));
  return stem;
}

void rename_or_fail(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) fail("cannot rename " + from.string() + " to " + to.string() + ": " + ec.message());
}

}  // namespace

void write_dataset(const std::string& dir_arg, const RawDataset& data, int shards, int num_classes, bool overwrite) {
  int classes = validate(data, num_classes);
  DLSCALE_REQUIRE(shards >= 1, "the number of shards must be at least 1");
  // More shards than samples would leave empty files.
  shards = static_cast<int>(std::min<std::int64_t>(shards, data.num_samples()));

  fs::path target = fs::absolute(dir_arg).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();
  std::error_code ec;
  bool exists = fs::exists(target, ec);
  if (exists && !overwrite)
    fail("dataset folder " + target.string() + " already exists (ask to overwrite it, or pick another folder)");
  // Never delete a folder that is not a dataset: overwrite must not cost a
  // user their home directory because of a typo.
  if (exists && !fs::exists(target / fmt::kIndexFile, ec) && !fs::is_empty(target, ec))
    fail(target.string() + " exists and is not a dlscale dataset (no index.json); refusing to replace it");

  fs::path parent = target.parent_path();
  fs::create_directories(parent, ec);
  if (ec) fail("cannot create folder " + parent.string() + ": " + ec.message());
  // Hidden siblings on the same filesystem, so the final rename is atomic.
  const std::string stem = hidden_sibling_stem(target);
  fs::path tmp = parent / (stem + ".tmp");
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec)) fail("cannot create folder " + tmp.string() + ": " + ec.message());
  try {
    write_files(tmp, data, shards, classes);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  if (exists) {
    fs::path old = parent / (stem + ".old");
    rename_or_fail(target, old);
    rename_or_fail(tmp, target);
    fs::remove_all(old, ec);
  } else {
    rename_or_fail(tmp, target);
  }
  sync_path(parent.string());
}

}  // namespace dlscale
