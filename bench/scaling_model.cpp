// The step-time model's functions; see scaling_model.h and docs/scaling.md.
#include "scaling_model.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>

namespace dlscale::bench {

AlphaBeta fit_alpha_beta(const std::vector<Point>& points) {
  double sw = 0, sws = 0, swss = 0, swt = 0, swst = 0;
  for (const Point& p : points) {
    if (!(p.seconds > 0)) throw std::invalid_argument("alpha-beta fit: a measured time is not positive");
    const double w = 1.0 / (p.seconds * p.seconds);
    sw += w;
    sws += w * p.bytes;
    swss += w * p.bytes * p.bytes;
    swt += w * p.seconds;
    swst += w * p.bytes * p.seconds;
  }
  const double det = sw * swss - sws * sws;
  if (points.size() < 2 || !(std::abs(det) > 1e-12 * sw * swss))
    throw std::invalid_argument("alpha-beta fit: needs at least two distinct sizes");
  return {(swss * swt - sws * swst) / det, (sw * swst - sws * swt) / det};
}

namespace {
double squared_relative_residuals(const AlphaBeta& f, const std::vector<Point>& points, std::size_t begin,
                                  std::size_t end) {
  double sum = 0;
  for (std::size_t i = begin; i < end; ++i)
    sum += std::pow((f.at(points[i].bytes) - points[i].seconds) / points[i].seconds, 2);
  return sum;
}

// The best split of sorted `points` into `segments` consecutive ranges of at
// least two points (distinct sizes at each boundary), and its cost.
std::pair<AllreduceFit, double> best_split(const std::vector<Point>& points, std::size_t segments) {
  std::pair<AllreduceFit, double> best{{}, std::numeric_limits<double>::infinity()};
  std::vector<std::size_t> bounds{0};
  std::function<void(double)> place = [&](double cost_so_far) {
    const std::size_t begin = bounds.back();
    if (bounds.size() == segments) {  // the last range runs to the end
      if (points.size() - begin < 2) return;
      const std::vector<Point> range(points.begin() + begin, points.end());
      const AlphaBeta line = fit_alpha_beta(range);
      const double cost = cost_so_far + squared_relative_residuals(line, points, begin, points.size());
      if (cost >= best.second) return;
      AllreduceFit f;
      for (std::size_t k = 0; k < bounds.size(); ++k) {
        const std::size_t b = bounds[k], e = k + 1 < bounds.size() ? bounds[k + 1] : points.size();
        f.lines.push_back(fit_alpha_beta(std::vector<Point>(points.begin() + b, points.begin() + e)));
        if (k > 0) f.splits.push_back(std::sqrt(points[b - 1].bytes * points[b].bytes));
      }
      best = {f, cost};
      return;
    }
    for (std::size_t end = begin + 2; end + 2 <= points.size(); ++end) {
      if (points[end - 1].bytes == points[end].bytes) continue;
      const std::vector<Point> range(points.begin() + begin, points.begin() + end);
      bounds.push_back(end);
      place(cost_so_far + squared_relative_residuals(fit_alpha_beta(range), points, begin, end));
      bounds.pop_back();
    }
  };
  place(0);
  return best;
}
}  // namespace

double AllreduceFit::at(double bytes) const {
  std::size_t k = 0;
  while (k < splits.size() && bytes >= splits[k]) ++k;
  return lines[k].at(bytes);
}

double worst_relative_residual(const AllreduceFit& f, const std::vector<Point>& points) {
  double worst = 0;
  for (const Point& p : points) worst = std::max(worst, std::abs(f.at(p.bytes) - p.seconds) / p.seconds);
  return worst;
}

AllreduceFit fit_allreduce(std::vector<Point> points) {
  std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) { return a.bytes < b.bytes; });
  auto best = best_split(points, 1);
  if (worst_relative_residual(best.first, points) <= 0.05) return best.first;
  for (std::size_t segments = 2; segments <= 3; ++segments) {
    auto more = best_split(points, segments);
    if (!(more.second < 0.5 * best.second)) break;
    best = more;
  }
  return best.first;
}

std::vector<Bucket> plan_buckets(const std::vector<LayerCost>& layers, double bucket_bytes,
                                 double first_bucket_bytes) {
  if (!(bucket_bytes > 0)) throw std::invalid_argument("bucket size must be positive");
  std::vector<Bucket> plan(1);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].grad_bytes <= 0) continue;  // no params: in no bucket
    const double cap = plan.size() == 1 ? std::min(first_bucket_bytes, bucket_bytes) : bucket_bytes;
    // As GradientBuckets: close the bucket when the next block would overflow it.
    if (!plan.back().layers.empty() && plan.back().bytes + layers[i].grad_bytes > cap) plan.emplace_back();
    plan.back().bytes += layers[i].grad_bytes;
    plan.back().layers.push_back(i);
  }
  if (plan.back().layers.empty()) plan.pop_back();
  return plan;
}

