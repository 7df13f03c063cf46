// CUDA conv2d (layers/conv2d.cpp) through cuDNN's convolution API: NCHW
// float tensors, weight (F, C, K, K), cross-correlation. The descriptors and
// the three algorithms (forward, backward data, backward filter) are chosen
// once per shape with cuDNN's heuristics (cudnnGet*_v7) and kept in the
// context, like a oneDNN primitive. GpuOptions decide which candidates
// qualify: deterministic ones only if asked for (the backward algorithms
// with atomics are not), no TF32 tensor-core math unless allowed, and a
// workspace within max_workspace_bytes.
//
// Under f16/bf16 math (automatic-mixed) x, W, y and their gradients are
// 2-byte tensors for cuDNN (float32 compute type: cuDNN's pseudo-half
// configuration, tensor-core algorithms allowed), converted from and to the
// float32 the network keeps (layers/mixed_precision.cu); the bias add and
// the bias gradient run on the float32 output.
//
// cuDNN pads symmetrically; padding=same with an odd total puts the extra
// row/column at the bottom/right, so then the input is copied into a buffer
// extended by that row/column of zeros and cuDNN pads the rest.
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "layers/algorithm_choice.h"
#include "layers/cuda_layers.h"
#include "layers/mixed_precision.cuh"
#include "runtime/core/gpu_context.cuh"

namespace dlscale::gpu {

namespace {

int as_int(std::int64_t v, const char* what) {
  DLSCALE_REQUIRE(v >= 0 && v <= 0x7fffffff, std::string("conv2d (GPU): ") + what + " = " + std::to_string(v) +
                                                 " exceeds cuDNN's 32-bit dimensions");
  return static_cast<int>(v);
}

struct ConvPlan {
  // x, w and y in the math's type (the convolution calls); y32 and bias in
  // float32 (the bias add and gradient on the float32 output).
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, y32 = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  cudnnMathType_t fwd_math{}, data_math{}, filter_math{};
  std::size_t fwd_bytes = 0, data_bytes = 0, filter_bytes = 0;
  std::int64_t extra_h = 0, extra_w = 0;  // zero rows/columns appended to the input (asymmetric padding)

  ~ConvPlan() {
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (bias) cudnnDestroyTensorDescriptor(bias);
    if (y32) cudnnDestroyTensorDescriptor(y32);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (x) cudnnDestroyTensorDescriptor(x);
  }
  bool extended() const { return extra_h > 0 || extra_w > 0; }
};

std::string describe(const ConvShape& s) {
  std::ostringstream t;
  t << s.batch << "x" << s.channels << "x" << s.height << "x" << s.width << " input, " << s.filters << " filters "
    << s.kernel << "x" << s.kernel << ", stride " << s.stride << ", padding " << s.pad_top << "/" << s.pad_left
    << "/" << s.pad_bottom << "/" << s.pad_right;
  if (s.math != MathPrecision::f32) t << ", " << name_of(s.math) << " math";
  return t.str();
}

// FMA math only: float32 math without TF32 allowed. 2-byte math is meant for
// the tensor cores and takes any math type.
bool fma_only(const GpuOptions& o, MathPrecision math) { return math == MathPrecision::f32 && !o.allow_tf32; }

// The candidates that qualify, in cuDNN's ranking order (fastest first), each
// with its workspace; `bytes` asks cuDNN for a candidate's workspace (false:
// not supported). A qualifying candidate may still fail when it runs (a
// deterministic fp16/bf16 backward for 1-4 channels in NCHW, say), so the
// plan tries them in order (first_that_runs).
template <class Perf, class Bytes>
std::vector<std::pair<const Perf*, std::size_t>> qualifying(const Perf* perf, int count, const GpuOptions& o,
                                                             MathPrecision math, Bytes&& bytes) {
  std::vector<std::pair<const Perf*, std::size_t>> out;
  for (int i = 0; i < count; ++i) {
    const Perf& p = perf[i];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    if (o.deterministic && p.determinism != CUDNN_DETERMINISTIC) continue;
    if (fma_only(o, math) && p.mathType != CUDNN_FMA_MATH && p.mathType != CUDNN_DEFAULT_MATH) continue;
    std::size_t need = 0;
    if (!bytes(p, need) || need > o.max_workspace_bytes) continue;
    out.emplace_back(&p, need);
  }
  return out;
}

const char* math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH: return "default math";
    case CUDNN_TENSOR_OP_MATH: return "tensor-op math";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor-op math with conversion";
    case CUDNN_FMA_MATH: return "FMA math";
    default: return "math type ?";
  }
}

