// The dlscale HDF5 dataset: a folder with index.json and shard files, each
// shard holding /samples (N×C×H×W or N×F, uint8 or float32, chunked by sample
// ranges) and /labels (N int32). A token dataset ("kind": "tokens") holds
// windows of T token ids (N×T uint8, not scaled) and N×T next-token targets.
// Layout documented in docs/data-format.md.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "runtime/core/tensor.h"

namespace dlscale {

enum class SampleType { u8, f32 };
std::string to_string(SampleType type);

struct ShardInfo {
  std::string path;         // absolute path of the shard file
  std::int64_t first = 0;   // global index of its first sample
  std::int64_t count = 0;
  std::uint32_t crc32 = 0;  // CRC-32 of the whole file, from index.json
};

struct DatasetInfo {
  std::string dir;
  Shape sample_shape;       // without the batch dimension
  SampleType sample_type = SampleType::u8;
  int num_classes = 0;       // for token data: the vocabulary size
  std::int64_t num_samples = 0;
  std::vector<ShardInfo> shards;
  bool tokens = false;       // samples are token ids, labels the next token at each position
  // Labels per sample: 1 for classes, T for a token window.
  std::int64_t labels_per_sample() const { return tokens ? numel(sample_shape) : 1; }
};

// Which shards this process CRC-checks. Ranks that see the same files (the
// ranks of one node: a shared filesystem or the node's own staged copy) can
// share the reads: this process checks the shards whose position modulo
// count is index, and `agree`, a collective over those ranks, turns each
// one's first problem ("" for none) into the job's first problem, so that no
// process hands a damaged shard to libhdf5. The default checks every shard.
struct ShardChecks {
  int index = 0, count = 1;
  std::function<std::string(const std::string&)> agree;
};

// Reads and validates DIR/index.json alone: the header and the shard list
// (absolute paths, sample ranges, CRC-32s); no shard file is read.
DatasetInfo read_dataset_index(const std::string& dir);

// Reads and validates DIR/index.json, then checks every shard: first its
// CRC-32 against index.json (a damaged or changed file is refused before
// libhdf5 opens it), then the shape and type of its datasets; every problem
// is an error naming the file. Each shard is read whole once for the CRC, by
// one of the processes that share `checks`.
DatasetInfo open_dataset(const std::string& dir, const ShardChecks& checks = {});

// Reads samples by global index. Opens its files lazily in the thread that
// calls read() (HDF5 handles must not cross a fork or be shared between
// threads); their checksums were checked by open_dataset, not again here.
class DatasetReader {
 public:
  explicit DatasetReader(DatasetInfo info);
  ~DatasetReader();
  DatasetReader(const DatasetReader&) = delete;
  DatasetReader& operator=(const DatasetReader&) = delete;

  // Fills x (resized to indices.size() × sample_shape, element type dtype;
  // uint8 samples are scaled to [0, 1], except token ids) and labels
  // (labels_per_sample() per sample, sample-major). Runs of consecutive
  // indices are read as one hyperslab; nothing outside the asked ranges is
  // requested. A label outside [0, num_classes) is an error naming the shard
  // and the sample.
  void read(std::span<const std::int64_t> indices, DType dtype, Tensor& x, std::vector<std::int32_t>& labels);

  const DatasetInfo& info() const { return info_; }
  // Sample bytes requested from HDF5 so far (tests check slices stay slices).
  std::int64_t bytes_requested() const { return bytes_requested_; }

 private:
  struct OpenShard;
  OpenShard& shard(std::size_t index);  // opens it on first use
  void scatter(std::size_t shard_index, std::int64_t local, const std::vector<std::size_t>& out, const void* raw,
               const std::int32_t* raw_labels, Tensor& x, std::vector<std::int32_t>& labels) const;
  DatasetInfo info_;
  std::vector<OpenShard*> open_;  // one slot per shard, opened on first use
  std::int64_t bytes_requested_ = 0;
};

}  // namespace dlscale