std::vector<double> ready_times(const std::vector<LayerCost>& layers, const std::vector<Bucket>& buckets) {
  std::vector<double> end(layers.size());
  double t = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) end[i] = t += layers[i].backward_s;
  std::vector<double> r;
  for (const Bucket& b : buckets) {
    double ready = 0;
    for (std::size_t i : b.layers) {
      if (i >= layers.size()) throw std::invalid_argument("a bucket names layer " + std::to_string(i) + " of " +
                                                          std::to_string(layers.size()));
      ready = std::max(ready, end[i]);
    }
    r.push_back(ready);
  }
  return r;
}

StepPrediction predict_step(double forward_s, const std::vector<LayerCost>& layers, double update_s,
                            const std::vector<Bucket>& buckets,
                            const std::function<double(double, bool)>& allreduce, bool overlap) {
  StepPrediction p;
  p.forward = forward_s;
  p.update = update_s;
  for (const LayerCost& l : layers) p.backward += l.backward_s;
  const std::vector<double> r = ready_times(layers, buckets);
  double c = 0;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const double t = allreduce(buckets[b].bytes, b + 1 == buckets.size());
    c = std::max(overlap ? r[b] : p.backward, c) + t;
    p.comm_total += t;
  }
  p.comm_done = c;
  p.exposed = std::max(0.0, c - p.backward);
  p.step = forward_s + std::max(p.backward, c) + update_s;
  return p;
}

double flat_ring_seconds(const Cluster& c, int gpus, double bytes) {
  if (gpus <= 1) return 0;
  const bool across = gpus > c.gpus_per_node;
  const double alpha = across ? c.alpha_net_s : c.alpha_nvlink_s;
  const double bw = across ? std::min(c.nvlink_bytes_per_s, c.nics_per_node * c.link_bytes_per_s) : c.nvlink_bytes_per_s;
  return 2.0 * (gpus - 1) * alpha + 2.0 * (gpus - 1) / gpus * bytes / bw;
}

double hierarchical_seconds(const Cluster& c, int gpus, double bytes) {
  const int g = std::min(gpus, c.gpus_per_node);
  const int nodes = (gpus + c.gpus_per_node - 1) / c.gpus_per_node;
  // Reduce-scatter plus all-gather in the node: together one in-node all-reduce.
  double t = g > 1 ? 2.0 * (g - 1) * c.alpha_nvlink_s + 2.0 * (g - 1) / g * bytes / c.nvlink_bytes_per_s : 0.0;
  if (nodes > 1)
    t += 2.0 * (nodes - 1) * c.alpha_net_s +
         2.0 * (nodes - 1) / nodes * bytes / (c.nics_per_node * c.link_bytes_per_s);
  return t;
}

namespace {
LayerShape conv(const std::string& name, double cin, double cout, double k, double out_hw, bool bias) {
  return {name, k * k * cin * cout + (bias ? cout : 2 * cout), k * k * cin * cout * out_hw * out_hw};
}
LayerShape dense(const std::string& name, double in, double out) { return {name, in * out + out, in * out}; }
}  // namespace

std::vector<LayerShape> vgg16_layers() {
  // (out channels, output side) of the 13 3x3 convolutions; 2x2 pooling after each block.
  const int spec[13][2] = {{64, 224},  {64, 224},  {128, 112}, {128, 112}, {256, 56}, {256, 56}, {256, 56},
                           {512, 28},  {512, 28},  {512, 28},  {512, 14},  {512, 14}, {512, 14}};
  std::vector<LayerShape> out;
  int cin = 3;
  for (int i = 0; i < 13; ++i) {
    out.push_back(conv("conv" + std::to_string(i + 1), cin, spec[i][0], 3, spec[i][1], true));
    cin = spec[i][0];
  }
  out.push_back(dense("fc6", 512.0 * 7 * 7, 4096));
  out.push_back(dense("fc7", 4096, 4096));
  out.push_back(dense("fc8", 4096, 1000));
  return out;
}

namespace {
// Bottleneck ResNet v1.5 with `blocks` bottlenecks per stage.
std::vector<LayerShape> resnet_layers(const int (&blocks)[4]) {
  std::vector<LayerShape> out{conv("conv1", 3, 64, 7, 112, false)};
  const int width[4] = {64, 128, 256, 512}, side[4] = {56, 28, 14, 7};
  double cin = 64;
  for (int s = 0; s < 4; ++s)
    for (int b = 0; b < blocks[s]; ++b) {
      const std::string n = "s" + std::to_string(s + 1) + "b" + std::to_string(b + 1);
      const double w = width[s], in_side = (b == 0 && s > 0) ? side[s] * 2 : side[s];  // v1.5: stride on the 3x3
      out.push_back(conv(n + "-1x1a", cin, w, 1, in_side, false));
      out.push_back(conv(n + "-3x3", w, w, 3, side[s], false));
      out.push_back(conv(n + "-1x1b", w, 4 * w, 1, side[s], false));
      if (b == 0) out.push_back(conv(n + "-proj", cin, 4 * w, 1, side[s], false));
      cin = 4 * w;
    }
  out.push_back(dense("fc", 2048, 1000));
  return out;
}
}  // namespace

std::vector<LayerShape> resnet50_layers() { return resnet_layers({3, 4, 6, 3}); }
std::vector<LayerShape> resnet101_layers() { return resnet_layers({3, 4, 23, 3}); }

}  // namespace dlscale::bench