// How a candidate is named in the plan's log line.
template <class Perf>
std::string algorithm_name(const Perf& p) {
  return "algorithm " + std::to_string(static_cast<int>(p.algo)) + " (" + math_name(p.mathType) + ")";
}

// first_that_runs (layers/algorithm_choice.h) wants "" or why a call failed.
std::string error_of(cudnnStatus_t status) { return status == CUDNN_STATUS_SUCCESS ? "" : cudnnGetErrorString(status); }

// Without TF32, FMA math: cuDNN's default math lets sm_80+ use TF32.
cudnnMathType_t math_for(const GpuOptions& o, MathPrecision math, cudnnMathType_t candidate) {
  return fma_only(o, math) ? CUDNN_FMA_MATH : candidate;
}

std::shared_ptr<ConvPlan> make_plan(GpuContext& ctx, const ConvShape& s) {
  const GpuOptions& o = ctx.options();
  cudnnHandle_t h = ctx.impl().cudnn;
  auto plan = std::make_shared<ConvPlan>();
  ConvPlan& p = *plan;
  if (s.pad_bottom < s.pad_top || s.pad_right < s.pad_left)
    fail("conv2d (GPU): padding with more at the top/left than at the bottom/right is not supported (" +
         describe(s) + ")");
  p.extra_h = s.pad_bottom - s.pad_top;
  p.extra_w = s.pad_right - s.pad_left;
  const int n = as_int(s.batch, "batch"), c = as_int(s.channels, "channels");
  const int hh = as_int(s.height + p.extra_h, "height"), ww = as_int(s.width + p.extra_w, "width");
  const int f = as_int(s.filters, "filters"), k = as_int(s.kernel, "kernel");
  DLSCALE_CHECK_CUDNN(cudnnCreateTensorDescriptor(&p.x));
  DLSCALE_CHECK_CUDNN(cudnnCreateTensorDescriptor(&p.y));
  DLSCALE_CHECK_CUDNN(cudnnCreateTensorDescriptor(&p.y32));
  DLSCALE_CHECK_CUDNN(cudnnCreateTensorDescriptor(&p.bias));
  DLSCALE_CHECK_CUDNN(cudnnCreateFilterDescriptor(&p.w));
  DLSCALE_CHECK_CUDNN(cudnnCreateConvolutionDescriptor(&p.conv));
  const cudnnDataType_t type = cudnn_type(s.math);
  DLSCALE_CHECK_CUDNN(cudnnSetTensor4dDescriptor(p.x, CUDNN_TENSOR_NCHW, type, n, c, hh, ww));
  DLSCALE_CHECK_CUDNN(cudnnSetFilter4dDescriptor(p.w, type, CUDNN_TENSOR_NCHW, f, c, k, k));
  DLSCALE_CHECK_CUDNN(cudnnSetConvolution2dDescriptor(p.conv, as_int(s.pad_top, "padding"),
                                                      as_int(s.pad_left, "padding"), as_int(s.stride, "stride"),
                                                      as_int(s.stride, "stride"), 1, 1, CUDNN_CROSS_CORRELATION,
                                                      CUDNN_DATA_FLOAT));
  // The heuristics rank candidates of this math type and those it allows.
  const cudnnMathType_t allowed = fma_only(o, s.math)        ? CUDNN_FMA_MATH
                                  : s.math == MathPrecision::f32 ? CUDNN_DEFAULT_MATH
                                                                 : CUDNN_TENSOR_OP_MATH;
  DLSCALE_CHECK_CUDNN(cudnnSetConvolutionMathType(p.conv, allowed));
  int on = 0, of = 0, oh = 0, ow = 0;
  DLSCALE_CHECK_CUDNN(cudnnGetConvolution2dForwardOutputDim(p.conv, p.x, p.w, &on, &of, &oh, &ow));
  if (oh != s.out_height() || ow != s.out_width())
    fail("conv2d (GPU): cuDNN computes a " + std::to_string(oh) + "x" + std::to_string(ow) +
         " output where the layer expects " + std::to_string(s.out_height()) + "x" + std::to_string(s.out_width()) +
         " (" + describe(s) + ")");
  DLSCALE_CHECK_CUDNN(cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NCHW, type, n, f, oh, ow));
  DLSCALE_CHECK_CUDNN(cudnnSetTensor4dDescriptor(p.y32, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, f, oh, ow));
  DLSCALE_CHECK_CUDNN(cudnnSetTensor4dDescriptor(p.bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, f, 1, 1));

  const std::string none = std::string("cuDNN offers no ") + (o.deterministic ? "deterministic " : "") +
                           (fma_only(o, s.math) ? "FP32 " : "") + "algorithm within a workspace of " +
                           format_bytes(o.max_workspace_bytes) + " for the conv2d ";
  // A candidate's workspace, asked under the math type it will run with (it
  // may need more than under the type the heuristics were asked with), and at
  // least what the heuristics reported; then the ranking's math type again.
  auto workspace = [&](cudnnMathType_t candidate_math, std::size_t reported, std::size_t& b, auto&& query) {
    DLSCALE_CHECK_CUDNN(cudnnSetConvolutionMathType(p.conv, math_for(o, s.math, candidate_math)));
    const bool ok = query() == CUDNN_STATUS_SUCCESS;
    DLSCALE_CHECK_CUDNN(cudnnSetConvolutionMathType(p.conv, allowed));
    b = std::max(b, reported);
    return ok;
  };
  // Zeroed scratch tensors in the math's type, for one trial call per candidate.
  const std::size_t elem = element_bytes(s.math);
  DeviceBuffer xs = ctx.alloc(elem * static_cast<std::size_t>(n) * c * hh * ww);
  DeviceBuffer wscratch = ctx.alloc(elem * static_cast<std::size_t>(f) * c * k * k);
  DeviceBuffer ys = ctx.alloc(elem * static_cast<std::size_t>(n) * f * oh * ow);
  for (DeviceBuffer* b : {&xs, &wscratch, &ys}) DLSCALE_CHECK_CUDA(cudaMemsetAsync(b->get(), 0, b->bytes(), stream(ctx)));
  const float one = 1.f, zero = 0.f;
  std::string fwd_said, data_said, filter_said;
  {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int count = 0;
    DLSCALE_CHECK_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, p.w, p.conv, p.y,
                                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf));
    auto bytes = [&](const cudnnConvolutionFwdAlgoPerf_t& c, std::size_t& b) {
      return workspace(c.mathType, c.memory, b,
                       [&] { return cudnnGetConvolutionForwardWorkspaceSize(h, p.x, p.w, p.conv, p.y, c.algo, &b); });
    };
    auto run = [&](const cudnnConvolutionFwdAlgoPerf_t& c, std::size_t b) {
      DLSCALE_CHECK_CUDNN(cudnnSetConvolutionMathType(p.conv, math_for(o, s.math, c.mathType)));
      return error_of(cudnnConvolutionForward(h, &one, p.x, xs.get(), p.w, wscratch.get(), p.conv, c.algo,
                                              ctx.impl().workspace_of(b), b, &zero, p.y, ys.get()));
    };
    const auto choice = first_that_runs(qualifying(perf, count, o, s.math, bytes), run,
                                        [](const auto& c) { return algorithm_name(c); });
    fwd_said = choice.said;
    if (!choice.chosen) fail(none + "forward (" + describe(s) + "): " + fwd_said);
    const auto* best = choice.chosen;
    p.fwd_bytes = choice.workspace_bytes;
    p.fwd = best->algo;
    p.fwd_math = math_for(o, s.math, best->mathType);
  }
  {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int count = 0;
    DLSCALE_CHECK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        h, p.w, p.y, p.conv, p.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf));
    auto bytes = [&](const cudnnConvolutionBwdDataAlgoPerf_t& c, std::size_t& b) {
      return workspace(c.mathType, c.memory, b, [&] {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w, p.y, p.conv, p.x, c.algo, &b);
      });
    };
    auto run = [&](const cudnnConvolutionBwdDataAlgoPerf_t& c, std::size_t b) {
      DLSCALE_CHECK_CUDNN(cudnnSetConvolutionMathType(p.conv, math_for(o, s.math, c.mathType)));
      return error_of(cudnnConvolutionBackwardData(h, &one, p.w, wscratch.get(), p.y, ys.get(), p.conv, c.algo,
                                          ctx.impl().workspace_of(b), b, &zero, p.x, xs.get()));
    };
    const auto choice = first_that_runs(qualifying(perf, count, o, s.math, bytes), run,
                                        [](const auto& c) { return algorithm_name(c); });
    data_said = choice.said;
    if (!choice.chosen) fail(none + "input gradient (" + describe(s) + "): " + data_said);
    const auto* best = choice.chosen;
    p.data_bytes = choice.workspace_bytes;
    p.bwd_data = best->algo;
    p.data_math = math_for(o, s.math, best->mathType);
  }
  {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int count = 0;
    DLSCALE_CHECK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        h, p.x, p.y, p.conv, p.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf));
    auto bytes = [&](const cudnnConvolutionBwdFilterAlgoPerf_t& c, std::size_t& b) {
      return workspace(c.mathType, c.memory, b, [&] {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p.x, p.y, p.conv, p.w, c.algo, &b);
      });
    };
    auto run = [&](const cudnnConvolutionBwdFilterAlgoPerf_t& c, std::size_t b) {
      DLSCALE_CHECK_CUDNN(cudnnSetConvolutionMathType(p.conv, math_for(o, s.math, c.mathType)));
      return error_of(cudnnConvolutionBackwardFilter(h, &one, p.x, xs.get(), p.y, ys.get(), p.conv, c.algo,
                                            ctx.impl().workspace_of(b), b, &zero, p.w, wscratch.get()));
    };
    const auto choice = first_that_runs(qualifying(perf, count, o, s.math, bytes), run,
                                        [](const auto& c) { return algorithm_name(c); });
    filter_said = choice.said;
    if (!choice.chosen) fail(none + "weight gradient (" + describe(s) + "): " + filter_said);
    const auto* best = choice.chosen;
    p.filter_bytes = choice.workspace_bytes;
    p.bwd_filter = best->algo;
    p.filter_math = math_for(o, s.math, best->mathType);
  }
  DLSCALE_CHECK_CUDNN(cudnnSetConvolutionMathType(p.conv, allowed));
  // Once per plan: what cuDNN will run for this shape (the GPU check's logs read it).
  std::fprintf(stderr, "dlscale: conv2d (GPU) %s: forward %s; input gradient %s; weight gradient %s\n",
               describe(s).c_str(), fwd_said.c_str(), data_said.c_str(), filter_said.c_str());
  return plan;
}

