// Softmax and softmax cross-entropy, CPU. Rows are independent: loops run in
// parallel over rows; per-row results are summed afterwards in row order so
// the loss does not depend on the thread count. Exponentials are taken in
// double after subtracting the row max, so float32 logits cannot overflow.
#include "layers/softmax.h"

#include <cmath>
#include <string>
#include <vector>

namespace dlscale {

namespace {
constexpr std::int64_t kParallelMin = 1 << 14;

// Logits are N×K, or N×T×K for per-position prediction: either way
// numel/K rows of K scores, each with its own label.
void check_logits(const Tensor& logits, const char* who) {
  if (logits.rank() < 2 || logits.rank() > 3 || logits.dim(logits.rank() - 1) < 1)
    fail(std::string(who) + ": logits must be N x K or N x T x K with K >= 1, got " + to_string(logits.shape()));
}

std::int64_t rows_of(const Tensor& logits) { return logits.numel() / logits.dim(logits.rank() - 1); }
std::int64_t width_of(const Tensor& logits) { return logits.dim(logits.rank() - 1); }

void check_labels(const std::int32_t* labels, std::int64_t n, std::int64_t k, const char* who) {
  if (n > 0 && labels == nullptr) fail(std::string(who) + ": no labels given");
  for (std::int64_t i = 0; i < n; ++i)
    if (labels[i] < 0 || labels[i] >= k)
      fail(std::string(who) + ": label " + std::to_string(labels[i]) + " of sample " + std::to_string(i) +
           " is outside [0, " + std::to_string(k) + ")");
}

// p (K) = softmax(z) of one row, in double; returns log(sum exp(z - max)) + max.
template <class T>
double softmax_row(const T* z, std::int64_t k, double* p) {
  double zmax = z[0];
  for (std::int64_t j = 1; j < k; ++j) zmax = z[j] > zmax ? z[j] : zmax;
  double sum = 0;
  for (std::int64_t j = 0; j < k; ++j) sum += p[j] = std::exp(z[j] - zmax);
  for (std::int64_t j = 0; j < k; ++j) p[j] /= sum;
  return std::log(sum) + zmax;
}

template <class T>
std::int64_t argmax_row(const T* z, std::int64_t k) {
  std::int64_t best = 0;
  for (std::int64_t j = 1; j < k; ++j)
    if (z[j] > z[best]) best = j;
  return best;
}

// dlogits may be null (evaluation). Per-row loss and hit go to vectors and are
// summed serially afterwards.
template <class T>
LossResult cross_entropy(const Tensor& logits, const std::int32_t* labels, double normalizer, T* dlogits) {
  const std::int64_t n = rows_of(logits), k = width_of(logits);
  const T* z = logits.data<T>();
  std::vector<double> row_loss(n);
  std::vector<char> row_hit(n);
#pragma omp parallel if (n * k >= kParallelMin)
  {
    std::vector<double> p(k);
#pragma omp for
    for (std::int64_t i = 0; i < n; ++i) {
      const T* zi = z + i * k;
      const double lse = softmax_row(zi, k, p.data());
      row_loss[i] = lse - static_cast<double>(zi[labels[i]]);
      row_hit[i] = argmax_row(zi, k) == labels[i];
      if (dlogits) {
        T* di = dlogits + i * k;
        for (std::int64_t j = 0; j < k; ++j) di[j] = static_cast<T>((p[j] - (j == labels[i] ? 1.0 : 0.0)) / normalizer);
      }
    }
  }
  LossResult result{0.0, 0};
  for (std::int64_t i = 0; i < n; ++i) result.loss_sum += row_loss[i], result.correct += row_hit[i];
  return result;
}

// The `softmax` layer. y (N, K); backward is the Jacobian-vector product
// dx = y ⊙ (dy - <dy, y>) per row.
class Softmax final : public Layer {
 public:
  Softmax(const LayerSpec& spec, const LayerContext& ctx) : who_(spec.where() + ": softmax"), dtype_(ctx.dtype) {
    output_shape_ = ctx.input_shape;
  }
  std::string kind() const override { return "softmax"; }

