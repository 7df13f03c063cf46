// libFuzzer target: the input is a dataset folder packed into one byte
// string, index.json, a NUL byte, then the bytes of shard-00000.h5 (the
// seed is a real dataset from write_dataset, see make_shard_seed.cpp). It is
// opened with open_dataset and read with DatasetReader, as training does. A
// dlscale::Error is the expected answer to a broken dataset; a crash, a
// sanitizer report, any other exception or a hang is a bug (ours, or one of
// libhdf5 that a check of ours should keep away).
//
// Shards carry a CRC-32 in index.json that open_dataset checks before libhdf5
// opens the file. A mutated shard would almost never match the CRC of its
// index, and the fuzzer would only ever test that comparison. So the harness
// writes the CRC-32 of the fuzzed shard bytes into every shard entry of
// index.json (when it parses; only shard-00000.h5 exists), as a writer of
// that file would: the mutations then reach libhdf5 and our checks behind the CRC,
// which is where the bugs are. The comparison itself, and a missing or
// malformed "crc32", are tested in tests/io and test_fuzz_findings.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "io/dataset.h"
#include "io/file_checksum.h"

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

// The index text with the shard's real CRC-32 filled in; unchanged when it
// is not JSON, so open_dataset still sees (and refuses) the broken text.
std::string with_shard_crc(const std::uint8_t* text, std::size_t size, const std::string& shard_path) {
  std::string index(reinterpret_cast<const char*>(text), size);
  nlohmann::json j = nlohmann::json::parse(index, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return index;
  auto shards = j.find("shards");
  if (shards == j.end() || !shards->is_array()) return index;
  const std::string crc = dlscale::crc32_text(dlscale::file_crc32(shard_path));
  for (auto& entry : *shards)
    if (entry.is_object()) entry["crc32"] = crc;
  try {
    return j.dump();
  } catch (const nlohmann::json::exception&) {  // text nlohmann cannot write back (invalid UTF-8)
    return index;
  }
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
  fuzz::write_file(dir + "/shard-00000.h5", data + shard_offset, size - shard_offset);
  const std::string index = with_shard_crc(data, index_size, dir + "/shard-00000.h5");
  fuzz::write_file(dir + "/index.json", reinterpret_cast<const std::uint8_t*>(index.data()), index.size());
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