ConvPlan& plan_for(GpuContext& ctx, const ConvShape& s) {
  if (s.batch < 1 || s.channels < 1 || s.filters < 1 || s.kernel < 1 || s.stride < 1 || s.out_height() < 1 ||
      s.out_width() < 1)
    fail("conv2d (GPU): impossible shape: " + describe(s));
  const std::string key = "conv2d " + describe(s);
  return ctx.impl().plan<ConvPlan>(key, [&] { return make_plan(ctx, s); });
}

// ext (N, C, H + eh, W + ew) = x padded with zeros at the bottom/right. T is
// float, or std::uint16_t for the bits of fp16/bf16 (whose zero is all zero
// bits too).
template <class T>
__global__ void extend(const T* __restrict__ x, T* __restrict__ ext, std::int64_t planes, std::int64_t h,
                       std::int64_t w, std::int64_t eh, std::int64_t ew) {
  const std::int64_t H = h + eh, W = w + ew, total = planes * H * W;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t plane = i / (H * W), r = (i / W) % H, c = i % W;
    ext[i] = r < h && c < w ? x[(plane * h + r) * w + c] : T(0);
  }
}

// dx (N, C, H, W) = the top-left part of dext (N, C, H + eh, W + ew).
template <class T>
__global__ void crop(const T* __restrict__ dext, T* __restrict__ dx, std::int64_t planes, std::int64_t h,
                     std::int64_t w, std::int64_t eh, std::int64_t ew) {
  const std::int64_t total = planes * h * w, W = w + ew, H = h + eh;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t plane = i / (h * w), r = (i / w) % h, c = i % w;
    dx[i] = dext[(plane * H + r) * W + c];
  }
}

