// Converters: idx (plain and gzipped), CSV and .npy files written by the test
// itself, their error messages, and one converter-to-reader round trip.
#include <gtest/gtest.h>
#include <zlib.h>

#include "io/io_test_util.h"

namespace dlscale {
namespace {

using test::TempDir;
using Bytes = std::vector<std::uint8_t>;

void put_be32(Bytes& b, std::uint32_t v) {
  for (int shift : {24, 16, 8, 0}) b.push_back(static_cast<std::uint8_t>(v >> shift));
}

// n images of rows×cols (value (i*rows*cols + e) % 256) and labels i % 10.
std::pair<Bytes, Bytes> idx_files(std::uint32_t n, std::uint32_t rows, std::uint32_t cols) {
  Bytes images, labels;
  put_be32(images, 0x803);
  for (auto d : {n, rows, cols}) put_be32(images, d);
  for (std::uint32_t e = 0; e < n * rows * cols; ++e) images.push_back(static_cast<std::uint8_t>(e % 256));
  put_be32(labels, 0x801);
  put_be32(labels, n);
  for (std::uint32_t i = 0; i < n; ++i) labels.push_back(static_cast<std::uint8_t>(i % 10));
  return {images, labels};
}

void write_bytes(const std::string& path, const Bytes& b) { test::write_text(path, std::string(b.begin(), b.end())); }

void write_gz(const std::string& path, const Bytes& b) {
  gzFile out = gzopen(path.c_str(), "wb");
  ASSERT_NE(out, nullptr);
  ASSERT_EQ(gzwrite(out, b.data(), static_cast<unsigned>(b.size())), static_cast<int>(b.size()));
  gzclose(out);
}

TEST(Idx, PlainAndGzippedGiveTheSameDataset) {
  TempDir tmp;
  auto [images, labels] = idx_files(6, 3, 4);
  write_bytes(tmp / "img", images);
  write_bytes(tmp / "lab", labels);
  write_gz(tmp / "img.gz", images);
  write_gz(tmp / "lab.gz", labels);
  RawDataset plain = read_idx(tmp / "img", tmp / "lab");
  RawDataset gz = read_idx(tmp / "img.gz", tmp / "lab.gz");
  EXPECT_EQ(plain.sample_shape, (Shape{1, 3, 4}));
  EXPECT_EQ(plain.sample_type, SampleType::u8);
  EXPECT_EQ(plain.num_samples(), 6);
  EXPECT_EQ(plain.samples, Bytes(images.begin() + 16, images.end()));
  EXPECT_EQ(plain.labels, (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(gz.samples, plain.samples);
  EXPECT_EQ(gz.labels, plain.labels);
  EXPECT_EQ(gz.sample_shape, plain.sample_shape);
}

TEST(Idx, ErrorsNameTheFile) {
  TempDir tmp;
  auto [images, labels] = idx_files(6, 3, 4);
  write_bytes(tmp / "img", images);
  write_bytes(tmp / "lab", labels);
  EXPECT_ERROR_CONTAINS(read_idx(tmp / "lab", tmp / "img"), tmp / "lab" + " is not an idx image file");
  EXPECT_ERROR_CONTAINS(read_idx(tmp / "img", tmp / "missing"), tmp / "missing");
  auto [five, five_labels] = idx_files(5, 3, 4);
  write_bytes(tmp / "lab5", five_labels);
  EXPECT_ERROR_CONTAINS(read_idx(tmp / "img", tmp / "lab5"), "holds 6 images but " + tmp / "lab5" + " holds 5 labels");
  write_bytes(tmp / "short", Bytes(images.begin(), images.end() - 7));
  EXPECT_ERROR_CONTAINS(read_idx(tmp / "short", tmp / "lab"), tmp / "short" + " holds");
}

TEST(Csv, HeaderLabelColumnAndShape) {
  TempDir tmp;
  test::write_text(tmp / "a.csv", "label,x0,x1,x2,x3\n1,0.5,1,2,3\n0, -1.5 ,2e1,+3,4\r\n\n2,7,8,9,10\n");
  RawDataset d = read_csv(tmp / "a.csv", 0, true, {});
  EXPECT_EQ(d.sample_shape, (Shape{4}));
  EXPECT_EQ(d.sample_type, SampleType::f32);
  EXPECT_EQ(d.labels, (std::vector<std::int32_t>{1, 0, 2}));
  std::vector<float> f(12);
  std::memcpy(f.data(), d.samples.data(), 48);
  EXPECT_EQ(f, (std::vector<float>{0.5f, 1, 2, 3, -1.5f, 20, 3, 4, 7, 8, 9, 10}));

  test::write_text(tmp / "b.csv", "1,2,3,4,5\n5,6,7,8,3.0\n");
  RawDataset last = read_csv(tmp / "b.csv", -1, false, {2, 2});
  EXPECT_EQ(last.sample_shape, (Shape{2, 2}));
  EXPECT_EQ(last.labels, (std::vector<std::int32_t>{5, 3}));
  EXPECT_ERROR_CONTAINS(read_csv(tmp / "b.csv", -1, false, {3}), "sample shape 3 has 3 elements");
}

TEST(Csv, BadRowsNameFileAndLine) {
  TempDir tmp;
  test::write_text(tmp / "c.csv", "h1,h2,h3\n1,2,0\n1,oops,0\n");
  EXPECT_ERROR_CONTAINS(read_csv(tmp / "c.csv", 2, true, {}), tmp / "c.csv" + ":3: column 1: 'oops' is not a number");
  test::write_text(tmp / "d.csv", "1,2,0\n1,2\n");
  EXPECT_ERROR_CONTAINS(read_csv(tmp / "d.csv", 2, false, {}), tmp / "d.csv" + ":2: the row has 2 columns, expected 3");
  test::write_text(tmp / "e.csv", "1,2,-1\n");
  EXPECT_ERROR_CONTAINS(read_csv(tmp / "e.csv", 2, false, {}), tmp / "e.csv" + ":1: label");
  test::write_text(tmp / "f.csv", "1,nan,0\n");
  EXPECT_ERROR_CONTAINS(read_csv(tmp / "f.csv", 2, false, {}), ":1: column 1: 'nan' is not a finite number");
  EXPECT_ERROR_CONTAINS(read_csv(tmp / "f.csv", 5, false, {}), "label column 5 does not exist");
  test::write_text(tmp / "g.csv", "a,b\n");
  EXPECT_ERROR_CONTAINS(read_csv(tmp / "g.csv", 0, true, {}), "holds no data rows");
}

// A .npy file: `version` 1 or 2 header, then the raw little-endian data.
void write_npy(const std::string& path, const std::string& descr, const std::string& shape, const Bytes& data,
               int version = 1, bool fortran = false) {
  std::string dict =
      "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
  const std::size_t prefix = version == 1 ? 10 : 12;
  while ((prefix + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  Bytes b{0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(version), 0};
  for (std::size_t k = 0; k < prefix - 8; ++k) b.push_back(static_cast<std::uint8_t>(dict.size() >> (8 * k)));
  b.insert(b.end(), dict.begin(), dict.end());
  b.insert(b.end(), data.begin(), data.end());
  write_bytes(path, b);
}

template <class T>
Bytes as_bytes(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(Npy, Uint8ImagesWithVariousLabelTypes) {
  TempDir tmp;
  Bytes pixels(3 * 2 * 2);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i * 10);
  write_npy(tmp / "x.npy", "|u1", "(3, 2, 2)", pixels);
  write_npy(tmp / "y8.npy", "<i8", "(3,)", as_bytes(std::vector<std::int64_t>{2, 0, 1}));
  write_npy(tmp / "y1.npy", "|u1", "(3,)", Bytes{2, 0, 1});
  write_npy(tmp / "y2.npy", "<u2", "(3,)", as_bytes(std::vector<std::uint16_t>{2, 0, 1}), 2);
  write_npy(tmp / "y4.npy", "<i4", "(3, 1)", as_bytes(std::vector<std::int32_t>{2, 0, 1}));
  for (const char* labels : {"y8.npy", "y1.npy", "y2.npy", "y4.npy"}) {
    RawDataset d = read_npy(tmp / "x.npy", tmp / labels);
    EXPECT_EQ(d.sample_shape, (Shape{2, 2})) << labels;
    EXPECT_EQ(d.sample_type, SampleType::u8);
    EXPECT_EQ(d.samples, pixels);
    EXPECT_EQ(d.labels, (std::vector<std::int32_t>{2, 0, 1})) << labels;
  }
}

TEST(Npy, Float32ImagesVersion2) {
  TempDir tmp;
  std::vector<float> values{0.5f, -1, 2, 3, 4, 5};
  write_npy(tmp / "x.npy", "<f4", "(2, 1, 3)", as_bytes(values), 2);
  write_npy(tmp / "y.npy", "<i4", "(2,)", as_bytes(std::vector<std::int32_t>{1, 0}));
  RawDataset d = read_npy(tmp / "x.npy", tmp / "y.npy");
  EXPECT_EQ(d.sample_shape, (Shape{1, 3}));
  EXPECT_EQ(d.sample_type, SampleType::f32);
  EXPECT_EQ(d.samples, as_bytes(values));
}

TEST(Npy, Errors) {
  TempDir tmp;
  write_npy(tmp / "y.npy", "<i4", "(2,)", as_bytes(std::vector<std::int32_t>{1, 0}));
  write_npy(tmp / "f.npy", "<f4", "(2, 3)", as_bytes(std::vector<float>(6)), 1, true);
  EXPECT_ERROR_CONTAINS(read_npy(tmp / "f.npy", tmp / "y.npy"), tmp / "f.npy" + " is stored in Fortran order");
  write_npy(tmp / "x.npy", "<f4", "(3, 2)", as_bytes(std::vector<float>(6)));
  EXPECT_ERROR_CONTAINS(read_npy(tmp / "x.npy", tmp / "y.npy"), "holds 3 samples but");
  write_npy(tmp / "i.npy", "<i2", "(2, 3)", Bytes(12));
  EXPECT_ERROR_CONTAINS(read_npy(tmp / "i.npy", tmp / "y.npy"), "images must be uint8");
  write_npy(tmp / "t.npy", "<f4", "(2, 3)", Bytes(10));
  EXPECT_ERROR_CONTAINS(read_npy(tmp / "t.npy", tmp / "y.npy"), tmp / "t.npy" + " is truncated");
  write_npy(tmp / "neg.npy", "<i8", "(2,)", as_bytes(std::vector<std::int64_t>{1, -4}));
  write_npy(tmp / "ok.npy", "<f4", "(2, 3)", as_bytes(std::vector<float>(6)));
  EXPECT_ERROR_CONTAINS(read_npy(tmp / "ok.npy", tmp / "neg.npy"), "label 1 is -4");
  test::write_text(tmp / "junk.npy", "not numpy at all");
  EXPECT_ERROR_CONTAINS(read_npy(tmp / "junk.npy", tmp / "y.npy"), tmp / "junk.npy" + " is not a .npy file");
}

TEST(Converters, IdxToDatasetToReader) {
  TempDir tmp;
  auto [images, labels] = idx_files(9, 2, 3);
  write_gz(tmp / "img.gz", images);
  write_gz(tmp / "lab.gz", labels);
  write_dataset(tmp / "ds", read_idx(tmp / "img.gz", tmp / "lab.gz"), 2);
  DatasetInfo info = open_dataset(tmp / "ds");
  EXPECT_EQ(info.num_classes, 9);  // max label 8, plus one
  DatasetReader reader(info);
  Tensor x;
  std::vector<std::int32_t> got;
  reader.read(std::vector<std::int64_t>{8, 0}, DType::f32, x, got);
  EXPECT_EQ(got, (std::vector<std::int32_t>{8, 0}));
  EXPECT_FLOAT_EQ(static_cast<float>(x.at(0)), 48.0f / 255.0f);  // sample 8, pixel 0 = 8*6
  EXPECT_FLOAT_EQ(static_cast<float>(x.at(6 + 5)), 5.0f / 255.0f);
}

}  // namespace
}  // namespace dlscale
