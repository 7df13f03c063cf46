// read_idx: the idx format of MNIST and Fashion-MNIST (big-endian header,
// then raw bytes), gzipped as downloaded or already unpacked.
#include <zlib.h>

#include <cstdio>
#include <filesystem>

#include "io/shard_writer.h"

namespace dlscale {

namespace {

// gzread passes files without a gzip header through unchanged, so one
// reader serves both forms.
std::vector<std::uint8_t> read_maybe_gzipped(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("cannot open " + path + ": the file does not exist");
  gzFile in = gzopen(path.c_str(), "rb");
  if (!in) fail("cannot open " + path);
  std::vector<std::uint8_t> bytes;
  std::uint8_t buffer[1 << 16];
  while (true) {
    int n = gzread(in, buffer, sizeof buffer);
    if (n < 0) {
      int code = 0;
      std::string why = gzerror(in, &code);
      gzclose(in);
      fail("cannot read " + path + ": " + why);
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), buffer, buffer + n);
  }
  gzclose(in);
  return bytes;
}

std::uint32_t big_endian(const std::vector<std::uint8_t>& b, std::size_t at) {
  return static_cast<std::uint32_t>(b[at]) << 24 | static_cast<std::uint32_t>(b[at + 1]) << 16 |
         static_cast<std::uint32_t>(b[at + 2]) << 8 | b[at + 3];
}

std::string hex(std::uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

// Returns the dimensions of an unsigned-byte idx file with `rank` axes and
// checks that its payload is all there.
std::vector<std::uint32_t> idx_dims(const std::vector<std::uint8_t>& b, int rank, const std::string& path,
                                    const char* kind) {
  const std::uint32_t magic = 0x00000800u | static_cast<std::uint32_t>(rank);
  if (b.size() < 4 || big_endian(b, 0) != magic)
    fail(path + " is not an idx " + kind + " file (magic number " + (b.size() < 4 ? "missing" : hex(big_endian(b, 0))) +
         ", expected " + hex(magic) + ")");
  const std::size_t header = 4 + 4 * static_cast<std::size_t>(rank);
  if (b.size() < header) fail(path + " is truncated: its idx header is incomplete");
  std::vector<std::uint32_t> dims;
  std::size_t payload = 1;
  for (int i = 0; i < rank; ++i) {
    dims.push_back(big_endian(b, 4 + 4 * static_cast<std::size_t>(i)));
    if (dims.back() != 0 && payload > b.size() / dims.back())
      fail(path + " is truncated or damaged: its header announces more data than the file holds");
    payload *= dims.back();
  }
  if (b.size() - header != payload)
    fail(path + " holds " + std::to_string(b.size() - header) + " data bytes but its header announces " +
         std::to_string(payload) + (b.size() - header < payload ? " (the file is truncated)" : ""));
  return dims;
}

}  // namespace

RawDataset read_idx(const std::string& images_path, const std::string& labels_path) {
  std::vector<std::uint8_t> images = read_maybe_gzipped(images_path);
  std::vector<std::uint8_t> labels = read_maybe_gzipped(labels_path);
  auto image_dims = idx_dims(images, 3, images_path, "image");
  auto label_dims = idx_dims(labels, 1, labels_path, "label");
  if (image_dims[0] != label_dims[0])
    fail(images_path + " holds " + std::to_string(image_dims[0]) + " images but " + labels_path + " holds " +
         std::to_string(label_dims[0]) + " labels");
  if (image_dims[0] == 0) fail(images_path + " holds no images");

  RawDataset data;
  data.sample_shape = {1, image_dims[1], image_dims[2]};
  data.sample_type = SampleType::u8;
  data.samples.assign(images.begin() + 16, images.end());
  data.labels.assign(labels.begin() + 8, labels.end());
  return data;
}

}  // namespace dlscale
