// Tensor storage, conversion and element access.
#include "runtime/core/tensor.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace dlscale {

namespace {
// 64-byte alignment keeps BLAS and vectorized loops on their fast paths.
constexpr std::size_t kAlignment = 64;

std::shared_ptr<std::byte[]> allocate(std::size_t bytes, bool zero = true) {
  std::size_t rounded = (std::max<std::size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  auto* p = static_cast<std::byte*>(::operator new[](rounded, std::align_val_t(kAlignment)));
  if (zero) std::memset(p, 0, rounded);
  return std::shared_ptr<std::byte[]>(p, [](std::byte* q) { ::operator delete[](q, std::align_val_t(kAlignment)); });
}
}  // namespace

std::string to_string(DType dtype) { return dtype == DType::f64 ? "float64" : "float32"; }

std::string to_string(Layout layout) { return layout == Layout::channels16 ? "channels16 (nChw16c)" : "plain"; }

DType parse_dtype(const std::string& name) {
  if (name == "single" || name == "float32" || name == "float") return DType::f32;
  if (name == "double" || name == "float64") return DType::f64;
  fail("unknown data type '" + name + "' (expected single or double)");
}

std::size_t size_of(DType dtype) { return dtype == DType::f64 ? sizeof(double) : sizeof(float); }

std::string to_string(const Shape& shape) {
  std::string s;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += "x";
    s += std::to_string(shape[i]);
  }
  return s.empty() ? "scalar" : s;
}

std::int64_t numel(const Shape& shape) {
  std::int64_t n = 1;
  // A shape from a file or a config must not overflow into a small, wrong size.
  for (auto d : shape)
    if (__builtin_mul_overflow(n, d, &n)) fail("shape " + to_string(shape) + " has more elements than fit in 64 bits");
  return n;
}

Tensor::Tensor(Shape shape, DType dtype) : shape_(std::move(shape)), dtype_(dtype) {
  for (auto d : shape_) DLSCALE_REQUIRE(d >= 0, "negative tensor dimension in shape " + to_string(shape_));
  numel_ = dlscale::numel(shape_);
  storage_ = allocate(bytes());
}

Tensor Tensor::uninitialized(Shape shape, DType dtype, Layout layout) {
  Tensor t;
  for (auto d : shape) DLSCALE_REQUIRE(d >= 0, "negative tensor dimension in shape " + to_string(shape));
  if (layout == Layout::channels16)
    DLSCALE_REQUIRE(shape.size() == 4 && shape[1] % 16 == 0 && dtype == DType::f32,
                    "the channels16 layout needs a float32 N×C×H×W tensor with C a multiple of 16, not " +
                        to_string(shape) + " " + to_string(dtype));
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.layout_ = layout;
  t.numel_ = dlscale::numel(t.shape_);
  t.storage_ = allocate(t.bytes(), false);
  return t;
}

std::int64_t Tensor::dim(int axis) const {
  DLSCALE_REQUIRE(axis >= 0 && axis < rank(), "axis " + std::to_string(axis) + " out of range for shape " +
                                                  to_string(shape_));
  return shape_[axis];
}

void Tensor::check_type(DType wanted) const {
  if (wanted != dtype_) fail("tensor holds " + to_string(dtype_) + " but was read as " + to_string(wanted));
}

void Tensor::check_plain() const {
  DLSCALE_REQUIRE(layout_ == Layout::plain, "a " + to_string(shape_) + " tensor in layout " + to_string(layout_) +
                                                " was read as plain (convert it with plain() first)");
}

std::int64_t Tensor::storage_index(std::int64_t i) const {
  if (layout_ == Layout::plain) return i;
  const std::int64_t C = shape_[1], S = shape_[2] * shape_[3];
  const std::int64_t n = i / (C * S), c = i / S % C, s = i % S;
  return ((n * (C / 16) + c / 16) * S + s) * 16 + c % 16;
}

Tensor Tensor::in_layout(Layout layout) const {
  if (layout == layout_) return *this;
  Tensor t = uninitialized(shape_, dtype_, layout);
  if (numel_ == 0) return t;
  // Between plain and channels16 (the only blocked layout): one pass, the
  // blocked side written or read 16 contiguous channels at a time.
  const bool to_blocked = layout == Layout::channels16;
  const float* from = data_any_layout<float>();
  float* to = t.data_any_layout<float>();
  const std::int64_t N = shape_[0], blocks = shape_[1] / 16, S = shape_[2] * shape_[3];
#pragma omp parallel for collapse(2) if (numel_ > 65536)
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t b = 0; b < blocks; ++b) {
      float* blk = (to_blocked ? to : const_cast<float*>(from)) + (n * blocks + b) * S * 16;
      float* pln = (to_blocked ? const_cast<float*>(from) : to) + (n * blocks + b) * 16 * S;
      for (std::int64_t s = 0; s < S; ++s)
        for (int k = 0; k < 16; ++k) {
          if (to_blocked) blk[s * 16 + k] = pln[k * S + s];
          else pln[k * S + s] = blk[s * 16 + k];
        }
    }
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  check_plain();
  DLSCALE_REQUIRE(dlscale::numel(shape) == numel_,
                  "cannot reshape " + to_string(shape_) + " to " + to_string(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::view(const Tensor& base, std::int64_t offset, Shape shape) {
  base.check_plain();
  const std::int64_t n = dlscale::numel(shape);
  DLSCALE_REQUIRE(offset >= 0 && offset + n <= base.numel_,
                  "view of " + std::to_string(n) + " elements at " + std::to_string(offset) + " outside a tensor of " +
                      std::to_string(base.numel_));
  Tensor t;
  t.shape_ = std::move(shape);
  t.numel_ = n;
  t.dtype_ = base.dtype_;
  // Aliasing constructor: owns base's block, points inside it.
  t.storage_ = std::shared_ptr<std::byte[]>(base.storage_, base.storage_.get() + offset * size_of(base.dtype_));
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = uninitialized(shape_, dtype_, layout_);
  std::memcpy(t.raw(), raw(), bytes());
  return t;
}

Tensor Tensor::to(DType dtype) const {
  check_plain();
  if (dtype == dtype_) return clone();
  Tensor t(shape_, dtype);
  if (dtype == DType::f64) {
    std::copy_n(data<float>(), numel_, t.data<double>());
  } else {
    std::transform(data<double>(), data<double>() + numel_, t.data<float>(),
                   [](double v) { return static_cast<float>(v); });
  }
  return t;
}

void Tensor::zero() {
  if (storage_) std::memset(raw(), 0, bytes());
}

void Tensor::copy_from(const Tensor& other) {
  DLSCALE_REQUIRE(other.shape_ == shape_ && other.dtype_ == dtype_ && other.layout_ == layout_,
                  "copy between tensors of shape " + to_string(other.shape_) + " (" + to_string(other.dtype_) + ") and " +
                      to_string(shape_) + " (" + to_string(dtype_) + ")");
  std::memcpy(raw(), other.raw(), bytes());
}

double Tensor::at(std::int64_t i) const {
  return dispatch(dtype_, [&]<class T>() { return static_cast<double>(data_any_layout<T>()[storage_index(i)]); });
}

void Tensor::set(std::int64_t i, double value) {
  dispatch(dtype_, [&]<class T>() { data_any_layout<T>()[storage_index(i)] = static_cast<T>(value); });
}

}  // namespace dlscale
