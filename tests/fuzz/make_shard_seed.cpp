// Writes the seed inputs of fuzz_shard: small real datasets from
// write_dataset (uint8 images and float32 features), each packed as
// index.json, a NUL byte and the bytes of shard-00000.h5.
// Usage: fuzz_make_shard_seed OUT_FOLDER
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <unistd.h>

#include "io/shard_writer.h"

namespace {

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_seed(const dlscale::RawDataset& data, const std::filesystem::path& scratch, const std::string& out) {
  std::filesystem::remove_all(scratch);
  dlscale::write_dataset(scratch.string(), data, 1);
  std::string packed = slurp(scratch / "index.json");
  packed.push_back('\0');
  packed += slurp(scratch / "shard-00000.h5");
  std::ofstream(out, std::ios::binary) << packed;
  std::filesystem::remove_all(scratch);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_FOLDER\n", argv[0]);
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path out(argv[1]);
  fs::create_directories(out);
  const fs::path scratch = fs::temp_directory_path() / ("dlscale-shard-seed-" + std::to_string(::getpid()));

  dlscale::RawDataset images;  // 6 samples of 1x3x3 uint8, 3 classes
  images.sample_shape = {1, 3, 3};
  images.sample_type = dlscale::SampleType::u8;
  for (int i = 0; i < 6 * 9; ++i) images.samples.push_back(static_cast<std::uint8_t>(i * 7));
  images.labels = {0, 1, 2, 0, 1, 2};
  write_seed(images, scratch, (out / "images-u8.bin").string());

  dlscale::RawDataset features;  // 4 samples of 2 float32 features, 2 classes
  features.sample_shape = {2};
  features.sample_type = dlscale::SampleType::f32;
  const float values[] = {0.5f, -1.0f, 2.0f, 0.25f, -3.0f, 4.0f, 1.5f, 0.0f};
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(values);
  features.samples.assign(bytes, bytes + sizeof values);
  features.labels = {1, 0, 1, 0};
  write_seed(features, scratch, (out / "features-f32.bin").string());
  return 0;
}
