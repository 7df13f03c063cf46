// Tensor: shapes, handle semantics (copies and reshapes share storage),
// deep copies, dtype conversion, type checks and dispatch.
#include "runtime/core/tensor.h"

#include <gtest/gtest.h>

#include "expect_error.h"

#include <string>

namespace dlscale {
namespace {

// Runs fn and checks it throws dlscale::Error whose text contains `part`.
using testing::expect_error;

TEST(Tensor, ShapeNumelAndBytes) {
  Tensor t({64, 1, 28, 28}, DType::f32);
  EXPECT_EQ(t.rank(), 4);
  EXPECT_EQ(t.numel(), 64 * 28 * 28);
  EXPECT_EQ(t.dim(0), 64);
  EXPECT_EQ(t.dim(3), 28);
  EXPECT_EQ(t.bytes(), static_cast<std::size_t>(64 * 28 * 28) * sizeof(float));
  EXPECT_EQ(to_string(t.shape()), "64x1x28x28");
  EXPECT_FALSE(t.empty());

  Tensor d({3, 2}, DType::f64);
  EXPECT_EQ(d.bytes(), 6 * sizeof(double));
  EXPECT_EQ(d.dtype(), DType::f64);
}

TEST(Tensor, DefaultAndZeroSizedTensorsAreEmpty) {
  Tensor none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.numel(), 0);
  EXPECT_EQ(none.rank(), 0);
  Tensor zero_rows({0, 5});
  EXPECT_TRUE(zero_rows.empty());
  EXPECT_EQ(zero_rows.bytes(), 0u);
  zero_rows.zero();  // must not touch memory it does not have
  EXPECT_EQ(to_string(Shape{}), "scalar");
  EXPECT_EQ(numel(Shape{}), 1);
}

TEST(Tensor, NewTensorsAreZeroFilled) {
  Tensor f({7}, DType::f32), d({7}, DType::f64);
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(f.data<float>()[i], 0.0f);
    EXPECT_EQ(d.data<double>()[i], 0.0);
  }
}

TEST(Tensor, BadShapesAndAxesThrow) {
  expect_error([] { Tensor t({2, -1}); }, "negative tensor dimension in shape 2x-1");
  Tensor t({2, 3});
  expect_error([&] { (void)t.dim(2); }, "axis 2 out of range for shape 2x3");
  expect_error([&] { (void)t.dim(-1); }, "axis -1 out of range");
}

TEST(Tensor, CopyIsAHandleOnTheSameStorage) {
  Tensor a({4}, DType::f64);
  Tensor b = a;
  b.set(2, 5.0);
  EXPECT_EQ(a.at(2), 5.0);
  EXPECT_EQ(a.raw(), b.raw());
}

TEST(Tensor, ReshapeSharesStorage) {
  Tensor a({2, 3}, DType::f32);
  for (int i = 0; i < 6; ++i) a.set(i, i);
  Tensor r = a.reshaped({3, 2});
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_EQ(r.raw(), a.raw());
  r.set(5, 42.0);
  EXPECT_EQ(a.at(5), 42.0);
  EXPECT_EQ(a.shape(), (Shape{2, 3}));  // the original keeps its shape
  Tensor flat = a.reshaped({6});
  EXPECT_EQ(flat.at(4), 4.0);
}

TEST(Tensor, ReshapeToOtherElementCountThrows) {
  Tensor a({2, 3});
  expect_error([&] { (void)a.reshaped({4, 2}); }, "cannot reshape 2x3 to 4x2");
}

TEST(Tensor, CloneIsDeep) {
  Tensor a({3}, DType::f64);
  a.set(0, 1.5);
  Tensor c = a.clone();
  EXPECT_NE(c.raw(), a.raw());
  EXPECT_EQ(c.shape(), a.shape());
  EXPECT_EQ(c.dtype(), a.dtype());
  EXPECT_EQ(c.at(0), 1.5);
  c.set(0, -1.0);
  EXPECT_EQ(a.at(0), 1.5);
}

TEST(Tensor, ConvertsBetweenFloat32AndFloat64) {
  Tensor f({3}, DType::f32);
  f.set(0, 0.5);
  f.set(1, -2.25);
  f.set(2, 3.0e10);
  Tensor d = f.to(DType::f64);
  EXPECT_EQ(d.dtype(), DType::f64);
  EXPECT_EQ(d.shape(), f.shape());
  EXPECT_EQ(d.data<double>()[0], 0.5);
  EXPECT_EQ(d.data<double>()[1], -2.25);
  EXPECT_EQ(d.data<double>()[2], static_cast<double>(3.0e10f));

  Tensor back({1}, DType::f64);
  back.set(0, 0.1);
  Tensor narrowed = back.to(DType::f32);
  EXPECT_EQ(narrowed.dtype(), DType::f32);
  EXPECT_EQ(narrowed.data<float>()[0], 0.1f);  // rounded to nearest float
}

TEST(Tensor, ConversionToSameTypeIsADeepCopy) {
  Tensor a({2}, DType::f32);
  a.set(1, 7.0);
  Tensor b = a.to(DType::f32);
  EXPECT_NE(b.raw(), a.raw());
  b.set(1, 0.0);
  EXPECT_EQ(a.at(1), 7.0);
}