std::int64_t extended_count(const ConvShape& s, const ConvPlan& p) {
  return s.batch * s.channels * (s.height + p.extra_h) * (s.width + p.extra_w);
}

template <class T>
void launch_extend(GpuContext& ctx, const ConvShape& s, const ConvPlan& p, const void* x, void* ext) {
  extend<<<blocks_for(extended_count(s, p)), kBlock, 0, stream(ctx)>>>(
      static_cast<const T*>(x), static_cast<T*>(ext), s.batch * s.channels, s.height, s.width, p.extra_h, p.extra_w);
  DLSCALE_CHECK_LAUNCH();
}

template <class T>
void launch_crop(GpuContext& ctx, const ConvShape& s, const ConvPlan& p, const void* dext, void* dx) {
  crop<<<blocks_for(s.input_count()), kBlock, 0, stream(ctx)>>>(static_cast<const T*>(dext), static_cast<T*>(dx),
                                                      s.batch * s.channels, s.height, s.width, p.extra_h, p.extra_w);
  DLSCALE_CHECK_LAUNCH();
}

// x as cuDNN sees it: in the math's type, and extended by the extra zero
// rows/columns when the padding is asymmetric.
MathOperand input_for(GpuContext& ctx, const ConvShape& s, const ConvPlan& p, const float* x) {
  MathOperand in(ctx, s.math, x, s.input_count());
  if (!p.extended()) return in;
  DeviceBuffer ext = ctx.alloc(element_bytes(s.math) * extended_count(s, p));
  if (s.math == MathPrecision::f32)
    launch_extend<float>(ctx, s, p, in.get(), ext.get());
  else
    launch_extend<std::uint16_t>(ctx, s, p, in.get(), ext.get());
  return MathOperand(std::move(ext));
}

}  // namespace

