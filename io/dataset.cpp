// open_dataset: reads DIR/index.json and checks it against every shard file
// before training starts, so a broken dataset fails at once with the name of
// the broken file rather than hours into a run.
#include "io/dataset.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "io/dataset_format.h"
#include "io/file_checksum.h"
#include "io/hdf5.h"

namespace dlscale {

namespace fs = std::filesystem;
namespace fmt = dataset_format;
using nlohmann::json;

std::string to_string(SampleType type) { return type == SampleType::u8 ? "uint8" : "float32"; }

namespace {

const json& field(const json& j, const char* name, const std::string& where) {
  auto it = j.find(name);
  if (it == j.end()) fail(where + ": field '" + name + "' is missing");
  return *it;
}

std::int64_t int_field(const json& j, const char* name, const std::string& where, std::int64_t min,
                       std::int64_t max = std::numeric_limits<std::int64_t>::max()) {
  const json& v = field(j, name, where);
  if (!v.is_number_integer()) fail(where + ": field '" + name + "' must be an integer");
  auto value = v.get<std::int64_t>();
  if (value < min) fail(where + ": field '" + name + "' must be at least " + std::to_string(min));
  if (value > max) fail(where + ": field '" + name + "' must be at most " + std::to_string(max));
  return value;
}

json load_index(const std::string& dir, const std::string& index_path) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) fail("dataset folder " + dir + " does not exist");
  if (!fs::is_directory(dir, ec)) fail("dataset " + dir + " is not a folder (expected a folder with index.json)");
  if (!fs::exists(index_path, ec))
    fail(index_path + " not found: " + dir + " is not a dlscale dataset (make one with `dlscale shard`)");
  std::ifstream in(index_path);
  if (!in) fail("cannot read " + index_path);
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    fail(index_path + " is not valid JSON: " + e.what());
  }
}

void parse_header(const json& index, const std::string& where, DatasetInfo& info) {
  if (!index.is_object()) fail(where + ": expected a JSON object");
  const json& format = field(index, "format", where);
  if (!format.is_string() || format.get<std::string>() != fmt::kFormat)
    fail(where + ": field 'format' must be \"" + std::string(fmt::kFormat) + "\"");
  auto version = int_field(index, "version", where, 1);
  if (version > fmt::kVersion)
    fail(where + ": dataset format version " + std::to_string(version) + " is newer than this dlscale reads (" +
         std::to_string(fmt::kVersion) + ")");
  const json& shape = field(index, "sample_shape", where);
  if (!shape.is_array() || shape.empty()) fail(where + ": field 'sample_shape' must be a non-empty list of sizes");
  for (const json& d : shape) {
    if (!d.is_number_integer() || d.get<std::int64_t>() < 1)
      fail(where + ": field 'sample_shape' must hold positive integers");
    info.sample_shape.push_back(d.get<std::int64_t>());
  }
  const json& dtype = field(index, "dtype", where);
  std::string type_name = dtype.is_string() ? dtype.get<std::string>() : "";
  if (type_name == "uint8") {
    info.sample_type = SampleType::u8;
  } else if (type_name == "float32") {
    info.sample_type = SampleType::f32;
  } else {
    fail(where + ": field 'dtype' must be \"uint8\" or \"float32\"");
  }
  info.num_classes = static_cast<int>(int_field(index, "num_classes", where, 1, std::numeric_limits<int>::max()));
  info.num_samples = int_field(index, "num_samples", where, 0);
  if (auto kind = index.find("kind"); kind != index.end()) {
    if (!kind->is_string() || (*kind != "tokens" && *kind != "classes"))
      fail(where + ": field 'kind' must be \"classes\" (the default) or \"tokens\"");
    info.tokens = *kind == "tokens";
  }
  if (info.tokens && (info.sample_shape.size() != 1 || info.sample_type != SampleType::u8))
    fail(where + ": a token dataset holds windows of T byte ids: 'sample_shape' must be [T] and 'dtype' \"uint8\"");
}

// A shard name must stay inside the dataset folder: an index copied from
// elsewhere must not make dlscale read arbitrary files.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name.find('\\') == std::string::npos &&
         name.find("..") == std::string::npos;
}

// Indexes written before shards carried checksums are refused rather than
// read unchecked: an unchecked damaged shard can make libhdf5 crash or
// allocate without bound, and re-sharding takes seconds to minutes.
std::uint32_t crc32_field(const json& s, const std::string& entry, const std::string& where) {
  auto it = s.find("crc32");
  if (it == s.end())
    fail(entry + ": field 'crc32' is missing: " + where +
         " was written without shard checksums (by an older dlscale, or by hand); make the dataset again with "
         "`dlscale shard ... --overwrite`, or add each shard's CRC-32 as docs/data-format.md shows");
  auto crc = it->is_string() ? parse_crc32(it->get<std::string>()) : std::nullopt;
  if (!crc) fail(entry + ": field 'crc32' must be the shard file's CRC-32 as 8 hexadecimal digits, e.g. \"0a1b2c3d\"");
  return *crc;
}