TEST(Tensor, ReadingAsTheWrongTypeThrows) {
  Tensor f({2}, DType::f32);
  expect_error([&] { (void)f.data<double>(); }, "tensor holds float32 but was read as float64");
  const Tensor d({2}, DType::f64);
  expect_error([&] { (void)d.data<float>(); }, "tensor holds float64 but was read as float32");
}

TEST(Tensor, CopyFromNeedsSameShapeAndType) {
  Tensor a({2, 2}, DType::f64), b({2, 2}, DType::f64);
  b.set(3, 9.0);
  a.copy_from(b);
  EXPECT_EQ(a.at(3), 9.0);
  EXPECT_NE(a.raw(), b.raw());
  Tensor wrong_shape({4}, DType::f64), wrong_type({2, 2}, DType::f32);
  expect_error([&] { a.copy_from(wrong_shape); }, "copy between tensors of shape 4 (float64) and 2x2 (float64)");
  expect_error([&] { a.copy_from(wrong_type); }, "copy between tensors of shape 2x2 (float32) and 2x2 (float64)");
}

TEST(Tensor, ZeroClearsEveryElement) {
  Tensor a({5}, DType::f32);
  for (int i = 0; i < 5; ++i) a.set(i, i + 1);
  a.zero();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a.at(i), 0.0);
}

TEST(Tensor, DispatchCallsTheMatchingType) {
  auto size = [](DType t) { return dispatch(t, []<class T>() { return sizeof(T); }); };
  EXPECT_EQ(size(DType::f32), sizeof(float));
  EXPECT_EQ(size(DType::f64), sizeof(double));

  Tensor d({3}, DType::f64);
  dispatch(d.dtype(), [&]<class T>() {
    T* p = d.data<T>();  // would throw if dispatch chose float
    p[1] = T(2.5);
  });
  EXPECT_EQ(d.at(1), 2.5);
}

// channels16 is oneDNN's nChw16c: element (n, c, h, w) at
// ((n·C/16 + c/16)·H·W + h·W + w)·16 + c%16.
TEST(Tensor, Channels16LayoutRoundTripsAndIndexesInPlainOrder) {
  const Shape shape{2, 32, 3, 5};
  Tensor plain(shape, DType::f32);
  for (std::int64_t i = 0; i < plain.numel(); ++i) plain.set(i, static_cast<double>(i));
  Tensor blocked = plain.in_layout(Layout::channels16);
  EXPECT_TRUE(blocked.blocked());
  EXPECT_EQ(blocked.layout(), Layout::channels16);
  EXPECT_EQ(blocked.shape(), shape);
  const float* raw = blocked.data_any_layout<float>();
  const std::int64_t S = 15;
  // Sample 1, channel 21 (block 1, lane 5), position (2, 4) = 14.
  const std::int64_t plain_index = (1 * 32 + 21) * S + 14;
  EXPECT_EQ(raw[((1 * 2 + 1) * S + 14) * 16 + 5], static_cast<float>(plain_index));
  for (std::int64_t i = 0; i < plain.numel(); ++i) ASSERT_EQ(blocked.at(i), plain.at(i)) << i;
  blocked.set(plain_index, -1.0);
  EXPECT_EQ(blocked.plain().at(plain_index), -1.0);
  Tensor back = blocked.plain();
  EXPECT_FALSE(back.blocked());
  for (std::int64_t i = 0; i < plain.numel(); ++i)
    if (i != plain_index) ASSERT_EQ(back.data<float>()[i], static_cast<float>(i)) << i;
  // Converting to the layout a tensor has is a handle, not a copy.
  EXPECT_EQ(blocked.in_layout(Layout::channels16).raw(), blocked.raw());
  EXPECT_EQ(blocked.clone().layout(), Layout::channels16);
}

TEST(Tensor, BlockedTensorsRefusePlainAccess) {
  Tensor blocked = Tensor({1, 16, 2, 2}, DType::f32).in_layout(Layout::channels16);
  expect_error([&] { (void)blocked.data<float>(); }, "layout channels16 (nChw16c) was read as plain");
  expect_error([&] { (void)blocked.reshaped({16, 4}); }, "was read as plain");
  expect_error([&] { (void)blocked.to(DType::f64); }, "was read as plain");
  expect_error([] { (void)Tensor::uninitialized({1, 8, 2, 2}, DType::f32, Layout::channels16); },
               "channels16 layout needs a float32 N×C×H×W tensor with C a multiple of 16, not 1x8x2x2");
  expect_error([] { (void)Tensor::uninitialized({1, 16, 2, 2}, DType::f64, Layout::channels16); },
               "not 1x16x2x2 float64");
}

TEST(DType, NamesSizesAndParsing) {
  EXPECT_EQ(to_string(DType::f32), "float32");
  EXPECT_EQ(to_string(DType::f64), "float64");
  EXPECT_EQ(size_of(DType::f32), 4u);
  EXPECT_EQ(size_of(DType::f64), 8u);
  EXPECT_EQ(parse_dtype("single"), DType::f32);
  EXPECT_EQ(parse_dtype("float32"), DType::f32);
  EXPECT_EQ(parse_dtype("double"), DType::f64);
  EXPECT_EQ(parse_dtype("float64"), DType::f64);
  expect_error([] { (void)parse_dtype("half"); }, "unknown data type 'half' (expected single or double)");
  static_assert(dtype_of<float>() == DType::f32 && dtype_of<double>() == DType::f64);
}

}  // namespace
}  // namespace dlscale
