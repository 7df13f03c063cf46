// Flatten is a reshape in both directions; tensors are row-major, so the
// N×C×H×W storage already is the N×(C·H·W) matrix.
#include "layers/flatten.h"

namespace dlscale {

namespace {

class Flatten : public Layer {
 public:
  explicit Flatten(const Shape& input_shape) : input_shape_(input_shape) { output_shape_ = {numel(input_shape)}; }

  std::string kind() const override { return "flatten"; }

  // x is (N, input_shape...); y is (N, F), sharing x's storage.
  Tensor forward(const Tensor& x, bool) override {
    Shape sample(x.shape().begin() + (x.rank() ? 1 : 0), x.shape().end());
    if (x.rank() < 1 || sample != input_shape_)
      fail("flatten: expected input N×" + to_string(input_shape_) + ", got " + to_string(x.shape()));
    return x.reshaped({x.dim(0), output_shape_[0]});
  }

  // dy is (N, F); dx is (N, input_shape...), sharing dy's storage.
  Tensor backward(const Tensor& dy) override {
    if (dy.rank() != 2 || dy.dim(1) != output_shape_[0])
      fail("flatten: backward got dL/dy of shape " + to_string(dy.shape()) + ", expected N×" +
           std::to_string(output_shape_[0]));
    Shape shape{dy.dim(0)};
    shape.insert(shape.end(), input_shape_.begin(), input_shape_.end());
    return dy.reshaped(shape);
  }

 private:
  Shape input_shape_;
};

}  // namespace

std::unique_ptr<Layer> make_flatten(const LayerSpec& spec, const LayerContext& ctx) {
  if (ctx.input_shape.empty()) spec.fail_here("needs an input shape, got " + to_string(ctx.input_shape));
  return std::make_unique<Flatten>(ctx.input_shape);
}

}  // namespace dlscale
