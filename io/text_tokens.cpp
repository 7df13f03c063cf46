// Byte-level token windows from plain text files.
#include "io/text_tokens.h"

#include <fstream>
#include <iterator>

namespace dlscale {

std::vector<std::uint8_t> read_text_files(const std::vector<std::string>& paths) {
  if (paths.empty()) fail("no text files given");
  std::vector<std::uint8_t> bytes;
  for (const auto& path : paths) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot read text file " + path);
    bytes.insert(bytes.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (in.bad()) fail("cannot read text file " + path);
  }
  return bytes;
}

std::int64_t count_windows(std::int64_t size, const TextWindows& how) {
  if (how.context < 1 || how.stride < 1) fail("context and stride must be at least 1");
  return size < how.context + 1 ? 0 : (size - how.context - 1) / how.stride + 1;
}

RawDataset text_windows(const std::vector<std::uint8_t>& bytes, const TextWindows& how, std::int64_t first,
                        std::int64_t end) {
  const std::int64_t total = count_windows(static_cast<std::int64_t>(bytes.size()), how);
  if (total == 0)
    fail("the text holds " + std::to_string(bytes.size()) + " bytes: a window of context " +
         std::to_string(how.context) + " needs at least " + std::to_string(how.context + 1) +
         " (T tokens and the one after)");
  if (end < 0) end = total;
  DLSCALE_REQUIRE(0 <= first && first <= end && end <= total, "window range outside the text");
  RawDataset data;
  data.sample_shape = {how.context};
  data.sample_type = SampleType::u8;
  data.tokens = true;
  data.labels_per_sample = how.context;
  const auto t = static_cast<std::size_t>(how.context);
  data.samples.reserve(static_cast<std::size_t>(end - first) * t);
  data.labels.reserve(static_cast<std::size_t>(end - first) * t);
  for (std::int64_t i = first; i < end; ++i) {
    const auto s = static_cast<std::size_t>(i * how.stride);
    data.samples.insert(data.samples.end(), bytes.begin() + s, bytes.begin() + s + t);
    for (std::size_t j = 0; j < t; ++j) data.labels.push_back(bytes[s + j + 1]);
  }
  return data;
}

}  // namespace dlscale