  Tensor forward(const Tensor& x, bool) override {
    if (Shape(x.shape().begin() + (x.rank() ? 1 : 0), x.shape().end()) != output_shape_ || x.rank() == 0 ||
        x.dtype() != dtype_)
      fail(who_ + ": input is " + to_string(x.shape()) + " " + to_string(x.dtype()) + " but the layer expects N x " +
           to_string(output_shape_) + " " + to_string(dtype_));
    y_ = softmax(x);
    return y_;
  }

  Tensor backward(const Tensor& dy) override {
    if (y_.rank() == 0 || dy.shape() != y_.shape() || dy.dtype() != dtype_)
      fail(who_ + ": gradient is " + to_string(dy.shape()) + " " + to_string(dy.dtype()) + " but the last output was " +
           to_string(y_.shape()) + " " + to_string(dtype_));
    Tensor dx(dy.shape(), dtype_);
    dispatch(dtype_, [&]<class T>() {
      const std::int64_t n = rows_of(dy), k = width_of(dy);
      const T* y = y_.data<T>();
      const T* g = dy.data<T>();
      T* d = dx.data<T>();
#pragma omp parallel for if (n * k >= kParallelMin)
      for (std::int64_t i = 0; i < n; ++i) {
        double dot = 0;
        for (std::int64_t j = 0; j < k; ++j) dot += static_cast<double>(g[i * k + j]) * y[i * k + j];
        for (std::int64_t j = 0; j < k; ++j) d[i * k + j] = static_cast<T>(y[i * k + j] * (g[i * k + j] - dot));
      }
    });
    return dx;
  }

 private:
  std::string who_;
  DType dtype_;
  Tensor y_;  // output of the last forward
};
}  // namespace

Tensor softmax(const Tensor& logits) {
  check_logits(logits, "softmax");
  Tensor y(logits.shape(), logits.dtype());
  dispatch(logits.dtype(), [&]<class T>() {
    const std::int64_t n = rows_of(logits), k = width_of(logits);
    const T* z = logits.data<T>();
    T* out = y.data<T>();
#pragma omp parallel if (n * k >= kParallelMin)
    {
      std::vector<double> p(k);
#pragma omp for
      for (std::int64_t i = 0; i < n; ++i) {
        softmax_row(z + i * k, k, p.data());
        for (std::int64_t j = 0; j < k; ++j) out[i * k + j] = static_cast<T>(p[j]);
      }
    }
  });
  return y;
}

LossResult softmax_cross_entropy(const Tensor& logits, const std::int32_t* labels, double normalizer,
                                 Tensor& dlogits) {
  const char* who = "softmax cross-entropy";
  check_logits(logits, who);
  check_labels(labels, rows_of(logits), width_of(logits), who);
  if (!(normalizer > 0)) fail(std::string(who) + ": normalizer must be positive, got " + std::to_string(normalizer));
  if (dlogits.shape() != logits.shape() || dlogits.dtype() != logits.dtype())
    dlogits = Tensor(logits.shape(), logits.dtype());
  return dispatch(logits.dtype(), [&]<class T>() {
    return cross_entropy<T>(logits, labels, normalizer, dlogits.data<T>());
  });
}

LossResult softmax_cross_entropy_eval(const Tensor& logits, const std::int32_t* labels) {
  const char* who = "softmax cross-entropy";
  check_logits(logits, who);
  check_labels(labels, rows_of(logits), width_of(logits), who);
  return dispatch(logits.dtype(), [&]<class T>() { return cross_entropy<T>(logits, labels, 1.0, nullptr); });
}

std::unique_ptr<Layer> make_softmax(const LayerSpec& spec, const LayerContext& ctx) {
  if (ctx.input_shape.empty() || ctx.input_shape.size() > 2 || ctx.input_shape.back() < 1)
    spec.fail_here("input must be a vector of K >= 1 scores per sample (flatten first), or T×K for one "
                   "prediction per position, got " + to_string(ctx.input_shape));
  return std::make_unique<Softmax>(spec, ctx);
}

}  // namespace dlscale
