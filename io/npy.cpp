// read_npy: NumPy .npy files (format versions 1 to 3). Only the header's
// three keys matter: descr (element type), fortran_order and shape.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "io/shard_writer.h"

namespace dlscale {

namespace {

struct NpyArray {
  char kind = 0;         // 'u', 'i', 'f' or 'b'
  std::size_t size = 0;  // bytes per element
  bool swap = false;     // stored big-endian
  Shape shape;
  std::size_t offset = 0;  // where the data starts in bytes
  std::vector<std::uint8_t> bytes;
  std::int64_t count() const { return numel(shape); }
};

// The text after `'key':` in the header dict, with leading spaces removed.
std::string value_of(const std::string& header, const std::string& key, const std::string& path) {
  std::size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) at = header.find("\"" + key + "\"");
  std::size_t colon = at == std::string::npos ? at : header.find(':', at);
  if (colon == std::string::npos) fail(path + ": the .npy header has no '" + key + "' entry");
  std::size_t start = header.find_first_not_of(' ', colon + 1);
  return start == std::string::npos ? "" : header.substr(start);
}

void parse_descr(const std::string& header, NpyArray& a, const std::string& path) {
  std::string v = value_of(header, "descr", path);
  std::size_t end = v.empty() ? std::string::npos : v.find(v[0], 1);
  if (end == std::string::npos || (v[0] != '\'' && v[0] != '"'))
    fail(path + ": structured arrays are not supported (the .npy descr must be a simple type like '<f4')");
  std::string d = v.substr(1, end - 1);  // e.g. "<f4", "|u1"
  if (d.size() < 3 || std::string("<>|=").find(d[0]) == std::string::npos)
    fail(path + ": unsupported .npy element type '" + d + "'");
  a.kind = d[1];
  a.size = static_cast<std::size_t>(std::atoi(d.c_str() + 2));
  a.swap = d[0] == '>' && a.size > 1;
}

void parse_shape(const std::string& header, NpyArray& a, const std::string& path) {
  std::string v = value_of(header, "shape", path);
  std::size_t close = v.find(')');
  if (v.empty() || v[0] != '(' || close == std::string::npos) fail(path + ": the .npy shape is not a tuple");
  std::string inner = v.substr(1, close - 1);
  std::size_t pos = 0;
  while (pos < inner.size()) {
    std::size_t comma = inner.find(',', pos);
    std::string item = inner.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.find_first_not_of(" L") != std::string::npos) a.shape.push_back(std::stoll(item));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
}

NpyArray load_npy(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("cannot open " + path + ": the file does not exist");
  std::ifstream in(path, std::ios::binary);
  NpyArray a;
  a.bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  const auto& b = a.bytes;
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0) fail(path + " is not a .npy file (bad magic)");
  const int major = b[6];
  if (major < 1 || major > 3) fail(path + ": .npy format version " + std::to_string(major) + " is not supported");
  // Version 1 stores the header length in 2 bytes, versions 2 and 3 in 4.
  const std::size_t start = major == 1 ? 10 : 12;
  std::size_t length = 0;
  for (std::size_t k = 8; k < start && k < b.size(); ++k) length |= static_cast<std::size_t>(b[k]) << (8 * (k - 8));
  a.offset = start + length;
  if (b.size() < a.offset) fail(path + " is truncated: its .npy header is incomplete");
  std::string header(b.begin() + static_cast<std::ptrdiff_t>(start), b.begin() + static_cast<std::ptrdiff_t>(a.offset));
  if (value_of(header, "fortran_order", path).rfind("True", 0) == 0)
    fail(path + " is stored in Fortran order; save it in C order (numpy.ascontiguousarray) and convert again");
  parse_descr(header, a, path);
  parse_shape(header, a, path);
  if (a.shape.empty()) fail(path + " holds a scalar, not an array of samples");
  const auto need = static_cast<std::size_t>(a.count()) * a.size;
  if (b.size() - a.offset < need)
    fail(path + " is truncated: it holds " + std::to_string(b.size() - a.offset) + " data bytes, its shape needs " +
         std::to_string(need));
  return a;
}

