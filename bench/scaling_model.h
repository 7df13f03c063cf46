// The step-time model of docs/scaling.md, as plain functions (no MPI, no
// files) so tests/bench/scaling_model_test.cpp checks them by hand:
//  - an alpha-beta fit T(s) = alpha + beta*s of measured all-reduces;
//  - gradient buckets planned as the runtime plans them (reverse layer order,
//    the first at most 1 MiB, then at most the bucket size);
//  - the overlap recurrence: bucket b is ready at r_b (the end of the
//    backward of its last layer), done at c_b = max(r_b, c_{b-1}) + T(s_b);
//    step = forward + max(backward, c_last) + update;
//  - all-reduce cost on GPU clusters: a flat ring, and the hierarchical
//    (reduce-scatter in the node, ring across nodes, all-gather in the node).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace dlscale::bench {

struct AlphaBeta {
  double alpha = 0, beta = 0;  // seconds, seconds per byte
  double at(double bytes) const { return alpha + beta * bytes; }
};

struct Point {
  double bytes = 0, seconds = 0;
};

// Least squares of the relative residuals (alpha + beta*s - T)/T, i.e.
// weights 1/T^2: plain least squares would let the largest sizes decide
// alone, and a bucket of a few kB would be predicted at a negative time.
// Needs two distinct sizes with positive times.
AlphaBeta fit_alpha_beta(const std::vector<Point>& points);

// The all-reduce is seldom one line: MPI switches algorithms and protocols
// with the message size (eager to rendezvous, recursive doubling to ring),
// and a token-bucket link passes a burst at line rate, so the throughput
// can change over decades of sizes. So the model fits up to three
// alpha-beta lines over consecutive ranges of the measured sizes (each at
// least two of them), split where the squared relative residuals are least.
// One line is kept when it is within 5 % of every point; a further line
// only when it at least halves the residuals (more lines always fit a
// little better).
struct AllreduceFit {
  std::vector<AlphaBeta> lines;  // by size: lines[i] below splits[i], the last above all splits
  std::vector<double> splits;    // halfway (geometrically) between the measured sizes around a split
  double at(double bytes) const;
};
AllreduceFit fit_allreduce(std::vector<Point> points);
// The largest |predicted - measured| / measured over the points.
double worst_relative_residual(const AllreduceFit& f, const std::vector<Point>& points);

// One layer in backward order: its backward time and its gradient bytes.
struct LayerCost {
  std::string name;
  double backward_s = 0;
  double grad_bytes = 0;
};

// A bucket: its bytes and the layers (indices in backward order) in it.
struct Bucket {
  double bytes = 0;
  std::vector<std::size_t> layers;
};

// The runtime's plan (GradientBuckets) with a layer's gradients as one block
// (the runtime plans per param, so a layer's weight and bias can fall into
// two buckets; the model is told the measured layout where there is one).
std::vector<Bucket> plan_buckets(const std::vector<LayerCost>& layers, double bucket_bytes,
                                 double first_bucket_bytes = 1 << 20);

// r_b, seconds after backward starts.
std::vector<double> ready_times(const std::vector<LayerCost>& layers, const std::vector<Bucket>& buckets);

struct StepPrediction {
  double step = 0, forward = 0, backward = 0, update = 0;
  double comm_done = 0;   // c_last, after backward starts
  double comm_total = 0;  // sum of T(s_b)
  double exposed = 0;     // max(0, c_last - backward)
};

// allreduce(bytes, last) is T(s_b); `last` marks the final bucket, which the
// runtime reduces with a blocking call. overlap=false: every bucket starts
// after backward (c_b = backward + sum of T up to b).
StepPrediction predict_step(double forward_s, const std::vector<LayerCost>& layers, double update_s,
                            const std::vector<Bucket>& buckets,
                            const std::function<double(double bytes, bool last)>& allreduce, bool overlap = true);

// A GPU cluster: nodes of gpus_per_node GPUs joined inside by NVLink and
// across by nics_per_node links of link_bytes_per_s each.
struct Cluster {
  int gpus_per_node = 8;
  double nvlink_bytes_per_s = 0, alpha_nvlink_s = 0;  // achieved all-reduce bus bandwidth, per hop
  double link_bytes_per_s = 0, alpha_net_s = 0;       // one inter-node link, per hop
  int nics_per_node = 1;
};

// Ring all-reduce over all gpus in one ring: 2(p-1) hops, each paying the
// slowest hop's latency; 2(p-1)/p of the bytes cross every edge, and the
// inter-node edges share the node's links.
double flat_ring_seconds(const Cluster& c, int gpus, double bytes);
// Reduce-scatter in the node, ring all-reduce across nodes of the node's
// shards (all of a node's bytes cross its links), all-gather in the node.
double hierarchical_seconds(const Cluster& c, int gpus, double bytes);

// A network's layers for the large-scale predictions: parameters and
// forward multiply-adds per sample, in forward order.
struct LayerShape {
  std::string name;
  double params = 0, macs = 0;
};
std::vector<LayerShape> vgg16_layers();     // 224x224, 138.4M params
std::vector<LayerShape> resnet50_layers();   // 224x224, 25.6M params (convolutions with their batch norms)
std::vector<LayerShape> resnet101_layers();  // 224x224, 44.5M params

}  // namespace dlscale::bench
