// Constants and small helpers of the on-disk dataset format shared by the
// writer (shard_writer.cpp) and the readers (dataset.cpp,
// dataset_reader.cpp). The format itself is described in docs/data-format.md.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "io/dataset.h"

namespace dlscale::dataset_format {

inline constexpr const char* kFormat = "dlscale-dataset";
inline constexpr int kVersion = 1;
inline constexpr const char* kIndexFile = "index.json";
inline constexpr const char* kSamples = "samples";
inline constexpr const char* kLabels = "labels";
// h5py suggests chunks of 10 KiB to 1 MiB; 64 KiB keeps a random single-sample
// read cheap while sequential reads still move large blocks.
inline constexpr std::int64_t kChunkBytes = 64 * 1024;

inline std::string shard_file_name(int shard) {
  char name[32];
  std::snprintf(name, sizeof name, "shard-%05d.h5", shard);
  return name;
}

inline std::size_t element_size(SampleType type) { return type == SampleType::u8 ? 1 : 4; }

// Little-endian types on disk; HDF5 converts on machines of the other order.
inline hid_t file_type(SampleType type) { return type == SampleType::u8 ? H5T_STD_U8LE : H5T_IEEE_F32LE; }
inline hid_t memory_type(SampleType type) { return type == SampleType::u8 ? H5T_NATIVE_UINT8 : H5T_NATIVE_FLOAT; }

// Samples per chunk: about kChunkBytes, at least one, at most the shard.
inline std::int64_t chunk_samples(std::int64_t sample_bytes, std::int64_t shard_samples) {
  std::int64_t n = sample_bytes > 0 ? kChunkBytes / sample_bytes : 1;
  if (n < 1) n = 1;
  return n < shard_samples ? n : shard_samples;
}

}  // namespace dlscale::dataset_format
