// CUDA forward and backward of every layer, as free functions on raw device
// pointers (float32) and shapes, queued on the context's stream. Each
// mirrors the CPU layer in layers/<layer>.cpp: the same layouts (row-major,
// batch-first, NCHW; weights as the CPU layer stores them), the same
// formulas, and backward overwrites parameter gradients. The sources sit
// beside the CPU ones (layers/<layer>.cu); tests/gpu compares the two.
// CUDA builds only; layers/device_network.cu runs a Network through them.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/core/gpu_context.h"

namespace dlscale::gpu {

// --- automatic-mixed precision (layers/mixed_precision.cu) ---
// The math of dense and conv2d: float32, or fp16/bf16 operands with float32
// accumulation on the tensor cores. Their inputs, outputs, weights and
// gradients stay float32 in memory (the master copy); the 2-byte copies are
// made per call, and activations between layers stay float32.
enum class MathPrecision { f32, f16, bf16 };
// "" (float32), "fp16", "bf16" (GpuTrainingOptions::half_type); anything else
// is an error naming mixed-precision-type.
MathPrecision math_precision_from_name(const std::string& name);
const char* name_of(MathPrecision math);
// `count` floats rounded to nearest in math (f16 or bf16), in a buffer from
// the context's allocator; beyond fp16's range a value becomes ±Inf.
DeviceBuffer to_half(GpuContext& ctx, MathPrecision math, const float* x, std::int64_t count);
// y = the `count` 2-byte values at h, widened to float32.
void from_half(GpuContext& ctx, MathPrecision math, const void* h, float* y, std::int64_t count);

// --- dense (layers/dense.cpp): y (N, U) = x (N, F) · Wᵀ + b, W is (U, F) ---
// bias may be null (bias=false). Under f16/bf16 math the products take
// 2-byte copies of x and W and accumulate and write float32.
void dense_forward(GpuContext& ctx, const float* x, const float* weight, const float* bias, float* y,
                   std::int64_t batch, std::int64_t features, std::int64_t units,
                   MathPrecision math = MathPrecision::f32);
// dx (N, F) may be null (first layer); dbias is null without a bias (always
// summed in float32).
void dense_backward(GpuContext& ctx, const float* x, const float* weight, const float* dy, float* dx,
                    float* dweight, float* dbias, std::int64_t batch, std::int64_t features, std::int64_t units,
                    MathPrecision math = MathPrecision::f32);

// --- activations (layers/activations.cpp), elementwise over `count` values ---
enum class Activation { relu, leakyrelu, gelu, tanh, sigmoid };
// "relu", "leakyrelu", "gelu", "tanh", "sigmoid"; anything else is an error.
Activation activation_from_kind(const std::string& kind);
// alpha is leakyrelu's slope (ignored by the others).
void activation_forward(GpuContext& ctx, Activation kind, double alpha, const float* x, float* y,
                        std::int64_t count);
// x and y of the forward; dx = dy * f'(x).
void activation_backward(GpuContext& ctx, Activation kind, double alpha, const float* x, const float* y,
                         const float* dy, float* dx, std::int64_t count);

// --- softmax and the fused cross-entropy (layers/softmax.cpp) ---
struct LossSums {
  double loss_sum = 0;      // cross-entropy summed over the batch
  std::int64_t correct = 0; // rows whose first maximum is the label
};
// logits (N, K), labels N device int32 in [0, K). Writes dlogits =
// (softmax - onehot) / normalizer unless it is null (evaluation); the row
// sums are taken in double and added in row order. Waits for the result;
// a label outside [0, K) is an error naming the first such sample.
LossSums softmax_cross_entropy(GpuContext& ctx, const float* logits, const std::int32_t* labels,
                               std::int64_t batch, std::int64_t classes, double normalizer, float* dlogits);
void softmax_forward(GpuContext& ctx, const float* x, float* y, std::int64_t batch, std::int64_t classes);
// dx = y ⊙ (dy - <dy, y>) per row.
void softmax_backward(GpuContext& ctx, const float* y, const float* dy, float* dx, std::int64_t batch,
                      std::int64_t classes);

// --- dropout (layers/dropout.cpp), training mode only: inference is a copy ---
// Element i is kept (scaled by 1/(1-rate)) unless u(seed, offset + i) < rate,
// u a counter-based uniform in [0, 1): backward with the same seed and offset
// regenerates the mask instead of storing it. Callers advance offset by
// count per step. Masks differ from the CPU layer's (another generator).
void dropout_forward(GpuContext& ctx, double rate, std::uint64_t seed, std::uint64_t offset, const float* x,
                     float* y, std::int64_t count);
void dropout_backward(GpuContext& ctx, double rate, std::uint64_t seed, std::uint64_t offset, const float* dy,
                      float* dx, std::int64_t count);

// --- conv2d (layers/conv2d.cpp), cuDNN ---
struct ConvShape {
  std::int64_t batch = 0, channels = 0, height = 0, width = 0;  // x (N, C, H, W)
  std::int64_t filters = 0, kernel = 0, stride = 1;             // weight (F, C, K, K), bias (F)
  std::int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  // f16/bf16: cuDNN convolves 2-byte copies of x, W and dy with float32
  // accumulation; results are widened to float32, bias terms stay float32.
  MathPrecision math = MathPrecision::f32;
  std::int64_t out_height() const { return (height + pad_top + pad_bottom - kernel) / stride + 1; }
  std::int64_t out_width() const { return (width + pad_left + pad_right - kernel) / stride + 1; }
  // Elements of x (and dx), of W (and dW), of y (and dy).
  std::int64_t input_count() const { return batch * channels * height * width; }
  std::int64_t weight_count() const { return filters * channels * kernel * kernel; }
  std::int64_t output_count() const { return batch * filters * out_height() * out_width(); }
};
// y (N, F, OH, OW); bias may be null. Descriptors and algorithms are chosen
// on the first call for a shape and kept in the context.
void conv2d_forward(GpuContext& ctx, const ConvShape& shape, const float* x, const float* weight, const float* bias,
                    float* y);
// dx may be null (first layer), dbias is null without a bias.
void conv2d_backward(GpuContext& ctx, const ConvShape& shape, const float* x, const float* weight, const float* dy,
                     float* dx, float* dweight, float* dbias);

// --- maxpool / avgpool (layers/pool2d.cpp) ---
enum class PoolMode { max, average };
struct PoolShape {
  std::int64_t batch = 0, channels = 0, height = 0, width = 0, size = 1, stride = 1, padding = 0;
  std::int64_t out_height() const { return (height + 2 * padding - size) / stride + 1; }
  std::int64_t out_width() const { return (width + 2 * padding - size) / stride + 1; }
};
// y (N, C, OH, OW). maxpool writes argmax (N, C, OH, OW): h·W + w of the
// first maximum of each window (null for avgpool); avgpool divides by K·K.
void pool2d_forward(GpuContext& ctx, PoolMode mode, const PoolShape& shape, const float* x, float* y,
                    std::int32_t* argmax);
// dx (N, C, H, W) is overwritten.
void pool2d_backward(GpuContext& ctx, PoolMode mode, const PoolShape& shape, const float* dy,
                     const std::int32_t* argmax, float* dx);

// --- globalavgpool (layers/global_avgpool.cpp): x (planes, area) → y (planes) ---
// planes = N·C, area = H·W. y is each plane's sum (float32, row-major order,
// as the CPU adds) times 1/area; backward writes dx = dy/area over each plane.
void global_avgpool_forward(GpuContext& ctx, std::int64_t planes, std::int64_t area, const float* x, float* y);
void global_avgpool_backward(GpuContext& ctx, std::int64_t planes, std::int64_t area, const float* dy, float* dx);

// --- batchnorm (layers/batchnorm.cpp), per channel over N and S = H·W (S = 1 for N×F input) ---
struct BatchNormShape {
  std::int64_t batch = 0, channels = 0, spatial = 1;
};
// Batch statistics; folds them into running_mean/var (unbiased variance,
// weight `momentum`) and saves mean and 1/sqrt(var + epsilon) (C each) for backward.
void batchnorm_forward_training(GpuContext& ctx, const BatchNormShape& shape, double momentum, double epsilon,
                                const float* x, const float* scale, const float* offset, float* y,
                                float* running_mean, float* running_var, float* save_mean, float* save_inv_std);
void batchnorm_forward_inference(GpuContext& ctx, const BatchNormShape& shape, double epsilon, const float* x,
                                 const float* scale, const float* offset, const float* running_mean,
                                 const float* running_var, float* y);
void batchnorm_backward_training(GpuContext& ctx, const BatchNormShape& shape, double epsilon, const float* x,
                                 const float* dy, const float* scale, const float* save_mean,
                                 const float* save_inv_std, float* dx, float* dscale, float* doffset);
// After an inference forward the statistics are constants: dx = scale * inv_std * dy.
void batchnorm_backward_inference(GpuContext& ctx, const BatchNormShape& shape, double epsilon, const float* x,
                                  const float* dy, const float* scale, const float* running_mean,
                                  const float* running_var, float* dx, float* dscale, float* doffset);

// --- sequence layers: samples of T positions × C features, rows = N·T ---
// embedding (layers/embedding.cpp): ids (rows) token ids as floats, rounded;
// y (rows, dim) = W[id]. An id outside [0, vocab) is an error naming the
// row (this waits for the kernel). Backward overwrites dW (vocab, dim),
// adding the rows in row order per column, as the CPU does.
void embedding_forward(GpuContext& ctx, const float* ids, const float* weight, float* y, std::int64_t rows,
                       std::int64_t vocab, std::int64_t dim);
void embedding_backward(GpuContext& ctx, const float* ids, const float* dy, float* dweight, std::int64_t rows,
                        std::int64_t vocab, std::int64_t dim);
// posembedding (layers/positional_embedding.cpp): y = x + P per sample,
// plane = T·C; dP sums dy over the batch in sample order (dx is dy).
void posembedding_forward(GpuContext& ctx, const float* x, const float* p, float* y, std::int64_t batch,
                          std::int64_t plane);
void posembedding_backward(GpuContext& ctx, const float* dy, float* dp, std::int64_t batch, std::int64_t plane);
// layernorm (layers/layernorm.cpp) over the last axis of width C: statistics
// in double per row; saves x̂ (rows, C) and 1/sqrt(var + epsilon) (rows).
void layernorm_forward(GpuContext& ctx, const float* x, const float* scale, const float* offset, float* y,
                       float* xhat, double* rstd, std::int64_t rows, std::int64_t width, double epsilon);
void layernorm_backward(GpuContext& ctx, const float* dy, const float* xhat, const double* rstd, const float* scale,
                        float* dx, float* dscale, float* doffset, std::int64_t rows, std::int64_t width);
// attention (layers/attention.cpp): x, y (N, T, C); weights as the CPU layer
// stores them. The forward saves, for the backward, q, k, v (N, H, T, d
// each), p (N, H, T, T) and o (N·T, C); the products are cuBLAS strided
// batched GEMMs over the N·H heads, the softmax runs in float32 per row.
struct AttentionShape {
  std::int64_t batch = 0, tokens = 0, width = 0, heads = 1;
  bool causal = false;
  std::int64_t head_size() const { return width / heads; }
  std::int64_t rows() const { return batch * tokens; }
};
struct AttentionParams {
  const float *qkv_weight, *qkv_bias, *out_weight, *out_bias;
};
struct AttentionSaved {
  float *q, *k, *v, *p, *o;
};
void attention_forward(GpuContext& ctx, const AttentionShape& shape, const float* x, const AttentionParams& params,
                       float* y, const AttentionSaved& saved);
// dx may be null (first layer); every parameter gradient is overwritten.
void attention_backward(GpuContext& ctx, const AttentionShape& shape, const float* x, const float* dy,
                        const AttentionParams& params, const AttentionSaved& saved, float* dx, float* dqkv_weight,
                        float* dqkv_bias, float* dout_weight, float* dout_bias);

}  // namespace dlscale::gpu