void parse_shards(const json& index, const std::string& where, DatasetInfo& info) {
  const json& shards = field(index, "shards", where);
  if (!shards.is_array()) fail(where + ": field 'shards' must be a list");
  std::set<std::string> seen;
  std::int64_t first = 0;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    std::string entry = where + ": shards[" + std::to_string(i) + "]";
    const json& s = shards[i];
    if (!s.is_object()) fail(entry + " must be an object with 'file' and 'num_samples'");
    const json& file = field(s, "file", entry);
    if (!file.is_string()) fail(entry + ": field 'file' must be a file name");
    std::string name = file.get<std::string>();
    if (!plain_file_name(name))
      fail(entry + ": '" + name +
           "': index points outside the dataset folder (shard files must be plain file names inside " + info.dir + ")");
    if (!seen.insert(name).second) fail(entry + ": shard file '" + name + "' is listed twice");
    ShardInfo shard;
    shard.path = (fs::path(info.dir) / name).string();
    shard.first = first;
    shard.count = int_field(s, "num_samples", entry, 0);
    if (shard.count > std::numeric_limits<std::int64_t>::max() - first)
      fail(entry + ": the shards hold more than 2^63 samples");
    first += shard.count;
    shard.crc32 = crc32_field(s, entry, where);
    info.shards.push_back(shard);
  }
  if (first != info.num_samples)
    fail(where + ": num_samples is " + std::to_string(info.num_samples) + " but the shards hold " +
         std::to_string(first) + " samples");
}

// The guard in front of libhdf5: a shard whose bytes are not the ones
// index.json was written with never reaches H5Fopen.
void verify_checksum(const ShardInfo& shard) {
  std::error_code ec;
  if (!fs::exists(shard.path, ec)) fail("cannot open " + shard.path + ": the file does not exist");
  const std::uint32_t crc = file_crc32(shard.path);
  if (crc != shard.crc32)
    fail(shard.path + ": the file is damaged or was changed after index.json was written (its CRC-32 is " +
         crc32_text(crc) + ", index.json says " + crc32_text(shard.crc32) +
         "); it was not opened. Copy it again, or make the dataset again with `dlscale shard`");
}

std::vector<hsize_t> dataset_dims(hid_t set) {
  H5Id space(H5Dget_space(set));
  int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(rank > 0 ? rank : 0);
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

std::string dims_text(const std::vector<hsize_t>& dims) { return to_string(Shape(dims.begin(), dims.end())); }

void check_samples(hid_t file, const DatasetInfo& info, const ShardInfo& shard) {
  const std::string& path = shard.path;
  if (!h5_exists(file, fmt::kSamples)) fail(path + ": dataset /samples is missing");
  H5Id set(DLSCALE_H5_ID(H5Dopen2(file, fmt::kSamples, H5P_DEFAULT), path + ": cannot open /samples"));
  H5Id type(H5Dget_type(set.get()));
  H5T_class_t cls = H5Tget_class(type.get());
  std::size_t size = H5Tget_size(type.get());
  bool ok = info.sample_type == SampleType::u8
                ? cls == H5T_INTEGER && size == 1 && H5Tget_sign(type.get()) == H5T_SGN_NONE
                : cls == H5T_FLOAT && size == 4;
  if (!ok) fail(path + ": /samples is not " + to_string(info.sample_type) + " as index.json says");
  std::vector<hsize_t> want{static_cast<hsize_t>(shard.count)};
  for (auto d : info.sample_shape) want.push_back(static_cast<hsize_t>(d));
  auto dims = dataset_dims(set.get());
  if (dims != want) fail(path + ": /samples has shape " + dims_text(dims) + " but index.json says " + dims_text(want));
}

void check_labels(hid_t file, const DatasetInfo& info, const ShardInfo& shard) {
  const std::string& path = shard.path;
  if (!h5_exists(file, fmt::kLabels)) fail(path + ": dataset /labels is missing");
  H5Id set(DLSCALE_H5_ID(H5Dopen2(file, fmt::kLabels, H5P_DEFAULT), path + ": cannot open /labels"));
  H5Id type(H5Dget_type(set.get()));
  // An integer wider than 8 bytes is a damaged type: libhdf5 would size its
  // conversion buffer by it (found by tests/fuzz/fuzz_shard: 442 MB a label).
  if (H5Tget_class(type.get()) != H5T_INTEGER || H5Tget_size(type.get()) > 8)
    fail(path + ": /labels must hold integers of at most 8 bytes (dlscale writes int32)");
  auto dims = dataset_dims(set.get());
  std::vector<hsize_t> want{static_cast<hsize_t>(shard.count)};
  if (info.tokens) want.push_back(static_cast<hsize_t>(info.labels_per_sample()));
  if (dims != want)
    fail(path + ": /labels has shape " + dims_text(dims) + " but the shard holds " + std::to_string(shard.count) +
         (info.tokens ? " windows of " + std::to_string(want[1]) + " targets" : " samples"));
}

}  // namespace

DatasetInfo read_dataset_index(const std::string& dir_arg) {
  DatasetInfo info;
  fs::path dir = fs::absolute(dir_arg).lexically_normal();
  if (dir.has_parent_path() && dir.filename().empty()) dir = dir.parent_path();  // drop a trailing '/'
  info.dir = dir.string();
  std::string index_path = (dir / fmt::kIndexFile).string();
  json index = load_index(info.dir, index_path);
  parse_header(index, index_path, info);
  parse_shards(index, index_path, info);
  if (info.num_samples == 0) fail("dataset " + info.dir + " is empty: " + index_path + " lists no samples");
  return info;
}

DatasetInfo open_dataset(const std::string& dir_arg, const ShardChecks& checks) {
  DatasetInfo info = read_dataset_index(dir_arg);
  std::string problem;
  for (std::size_t i = checks.index; i < info.shards.size() && problem.empty(); i += checks.count) {
    try {
      verify_checksum(info.shards[i]);
    } catch (const Error& e) {
      problem = e.what();
    }
  }
  if (checks.agree) problem = checks.agree(problem);
  if (!problem.empty()) fail(problem);
  for (const ShardInfo& shard : info.shards) {
    H5Id file = open_h5_read(shard.path);
    auto lock = hdf5_lock();
    check_samples(file.get(), info, shard);
    check_labels(file.get(), info, shard);
  }
  return info;
}

}  // namespace dlscale
