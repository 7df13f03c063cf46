// CPU global average pooling: one pass over each (sample, channel) plane.
// The plane's sum is taken in the element type in row-major order and then
// multiplied by 1/(H·W), the order layers/global_avgpool.cu follows, so both
// backends give the same float32 bits.
#include "layers/global_avgpool.h"

namespace dlscale {

namespace {

class GlobalAvgPool : public Layer {
 public:
  explicit GlobalAvgPool(const Shape& input_shape) : input_shape_(input_shape) { output_shape_ = {input_shape[0]}; }

  std::string kind() const override { return "globalavgpool"; }

  // x is (N, C, H, W); y is (N, C).
  Tensor forward(const Tensor& x, bool) override {
    if (x.rank() != 4 || Shape(x.shape().begin() + 1, x.shape().end()) != input_shape_)
      fail("globalavgpool: expected input N×" + to_string(input_shape_) + ", got " + to_string(x.shape()));
    batch_ = x.dim(0);
    const std::int64_t planes = batch_ * input_shape_[0], area = plane_area();
    Tensor y = Tensor::uninitialized({batch_, input_shape_[0]}, x.dtype());
    dispatch(x.dtype(), [&]<class T>() {
      const T* px = x.data<T>();
      T* py = y.data<T>();
      const T scale = T(1) / static_cast<T>(area);
#pragma omp parallel for schedule(static) if (planes * area > 65536)
      for (std::int64_t p = 0; p < planes; ++p) {
        const T* in = px + p * area;
        T s = 0;
        for (std::int64_t i = 0; i < area; ++i) s += in[i];
        py[p] = s * scale;
      }
    });
    return y;
  }

  // dy is (N, C); every position of a plane gets dy/(H·W).
  Tensor backward(const Tensor& dy) override {
    DLSCALE_REQUIRE(batch_ >= 0, "globalavgpool: backward called without a forward");
    if (dy.shape() != Shape({batch_, input_shape_[0]}))
      fail("globalavgpool: backward got dL/dy of shape " + to_string(dy.shape()) + ", expected " +
           to_string(Shape({batch_, input_shape_[0]})));
    Shape shape{batch_};
    shape.insert(shape.end(), input_shape_.begin(), input_shape_.end());
    Tensor dx = Tensor::uninitialized(shape, dy.dtype());
    const std::int64_t planes = batch_ * input_shape_[0], area = plane_area();
    dispatch(dy.dtype(), [&]<class T>() {
      const T* pdy = dy.data<T>();
      T* pdx = dx.data<T>();
      const T scale = T(1) / static_cast<T>(area);
#pragma omp parallel for schedule(static) if (planes * area > 65536)
      for (std::int64_t p = 0; p < planes; ++p) {
        const T d = pdy[p] * scale;
        T* out = pdx + p * area;
        for (std::int64_t i = 0; i < area; ++i) out[i] = d;
      }
    });
    return dx;
  }

 private:
  std::int64_t plane_area() const { return input_shape_[1] * input_shape_[2]; }

  Shape input_shape_;      // C, H, W
  std::int64_t batch_ = -1;  // N of the last forward
};

}  // namespace

std::unique_ptr<Layer> make_globalavgpool(const LayerSpec& spec, const LayerContext& ctx) {
  if (ctx.input_shape.size() != 3)
    spec.fail_here("needs a C×H×W input, got " + to_string(ctx.input_shape) +
                   " (put it before flatten and dense layers)");
  return std::make_unique<GlobalAvgPool>(ctx.input_shape);
}

}  // namespace dlscale
