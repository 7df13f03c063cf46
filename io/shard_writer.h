// Writing datasets: samples in memory → index.json + N shard files, and the
// converters from idx (MNIST/Fashion-MNIST, gzipped or not), CSV and .npy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/dataset.h"

namespace dlscale {

// A whole dataset in memory, as converters produce it.
struct RawDataset {
  Shape sample_shape;
  SampleType sample_type = SampleType::u8;
  std::vector<std::uint8_t> samples;  // num_samples × numel(sample_shape) elements of sample_type, packed
  std::vector<std::int32_t> labels;      // labels_per_sample per sample
  bool tokens = false;                   // a token dataset (see io/dataset.h)
  std::int64_t labels_per_sample = 1;    // T for token windows
  std::int64_t num_samples() const { return static_cast<std::int64_t>(labels.size()) / labels_per_sample; }
};

// Writes `data` as `shards` shard files plus index.json into `dir`. The
// folder appears complete or not at all (written beside it, then renamed);
// an existing dataset folder is an error unless overwrite.
// num_classes 0 means max(label)+1.
void write_dataset(const std::string& dir, const RawDataset& data, int shards, int num_classes = 0,
                   bool overwrite = false);

RawDataset read_idx(const std::string& images_path, const std::string& labels_path);
// CSV: one sample per row; label_column (0-based, -1 = last) holds the class,
// every other column a feature (float32). sample_shape empty means N×F.
RawDataset read_csv(const std::string& path, int label_column, bool has_header, const Shape& sample_shape);
// .npy images (uint8 or float32, C order, N×...) and labels (any integer type).
RawDataset read_npy(const std::string& images_path, const std::string& labels_path);

}  // namespace dlscale
