// DatasetReader: mini-batches by global sample index. The indices are
// sorted so that neighbours in the file become one hyperslab read, and the
// samples are then scattered back into the order asked for.
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "io/dataset.h"
#include "io/dataset_format.h"
#include "io/hdf5.h"

namespace dlscale {

namespace fmt = dataset_format;

// Labels are tiny (4 bytes a sample) and are loaded whole on first use: that
// halves the HDF5 calls of a shuffled batch, where most runs are one sample.
struct DatasetReader::OpenShard {
  H5Id file, samples, space;
  std::vector<std::int32_t> labels;
};

namespace {

// One contiguous range of a shard: `count` samples from local index `local`,
// whose k-th sample goes to output position out[k].
struct Run {
  std::size_t shard = 0;
  std::int64_t local = 0, count = 0;
  std::vector<std::size_t> out;
};

std::size_t shard_of(const DatasetInfo& info, std::int64_t global) {
  // The last shard starting at or before `global`: empty shards share their
  // start with the next one, so this is always the shard that holds it.
  auto it = std::upper_bound(info.shards.begin(), info.shards.end(), global,
                             [](std::int64_t g, const ShardInfo& s) { return g < s.first; });
  return static_cast<std::size_t>(it - info.shards.begin()) - 1;
}

std::vector<Run> plan_runs(const DatasetInfo& info, std::span<const std::int64_t> indices) {
  std::vector<std::size_t> order(indices.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return indices[a] < indices[b]; });
  std::vector<Run> runs;
  std::int64_t previous = -2;
  for (std::size_t pos : order) {
    std::int64_t g = indices[pos];
    if (g < 0 || g >= info.num_samples)
      fail("sample index " + std::to_string(g) + " is out of range: dataset " + info.dir + " has " +
           std::to_string(info.num_samples) + " samples");
    std::size_t shard = shard_of(info, g);
    // A repeated index starts a new run: reading it twice keeps runs simple.
    if (runs.empty() || g != previous + 1 || runs.back().shard != shard) {
      runs.push_back(Run{shard, g - info.shards[shard].first, 0, {}});
    }
    runs.back().count += 1;
    runs.back().out.push_back(pos);
    previous = g;
  }
  return runs;
}

void select_rows(hid_t space, std::int64_t first, std::int64_t count, const std::string& path) {
  hsize_t start[H5S_MAX_RANK] = {}, block[H5S_MAX_RANK];
  H5Sget_simple_extent_dims(space, block, nullptr);
  start[0] = static_cast<hsize_t>(first);
  block[0] = static_cast<hsize_t>(count);
  herr_t rc = H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, block, nullptr);
  if (rc < 0) check_h5(rc, "H5Sselect_hyperslab", path + ": cannot select samples", __FILE__, __LINE__);
}

// The memory space has the selection's own shape: a flat one makes HDF5 map
// element by element, about 100 times slower.
H5Id rows_space(const Shape& sample_shape, std::int64_t count) {
  std::vector<hsize_t> dims{static_cast<hsize_t>(count)};
  dims.insert(dims.end(), sample_shape.begin(), sample_shape.end());
  return H5Id(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
}

template <class T>
void convert_u8(const std::uint8_t* in, std::int64_t n, T* out) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(in[i]) / static_cast<T>(255);
}

template <class T>
bool convert_f32(const float* in, std::int64_t n, T* out) {
  bool finite = true;
  for (std::int64_t i = 0; i < n; ++i) {
    finite &= std::isfinite(in[i]);
    out[i] = static_cast<T>(in[i]);
  }
  return finite;
}

}  // namespace

DatasetReader::DatasetReader(DatasetInfo info) : info_(std::move(info)), open_(info_.shards.size(), nullptr) {}

DatasetReader::~DatasetReader() {
  for (OpenShard* shard : open_) delete shard;
}

DatasetReader::OpenShard& DatasetReader::shard(std::size_t index) {
  if (open_[index]) return *open_[index];
  const ShardInfo& info = info_.shards[index];
  auto lock = hdf5_lock();
  H5Id file = open_h5_read(info.path);
  auto s = std::make_unique<OpenShard>();
  // No chunk cache: a shuffled batch touches one sample per chunk, and a
  // cache miss would copy the whole 64 KiB chunk to use one sample of it.
  // Uncached, HDF5 reads just the selected bytes of each chunk.
  H5Id access(H5Pcreate(H5P_DATASET_ACCESS));
  DLSCALE_CHECK_H5(H5Pset_chunk_cache(access.get(), H5D_CHUNK_CACHE_NSLOTS_DEFAULT, 0, H5D_CHUNK_CACHE_W0_DEFAULT),
                   info.path + ": cannot set up /samples");
  s->samples =
      H5Id(DLSCALE_H5_ID(H5Dopen2(file.get(), fmt::kSamples, access.get()), info.path + ": cannot open /samples"));
  s->space = H5Id(H5Dget_space(s->samples.get()));
  H5Id labels(DLSCALE_H5_ID(H5Dopen2(file.get(), fmt::kLabels, H5P_DEFAULT), info.path + ": cannot open /labels"));
  s->labels.resize(static_cast<std::size_t>(info.count * info_.labels_per_sample()));
  DLSCALE_CHECK_H5(H5Dread(labels.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, s->labels.data()),
                   info.path + ": cannot read /labels");
  s->file = std::move(file);
  open_[index] = s.release();
  return *open_[index];
}

