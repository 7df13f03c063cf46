// Byte-level token datasets: windows and next-byte targets from text, the
// held-out tail, the round trip through shards (ids unscaled, T targets per
// sample), and what the reader refuses.
#include "io/text_tokens.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "expect_error.h"
#include "io/dataset.h"
#include "io/io_test_util.h"

namespace dlscale {
namespace {

using test::TempDir;
using testing::expect_error;

std::vector<std::uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }
std::string text_of(const std::uint8_t* p, std::size_t n) { return {p, p + n}; }

TEST(TextTokens, WindowsAndNextByteTargets) {
  const auto bytes = bytes_of("abcdefghij");
  RawDataset d = text_windows(bytes, {3, 3});
  ASSERT_EQ(d.num_samples(), 3);  // starts 0, 3, 6: the last needs bytes 6..9
  EXPECT_TRUE(d.tokens);
  EXPECT_EQ(d.sample_shape, Shape({3}));
  EXPECT_EQ(text_of(d.samples.data(), 9), "abcdefghi");
  std::string targets(d.labels.begin(), d.labels.end());
  EXPECT_EQ(targets, "bcdefghij");
  // Overlapping windows with stride 2: starts 0, 2, 4, 6.
  EXPECT_EQ(count_windows(10, {3, 2}), 4);
  RawDataset tail = text_windows(bytes, {3, 2}, 3, 4);
  ASSERT_EQ(tail.num_samples(), 1);
  EXPECT_EQ(text_of(tail.samples.data(), 3), "ghi");
  EXPECT_EQ(tail.labels.back(), 'j');
  expect_error([&] { text_windows(bytes_of("abc"), {3, 3}); }, "a window of context 3 needs at least 4");
}

TEST(TextTokens, ShardsRoundTripWithUnscaledIdsAndTargetsPerPosition) {
  TempDir dir;
  {
    std::ofstream(dir / "a.txt") << "Hello, world.\n";
    std::ofstream(dir / "b.txt") << "\xff\x01 bytes";
  }
  const auto bytes = read_text_files({dir / "a.txt", dir / "b.txt"});
  ASSERT_EQ(bytes.size(), 14u + 8u);  // concatenated in order
  write_dataset(dir / "data", text_windows(bytes, {4, 4}), 2, kByteVocabulary);
  DatasetInfo info = open_dataset(dir / "data");
  EXPECT_TRUE(info.tokens);
  EXPECT_EQ(info.num_classes, 256);
  EXPECT_EQ(info.labels_per_sample(), 4);
  ASSERT_EQ(info.num_samples, 5);  // (22 - 5) / 4 + 1
  DatasetReader reader(info);
  Tensor x;
  std::vector<std::int32_t> labels;
  reader.read(std::vector<std::int64_t>{3, 0}, DType::f32, x, labels);
  ASSERT_EQ(x.shape(), Shape({2, 4}));
  ASSERT_EQ(labels.size(), 8u);
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(x.at(t), bytes[12 + t]) << t;       // window 3 starts at byte 12: ".\n\xff\x01"
    EXPECT_EQ(labels[t], bytes[13 + t]) << t;
    EXPECT_EQ(x.at(4 + t), bytes[t]) << t;        // window 0
    EXPECT_EQ(labels[4 + t], bytes[1 + t]) << t;
  }
  EXPECT_EQ(x.at(2), 255.0);  // a byte id, not 255/255
}

TEST(TextTokens, IndexMustDescribeByteWindows) {
  TempDir dir;
  write_dataset(dir / "data", text_windows(bytes_of("abcdefghijklmnop"), {4, 4}), 1, kByteVocabulary);
  const std::string index = dir / "data/index.json";
  auto edit = [&](auto change) {
    std::ifstream in(index);
    auto j = nlohmann::json::parse(in);
    change(j);
    std::ofstream(index) << j.dump();
  };
  edit([](nlohmann::json& j) { j["kind"] = "words"; });
  expect_error([&] { open_dataset(dir / "data"); }, "field 'kind' must be \"classes\" (the default) or \"tokens\"");
  edit([](nlohmann::json& j) { j["kind"] = "tokens", j["sample_shape"] = {2, 2}; });
  expect_error([&] { open_dataset(dir / "data"); }, "'sample_shape' must be [T] and 'dtype' \"uint8\"");
  // Token windows read as a classification dataset: /labels is N×T, not N.
  edit([](nlohmann::json& j) { j.erase("kind"), j["sample_shape"] = {4}; });
  expect_error([&] { open_dataset(dir / "data"); }, "/labels has shape 3x4 but the shard holds 3 samples");
}

}  // namespace
}  // namespace dlscale
