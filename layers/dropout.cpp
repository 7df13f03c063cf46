// Inverted dropout, CPU. The mask is drawn serially from the layer's own
// Rng so a seed gives the same masks for any thread count; applying it is a
// parallel loop.
#include "layers/dropout.h"

#include <utility>

namespace dlscale {

namespace {
constexpr std::int64_t kParallelMin = 1 << 15;

template <class T>
void multiply(const Tensor& a, const Tensor& b, Tensor& out) {
  const T* ap = a.data<T>();
  const T* bp = b.data<T>();
  T* op = out.data<T>();
  const std::int64_t n = a.numel();
#pragma omp parallel for if (n >= kParallelMin)
  for (std::int64_t i = 0; i < n; ++i) op[i] = ap[i] * bp[i];
}
}  // namespace

Dropout::Dropout(std::string who, const Shape& input_shape, DType dtype, double rate, std::uint64_t seed)
    : who_(std::move(who)), dtype_(dtype), rate_(rate), rng_(seed) {
  output_shape_ = input_shape;
}

Tensor Dropout::forward(const Tensor& x, bool training) {
  Shape sample(x.shape().begin() + (x.rank() > 0 ? 1 : 0), x.shape().end());
  if (x.rank() == 0 || sample != output_shape_ || x.dtype() != dtype_)
    fail(who_ + ": input is " + to_string(x.shape()) + " " + to_string(x.dtype()) + " but the layer expects N x " +
         to_string(output_shape_) + " " + to_string(dtype_));
  last_shape_ = x.shape();
  masked_ = training && rate_ > 0;
  // A copy, not x itself: callers may write into a layer's output.
  if (!masked_) return x.clone();

  if (!(frozen_ && mask_.shape() == x.shape())) {
    mask_ = Tensor(x.shape(), dtype_);
    dispatch(dtype_, [&]<class T>() {
      T* m = mask_.data<T>();
      const T keep_scale = static_cast<T>(1.0 / (1.0 - rate_));
      for (std::int64_t i = 0; i < mask_.numel(); ++i) m[i] = rng_.uniform() < rate_ ? T(0) : keep_scale;
    });
  }
  Tensor y(x.shape(), dtype_);
  dispatch(dtype_, [&]<class T>() { multiply<T>(x, mask_, y); });
  return y;
}

Tensor Dropout::backward(const Tensor& dy) {
  if (last_shape_.empty() || dy.shape() != last_shape_ || dy.dtype() != dtype_)
    fail(who_ + ": gradient is " + to_string(dy.shape()) + " " + to_string(dy.dtype()) + " but the last output was " +
         to_string(last_shape_) + " " + to_string(dtype_));
  if (!masked_) return dy.clone();
  Tensor dx(dy.shape(), dtype_);
  dispatch(dtype_, [&]<class T>() { multiply<T>(dy, mask_, dx); });
  return dx;
}

std::unique_ptr<Layer> make_dropout(const LayerSpec& spec, const LayerContext& ctx) {
  const double rate = spec.get_double("rate", 0.5);
  if (!(rate >= 0 && rate < 1)) spec.fail_here("rate must be in [0, 1), got " + spec.get_string("rate", ""));
  // Drawn from the network's stream at construction so one seed fixes
  // every mask; without a stream the layer's position still makes layers differ.
  const std::uint64_t seed =
      ctx.rng ? ctx.rng->next() : 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(ctx.index + 1);
  return std::make_unique<Dropout>(spec.where() + ": dropout", ctx.input_shape, ctx.dtype, rate, seed);
}

}  // namespace dlscale