void DatasetReader::read(std::span<const std::int64_t> indices, DType dtype, Tensor& x,
                         std::vector<std::int32_t>& labels) {
  Shape shape{static_cast<std::int64_t>(indices.size())};
  shape.insert(shape.end(), info_.sample_shape.begin(), info_.sample_shape.end());
  if (x.shape() != shape || x.dtype() != dtype) x = Tensor(shape, dtype);
  labels.resize(indices.size() * static_cast<std::size_t>(info_.labels_per_sample()));

  const std::int64_t sample_numel = numel(info_.sample_shape);
  const bool u8 = info_.sample_type == SampleType::u8;
  std::vector<std::uint8_t> raw_u8;
  std::vector<float> raw_f32;
  H5Id one_sample;  // memory space reused by every single-sample run
  for (const Run& run : plan_runs(info_, indices)) {
    const ShardInfo& info = info_.shards[run.shard];
    const auto elements = static_cast<std::size_t>(run.count * sample_numel);
    if (u8) {
      raw_u8.resize(elements);
    } else {
      raw_f32.resize(elements);
    }
    void* raw = u8 ? static_cast<void*>(raw_u8.data()) : static_cast<void*>(raw_f32.data());
    const std::int32_t* run_labels = nullptr;
    {
      auto lock = hdf5_lock();
      OpenShard& s = shard(run.shard);
      run_labels = s.labels.data() + run.local * info_.labels_per_sample();
      select_rows(s.space.get(), run.local, run.count, info.path);
      H5Id many;
      if (run.count == 1 && !one_sample) one_sample = rows_space(info_.sample_shape, 1);
      if (run.count > 1) many = rows_space(info_.sample_shape, run.count);
      hid_t mem = run.count == 1 ? one_sample.get() : many.get();
      herr_t rc = H5Dread(s.samples.get(), fmt::memory_type(info_.sample_type), mem, s.space.get(), H5P_DEFAULT, raw);
      if (rc < 0)
        check_h5(rc, "H5Dread",
                 info.path + ": cannot read samples " + std::to_string(info.first + run.local) + " to " +
                     std::to_string(info.first + run.local + run.count - 1),
                 __FILE__, __LINE__);
    }
    bytes_requested_ += run.count * sample_numel * static_cast<std::int64_t>(fmt::element_size(info_.sample_type));
    scatter(run.shard, run.local, run.out, raw, run_labels, x, labels);
  }
}

// Converts one run's raw samples into x at their output positions, checking
// what a bad conversion or export typically leaves behind.
void DatasetReader::scatter(std::size_t shard_index, std::int64_t local, const std::vector<std::size_t>& out,
                            const void* raw, const std::int32_t* raw_labels, Tensor& x,
                            std::vector<std::int32_t>& labels) const {
  const ShardInfo& shard = info_.shards[shard_index];
  const std::int64_t n = numel(info_.sample_shape), per = info_.labels_per_sample();
  for (std::size_t k = 0; k < out.size(); ++k) {
    std::int64_t global = shard.first + local + static_cast<std::int64_t>(k);
    for (std::int64_t j = 0; j < per; ++j) {
      const std::int32_t label = raw_labels[static_cast<std::int64_t>(k) * per + j];
      if (label < 0 || label >= info_.num_classes)
        fail(shard.path + ": sample " + std::to_string(global) + " has label " + std::to_string(label) +
             ", outside [0, " + std::to_string(info_.num_classes) + ") (num_classes in index.json)");
      labels[static_cast<std::int64_t>(out[k]) * per + j] = label;
    }
    const std::int64_t offset = static_cast<std::int64_t>(k) * n;
    bool finite = dispatch(x.dtype(), [&]<class T>() {
      T* dst = x.data<T>() + static_cast<std::int64_t>(out[k]) * n;
      if (info_.tokens) {  // ids, not intensities: kept as they are
        const std::uint8_t* in = static_cast<const std::uint8_t*>(raw) + offset;
        for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(in[i]);
        return true;
      }
      if (info_.sample_type == SampleType::u8) {
        convert_u8(static_cast<const std::uint8_t*>(raw) + offset, n, dst);
        return true;
      }
      return convert_f32(static_cast<const float*>(raw) + offset, n, dst);
    });
    if (!finite) fail(shard.path + ": sample " + std::to_string(global) + " contains NaN or Inf");
  }
}

}  // namespace dlscale
