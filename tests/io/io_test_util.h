// Helpers shared by the io tests: scratch folders and synthetic datasets
// whose every value can be recomputed from (sample, element).
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "io/shard_writer.h"

namespace dlscale::test {

// A fresh folder under the system temp dir, removed when the test ends.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("dlscale-io-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::uint8_t u8_value(std::int64_t sample, std::int64_t element) {
  return static_cast<std::uint8_t>((sample * 7 + element * 3) % 256);
}
inline float f32_value(std::int64_t sample, std::int64_t element) {
  return static_cast<float>(sample) - 0.25f * static_cast<float>(element);
}
inline std::int32_t label_value(std::int64_t sample, int classes) {
  return static_cast<std::int32_t>((sample * 3) % classes);
}

inline RawDataset make_dataset(std::int64_t n, Shape shape, SampleType type, int classes = 10) {
  RawDataset data;
  data.sample_shape = shape;
  data.sample_type = type;
  const std::int64_t per = numel(shape);
  data.samples.resize(static_cast<std::size_t>(n * per) * (type == SampleType::u8 ? 1 : 4));
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t e = 0; e < per; ++e) {
      if (type == SampleType::u8) {
        data.samples[static_cast<std::size_t>(i * per + e)] = u8_value(i, e);
      } else {
        float v = f32_value(i, e);
        std::memcpy(data.samples.data() + (i * per + e) * 4, &v, 4);
      }
    }
    data.labels.push_back(label_value(i, classes));
  }
  return data;
}

// The value read() must produce for element e of global sample i.
inline double expected_value(SampleType type, std::int64_t i, std::int64_t e) {
  return type == SampleType::u8 ? static_cast<double>(u8_value(i, e)) / 255.0 : static_cast<double>(f32_value(i, e));
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

}  // namespace dlscale::test

// Expects `statement` to throw dlscale::Error whose message contains `part`.
#define EXPECT_ERROR_CONTAINS(statement, part)                                    \
  do {                                                                            \
    try {                                                                         \
      statement;                                                                  \
      ADD_FAILURE() << "expected an error containing '" << (part) << "'";         \
    } catch (const ::dlscale::Error& e) {                                         \
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what(); \
    }                                                                             \
  } while (0)
