// Tensor: a dense, row-major, host-memory array of float32 or float64.
// Storage is shared on copy (like a handle); clone() makes a deep copy.
// Layers take the element type from their input, so a network whose
// parameters and input are float64 computes in float64 end to end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/error.h"

namespace dlscale {

enum class DType { f32, f64 };

std::string to_string(DType dtype);
DType parse_dtype(const std::string& name);  // "single"/"float32" or "double"/"float64"
std::size_t size_of(DType dtype);

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::f32; }
template <>
constexpr DType dtype_of<double>() { return DType::f64; }

using Shape = std::vector<std::int64_t>;
std::string to_string(const Shape& shape);  // "64x1x28x28"
std::int64_t numel(const Shape& shape);

// How the elements of a tensor lie in memory.
//  - plain: row-major over the shape (N×C×H×W for images).
//  - channels16: oneDNN's nChw16c, for a 4-D (N, C, H, W) float32 tensor
//    with C a multiple of 16: 16 channels innermost, element (n, c, h, w) at
//    ((n·C/16 + c/16)·H·W + h·W + w)·16 + c%16. Convolutions keep their
//    activations in it from one layer to the next (batch norm, ReLU and the
//    residual adds work on it too), so oneDNN's kernels run without a
//    reorder on either side; Network converts at any layer that reads only
//    plain tensors.
enum class Layout { plain, channels16 };
std::string to_string(Layout layout);

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled.
  explicit Tensor(Shape shape, DType dtype = DType::f32);
  // Contents undefined: for outputs a kernel overwrites completely (zeroing
  // the activations of a CNN step cost several percent of it).
  static Tensor uninitialized(Shape shape, DType dtype = DType::f32, Layout layout = Layout::plain);

  const Shape& shape() const { return shape_; }
  std::int64_t dim(int axis) const;
  int rank() const { return static_cast<int>(shape_.size()); }
  std::int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  std::size_t bytes() const { return static_cast<std::size_t>(numel_) * size_of(dtype_); }
  bool empty() const { return numel_ == 0; }
  Layout layout() const { return layout_; }
  bool blocked() const { return layout_ != Layout::plain; }

  // The elements in plain layout; a blocked tensor fails here, so code that
  // indexes by shape can never read a blocked one by mistake.
  template <class T>
  T* data() {
    check_plain();
    return data_any_layout<T>();
  }
  template <class T>
  const T* data() const {
    check_plain();
    return data_any_layout<T>();
  }
  // The storage in whatever layout it has: for kernels that do not index by
  // shape (elementwise loops) or that handle the layout themselves.
  template <class T>
  T* data_any_layout() {
    check_type(dtype_of<T>());
    return static_cast<T*>(raw());
  }
  template <class T>
  const T* data_any_layout() const {
    check_type(dtype_of<T>());
    return static_cast<const T*>(raw());
  }
  // The same elements in `layout` (this tensor itself when it has it already).
  Tensor in_layout(Layout layout) const;
  Tensor plain() const { return in_layout(Layout::plain); }
  void* raw() { return storage_.get(); }
  const void* raw() const { return storage_.get(); }

  // Same storage, new shape with the same number of elements.
  Tensor reshaped(Shape shape) const;
  // Elements [offset, offset + numel(shape)) of base's storage, sharing its
  // ownership: gradient buckets hand parameters views of one flat buffer so
  // the all-reduce needs no copies.
  static Tensor view(const Tensor& base, std::int64_t offset, Shape shape);
  Tensor clone() const;
  // Deep copy converted to another element type.
  Tensor to(DType dtype) const;
  void zero();
  void copy_from(const Tensor& other);  // same shape and dtype required

  // Element access for tests and small code paths (converts through double);
  // flat_index counts in plain (row-major) order whatever the layout.
  double at(std::int64_t flat_index) const;
  void set(std::int64_t flat_index, double value);

 private:
  void check_type(DType wanted) const;
  void check_plain() const;
  std::int64_t storage_index(std::int64_t flat_index) const;

  Shape shape_;
  std::int64_t numel_ = 0;
  DType dtype_ = DType::f32;
  Layout layout_ = Layout::plain;
  std::shared_ptr<std::byte[]> storage_;
};

// Calls fn.template operator()<T>() with T = float or double for `dtype`:
//   dispatch(x.dtype(), [&]<class T>() { kernel<T>(x.data<T>(), ...); });
template <class Fn>
decltype(auto) dispatch(DType dtype, Fn&& fn) {
  if (dtype == DType::f64) return fn.template operator()<double>();
  return fn.template operator()<float>();
}

}  // namespace dlscale