void conv2d_forward(GpuContext& ctx, const ConvShape& s, const float* x, const float* weight, const float* bias,
                    float* y) {
  ConvPlan& p = plan_for(ctx, s);
  auto& st = ctx.impl();
  const MathOperand xin = input_for(ctx, s, p, x);
  const MathOperand w(ctx, s.math, weight, s.weight_count());
  const MathOutput yout(ctx, s.math, y, s.output_count());
  const float one = 1.f, zero = 0.f;
  void* ws = st.workspace_of(p.fwd_bytes);
  DLSCALE_CHECK_CUDNN(cudnnSetConvolutionMathType(p.conv, p.fwd_math));
  DLSCALE_CHECK_CUDNN(cudnnConvolutionForward(st.cudnn, &one, p.x, xin.get(), p.w, w.get(), p.conv, p.fwd, ws,
                                              p.fwd_bytes, &zero, p.y, yout.get()));
  yout.widen(ctx);
  if (bias != nullptr) DLSCALE_CHECK_CUDNN(cudnnAddTensor(st.cudnn, &one, p.bias, bias, &one, p.y32, y));
}

void conv2d_backward(GpuContext& ctx, const ConvShape& s, const float* x, const float* weight, const float* dy,
                     float* dx, float* dweight, float* dbias) {
  ConvPlan& p = plan_for(ctx, s);
  auto& st = ctx.impl();
  const float one = 1.f, zero = 0.f;
  if (dbias != nullptr)
    DLSCALE_CHECK_CUDNN(cudnnConvolutionBackwardBias(st.cudnn, &one, p.y32, dy, &zero, p.bias, dbias));
  const MathOperand dyin(ctx, s.math, dy, s.output_count());
  {
    const MathOperand xin = input_for(ctx, s, p, x);
    const MathOutput dwout(ctx, s.math, dweight, s.weight_count());
    void* ws = st.workspace_of(p.filter_bytes);
    DLSCALE_CHECK_CUDNN(cudnnSetConvolutionMathType(p.conv, p.filter_math));
    DLSCALE_CHECK_CUDNN(cudnnConvolutionBackwardFilter(st.cudnn, &one, p.x, xin.get(), p.y, dyin.get(), p.conv,
                                                       p.bwd_filter, ws, p.filter_bytes, &zero, p.w, dwout.get()));
    dwout.widen(ctx);
  }
  if (dx == nullptr) return;
  const MathOperand w(ctx, s.math, weight, s.weight_count());
  // cuDNN writes dx extended (asymmetric padding) and/or 2 bytes wide;
  // cropped, then widened, into dx.
  const MathOutput dxout(ctx, s.math, dx, s.input_count());
  DeviceBuffer dext;
  if (p.extended()) dext = ctx.alloc(element_bytes(s.math) * extended_count(s, p));
  void* dxin = p.extended() ? dext.get() : dxout.get();
  void* ws = st.workspace_of(p.data_bytes);
  DLSCALE_CHECK_CUDNN(cudnnSetConvolutionMathType(p.conv, p.data_math));
  DLSCALE_CHECK_CUDNN(cudnnConvolutionBackwardData(st.cudnn, &one, p.w, w.get(), p.y, dyin.get(), p.conv, p.bwd_data,
                                                   ws, p.data_bytes, &zero, p.x, dxin));
  if (p.extended()) {
    if (s.math == MathPrecision::f32)
      launch_crop<float>(ctx, s, p, dxin, dxout.get());
    else
      launch_crop<std::uint16_t>(ctx, s, p, dxin, dxout.get());
  }
  dxout.widen(ctx);
}

}  // namespace dlscale::gpu
