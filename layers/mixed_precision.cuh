// The 2-byte types of TrainingPrecision automatic-mixed as cuBLAS and cuDNN
// name them, for the layers that compute in them (layers/dense.cu,
// layers/conv2d.cu). CUDA sources only.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

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

}  // namespace dlscale::gpu