// Element i as raw little-endian bytes in `out` (a.size of them).
void element(const NpyArray& a, std::int64_t i, std::uint8_t* out) {
  const std::uint8_t* p = a.bytes.data() + a.offset + static_cast<std::size_t>(i) * a.size;
  for (std::size_t k = 0; k < a.size; ++k) out[k] = a.swap ? p[a.size - 1 - k] : p[k];
}

std::int64_t integer_at(const NpyArray& a, std::int64_t i) {
  std::uint8_t raw[8] = {};
  element(a, i, raw);
  std::uint64_t u = 0;
  std::memcpy(&u, raw, a.size);  // little-endian host assumed, as everywhere in dlscale
  if (a.kind == 'i' && a.size < 8 && (u >> (8 * a.size - 1)) & 1) u |= ~0ull << (8 * a.size);  // sign-extend
  return static_cast<std::int64_t>(u);
}

void read_images(const NpyArray& a, const std::string& path, RawDataset& data) {
  const std::int64_t n = a.count();
  if (a.kind == 'u' && a.size == 1) {
    data.sample_type = SampleType::u8;
    data.samples.assign(a.bytes.begin() + static_cast<std::ptrdiff_t>(a.offset),
                        a.bytes.begin() + static_cast<std::ptrdiff_t>(a.offset + static_cast<std::size_t>(n)));
    return;
  }
  if (a.kind != 'f' || (a.size != 4 && a.size != 8))
    fail(path + ": images must be uint8 ('|u1') or float32 ('<f4'); float64 is converted to float32");
  data.sample_type = SampleType::f32;
  data.samples.resize(static_cast<std::size_t>(n) * 4);
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint8_t raw[8];
    element(a, i, raw);
    float v;
    if (a.size == 4) {
      std::memcpy(&v, raw, 4);
    } else {
      double d;
      std::memcpy(&d, raw, 8);
      v = static_cast<float>(d);
    }
    if (!std::isfinite(v)) fail(path + ": element " + std::to_string(i) + " is NaN or Inf (or too large for float32)");
    std::memcpy(data.samples.data() + i * 4, &v, 4);
  }
}

}  // namespace

RawDataset read_npy(const std::string& images_path, const std::string& labels_path) {
  NpyArray images = load_npy(images_path);
  NpyArray labels = load_npy(labels_path);
  if (images.shape.size() < 2)
    fail(images_path + ": images need a sample axis and at least one more (shape " + to_string(images.shape) + ")");
  if ((labels.kind != 'i' && labels.kind != 'u') || labels.size > 8 || labels.size == 0)
    fail(labels_path + ": labels must be integers (e.g. '<i8', '<i4', '|u1')");
  const bool column = labels.shape.size() == 2 && labels.shape[1] == 1;
  if (labels.shape.size() != 1 && !column)
    fail(labels_path + ": labels must have shape (N,), not " + to_string(labels.shape));
  if (labels.shape[0] != images.shape[0])
    fail(images_path + " holds " + std::to_string(images.shape[0]) + " samples but " + labels_path + " holds " +
         std::to_string(labels.shape[0]) + " labels");
  if (images.shape[0] == 0) fail(images_path + " holds no samples");

  RawDataset data;
  data.sample_shape.assign(images.shape.begin() + 1, images.shape.end());
  read_images(images, images_path, data);
  for (std::int64_t i = 0; i < labels.shape[0]; ++i) {
    std::int64_t v = integer_at(labels, i);
    if (v < 0 || v > INT32_MAX)  // a uint64 above INT64_MAX reads as negative
      fail(labels_path + ": label " + std::to_string(i) + " is " + std::to_string(v) + ", not a class number >= 0");
    data.labels.push_back(static_cast<std::int32_t>(v));
  }
  return data;
}

}  // namespace dlscale
