// The 2-byte types of TrainingPrecision automatic-mixed as cuBLAS and cuDNN
// name them, for the layers that compute in them (layers/dense.cu,
// layers/conv2d.cu). CUDA sources only.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include <utility>

#include "layers/cuda_layers.h"

namespace dlscale::gpu {

inline cudaDataType_t cublas_type(MathPrecision math) {
  switch (math) {
    case MathPrecision::f16: return CUDA_R_16F;
    case MathPrecision::bf16: return CUDA_R_16BF;
    case MathPrecision::f32: break;
  }
  return CUDA_R_32F;
}

inline cudnnDataType_t cudnn_type(MathPrecision math) {
  switch (math) {
    case MathPrecision::f16: return CUDNN_DATA_HALF;
    case MathPrecision::bf16: return CUDNN_DATA_BFLOAT16;
    case MathPrecision::f32: break;
  }
  return CUDNN_DATA_FLOAT;
}

// Bytes of one element in `math`.
inline std::size_t element_bytes(MathPrecision math) { return math == MathPrecision::f32 ? 4 : 2; }

// An operand of a GEMM or convolution as the math takes it: float32 data in
// place, or its 2-byte copy, made once even when two products read it.
class MathOperand {
 public:
  MathOperand(GpuContext& ctx, MathPrecision math, const float* data, std::int64_t count) : data_(data) {
    if (math != MathPrecision::f32) copy_ = to_half(ctx, math, data, count), data_ = copy_.get();
  }
  // Data already in the math's type, owned from now on.
  explicit MathOperand(DeviceBuffer owned) : data_(owned.get()), copy_(std::move(owned)) {}
  const void* get() const { return data_; }

 private:
  const void* data_;
  DeviceBuffer copy_;  // moving it keeps the address data_ points to
};

// A result as the math writes it: straight into its float32 destination,
// or into a 2-byte buffer that widen() then converts into the destination.
class MathOutput {
 public:
  MathOutput(GpuContext& ctx, MathPrecision math, float* destination, std::int64_t count)
      : math_(math), destination_(destination), count_(count) {
    if (math != MathPrecision::f32) narrow_ = ctx.alloc(2 * static_cast<std::size_t>(count));
  }
  void* get() const { return narrow_.empty() ? static_cast<void*>(destination_) : narrow_.get(); }
  void widen(GpuContext& ctx) const {
    if (!narrow_.empty()) from_half(ctx, math_, narrow_.get(), destination_, count_);
  }

 private:
  MathPrecision math_;
  float* destination_;
  std::int64_t count_;
  DeviceBuffer narrow_;
};

}  // namespace dlscale::gpu
