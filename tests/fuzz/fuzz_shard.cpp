// libFuzzer target: the input is a dataset folder packed into one byte
// string, index.json, a NUL byte, then the bytes of shard-00000.h5 (the
// seed is a real dataset from write_dataset, see make_shard_seed.cpp). It is
// opened with open_dataset and read with DatasetReader, as training does. A
// dlscale::Error is the expected answer to a broken dataset; a crash, a
// sanitizer report, any other exception or a hang is a bug (ours, or one of
// libhdf5 that a check of ours should keep away).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "io/dataset.h"

namespace {

// Bounds the work of one input: a valid file may declare a huge (unwritten,
// fill-value) dataset that is legitimate but too slow to read whole here.
constexpr std::int64_t kMaxSampleElements = 1 << 12;
constexpr std::int64_t kMaxSamples = 1 << 12;

void read_some(dlscale::DatasetReader& reader) {
  using namespace dlscale;
  const std::int64_t n = reader.info().num_samples;
  dlscale::Tensor x;
  std::vector<std::int32_t> labels;
  // Consecutive runs (one hyperslab each), crossing shard boundaries.
  for (std::int64_t first = 0; first < n; first += 5) {
    std::vector<std::int64_t> indices(static_cast<std::size_t>(std::min<std::int64_t>(5, n - first)));
    std::iota(indices.begin(), indices.end(), first);
    reader.read(indices, DType::f32, x, labels);
  }
  // Backwards with a repeat: single-sample runs and the scatter back into order.
  std::vector<std::int64_t> shuffled;
  for (std::int64_t i = n - 1; i >= 0 && shuffled.size() < 8; i -= 2) shuffled.push_back(i);
  shuffled.push_back(n - 1);
  reader.read(shuffled, DType::f64, x, labels);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dlscale;
  static const std::string dir = fuzz::scratch_dir() + "/dataset";
  static const bool made = std::filesystem::create_directory(dir);
  (void)made;
  const auto* nul = static_cast<const std::uint8_t*>(std::memchr(data, 0, size));
  const std::size_t index_size = nul ? static_cast<std::size_t>(nul - data) : size;
  const std::size_t shard_offset = nul ? index_size + 1 : size;
  fuzz::write_file(dir + "/index.json", data, index_size);
  fuzz::write_file(dir + "/shard-00000.h5", data + shard_offset, size - shard_offset);
  try {
    DatasetInfo info = open_dataset(dir);
    if (numel(info.sample_shape) > kMaxSampleElements) return 0;
    for (const ShardInfo& shard : info.shards)
      if (shard.count > kMaxSamples) return 0;
    DatasetReader reader(info);
    read_some(reader);
  } catch (const Error& e) {
    // A clear message naming the broken file: what the checks are for.
    if (std::getenv("DLSCALE_FUZZ_VERBOSE")) std::fprintf(stderr, "error: %s\n", e.what());
  }
  return 0;
}
