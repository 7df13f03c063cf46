// `scaling_model predict`: scaling efficiency (weak scaling, the per-GPU
// batch fixed: one GPU's step time over the step time on p GPUs) of
// ResNet-50- and VGG-16-sized networks with float32 gradients on H200-class
// nodes, from the model of scaling_model.h. Every assumption is an option,
// printed with the tables; docs/scaling.md says where the defaults come from.
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/core/error.h"
#include "scaling_model.h"

namespace {

using namespace dlscale;
using namespace dlscale::bench;

using Options = std::map<std::string, double>;

// H200-class nodes (docs/scaling.md says where each figure comes from).
const Options kH200 = {{"resnet-batch", 256}, {"resnet-tflops", 100}, {"vgg-batch", 64}, {"vgg-tflops", 200},
                       {"gpus-per-node", 8},  {"nvlink-gbs", 360},    {"alpha-nvlink-us", 2}, {"alpha-net-us", 5},
                       {"link-efficiency", 0.9}, {"hbm-tbs", 3.4}, {"update-bytes-per-param", 20}, {"bucket-mib", 25}};
// Horovod's published setup (Sergeev and Del Balso 2018): 4 Pascal GPUs per
// server over PCIe, 25 Gbit/s RoCE, 64 MB fusion buffer; the rest assumed.
const Options kHorovod = {{"resnet-batch", 64}, {"resnet-tflops", 6}, {"vgg-batch", 64}, {"vgg-tflops", 6},
                          {"gpus-per-node", 4}, {"nvlink-gbs", 10},   {"alpha-nvlink-us", 5}, {"alpha-net-us", 10},
                          {"link-gbit", 25},    {"link-efficiency", 0.9}, {"hbm-tbs", 0.5},
                          {"update-bytes-per-param", 20}, {"bucket-mib", 64}};

Options parse(int argc, char** argv, Options o) {
  for (int i = 2; i < argc; i += 2) {
    std::string key = argv[i];
    if (key.rfind("--", 0) != 0 || !o.count(key.substr(2)) || i + 1 >= argc)
      fail("scaling_model predict: unknown option or missing value: " + key);
    o[key.substr(2)] = std::stod(argv[i + 1]);
  }
  return o;
}

// One network on one GPU: layers in backward order with their share of
// backward (by multiply-adds), forward and update.
struct Workload {
  std::string name;
  std::vector<LayerCost> layers;
  double forward = 0, update = 0, grad_bytes = 0, params = 0, macs = 0, batch = 0, tflops = 0;
  double single() const {
    double b = 0;
    for (const auto& l : layers) b += l.backward_s;
    return forward + b + update;
  }
};

// Training FLOPs = 3 x forward (backward computes the input and weight
// gradients); 2 FLOPs per multiply-add.
Workload workload(const std::string& name, const std::vector<LayerShape>& shapes, double batch, double tflops,
                  const Options& o) {
  Workload w{name, {}, 0, 0, 0, 0, 0, batch, tflops};
  for (const auto& s : shapes) w.macs += s.macs, w.params += s.params;
  const double macs = w.macs, params = w.params;
  const double compute = 3 * 2 * macs * batch / (tflops * 1e12);
  w.forward = compute / 3;
  for (auto it = shapes.rbegin(); it != shapes.rend(); ++it)
    w.layers.push_back({it->name, 2 * compute / 3 * it->macs / macs, 4 * it->params});
  w.grad_bytes = 4 * params;
  w.update = params * o.at("update-bytes-per-param") / (o.at("hbm-tbs") * 1e12);
  return w;
}

void print_workload(const Workload& w) {
  std::printf("| %s | %.1f M | %.1f MB | %.2f | %g | %g | %.1f | %.1f | %.2f |\n", w.name.c_str(), w.params / 1e6,
              w.grad_bytes / 1e6, w.macs / 1e9, w.batch, w.tflops, w.forward * 1e3, 2 * w.forward * 1e3,
              w.update * 1e3);
}

Cluster cluster(const Options& o, double gbit, int nics) {
  Cluster c;
  c.nvlink_bytes_per_s = o.at("nvlink-gbs") * 1e9;
  c.alpha_nvlink_s = o.at("alpha-nvlink-us") * 1e-6;
  c.link_bytes_per_s = gbit * 1e9 / 8 * o.at("link-efficiency");
  c.alpha_net_s = o.at("alpha-net-us") * 1e-6;
  c.nics_per_node = nics;
  c.gpus_per_node = static_cast<int>(o.at("gpus-per-node"));
  return c;
}

using Cost = std::function<double(const Cluster&, int, double)>;

double efficiency(const Workload& w, const Cluster& c, const Cost& cost, int gpus, double bucket_mib, bool overlap) {
  const auto buckets = plan_buckets(w.layers, bucket_mib * (1 << 20));
  const auto p = predict_step(w.forward, w.layers, w.update, buckets,
                              [&](double bytes, bool) { return cost(c, gpus, bytes); }, overlap);
  return w.single() / p.step;
}

const int kGpus[] = {8, 16, 32, 64, 128, 256, 512};

void efficiency_table(const std::vector<Workload>& nets, const Options& o) {
  std::printf("\nScaling efficiency, %g MiB buckets, all-reduce overlapped with backward:\n\n", o.at("bucket-mib"));
  std::printf("| network | link | NICs per node | all-reduce |");
  for (int g : kGpus) std::printf(" %d |", g);
  std::printf("\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  const std::pair<const char*, Cost> algos[] = {{"hierarchical", hierarchical_seconds}, {"flat ring", flat_ring_seconds}};
  for (const auto& w : nets)
    for (double gbit : {200.0, 400.0})
      for (int nics : {1, 8})
        for (const auto& [algo, cost] : algos) {
          std::printf("| %s | %g Gbit/s | %d | %s |", w.name.c_str(), gbit, nics, algo);
          for (int g : kGpus)
            std::printf(" %.0f%% |", 100 * efficiency(w, cluster(o, gbit, nics), cost, g, o.at("bucket-mib"), true));
          std::printf("\n");
        }
}

void vgg_settings(const Workload& vgg, const Options& o) {
  std::printf("\n%s at 512 GPUs, hierarchical all-reduce, by bucket size and overlap:\n\n", vgg.name.c_str());
  std::printf("| bucket MiB | buckets | overlap | 200 Gbit/s, 1 NIC | 400 Gbit/s, 1 NIC | 200 Gbit/s, 8 NICs | 400 Gbit/s, 8 NICs |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (double mib : {1.0, 5.0, 25.0, 100.0, 600.0})
    for (bool overlap : {true, false}) {
      std::printf("| %g | %zu | %s |", mib, plan_buckets(vgg.layers, mib * (1 << 20)).size(), overlap ? "yes" : "no");
      for (int nics : {1, 8})
        for (double gbit : {200.0, 400.0})
          std::printf(" %.0f%% |", 100 * efficiency(vgg, cluster(o, gbit, nics), hierarchical_seconds, 512, mib, overlap));
      std::printf("\n");
    }
}

void vgg_batches(const Options& o) {
  std::printf("\nVGG-16 at 512 GPUs by per-GPU batch (hierarchical, %g MiB buckets, overlap):\n\n", o.at("bucket-mib"));
  std::printf("| per-GPU batch | step on one GPU ms | 200 Gbit/s, 1 NIC | 400 Gbit/s, 1 NIC | 200 Gbit/s, 8 NICs | 400 Gbit/s, 8 NICs |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (double batch : {32.0, 64.0, 128.0, 256.0}) {
    const Workload w = workload("VGG-16", vgg16_layers(), batch, o.at("vgg-tflops"), o);
    std::printf("| **%g** | %.1f |", batch, w.single() * 1e3);
    for (int nics : {1, 8})
      for (double gbit : {200.0, 400.0})
        std::printf(" %.0f%% |",
                    100 * efficiency(w, cluster(o, gbit, nics), hierarchical_seconds, 512, o.at("bucket-mib"), true));
    std::printf("\n");
  }
}

}  // namespace

// The model in Horovod's setting, beside Horovod's published 512-GPU figures.
int horovod(int argc, char** argv) {
  const Options o = parse(argc, argv, kHorovod);
  std::printf("Assumptions:");
  for (const auto& [k, v] : o) std::printf(" --%s %g", k.c_str(), v);
  std::printf("\n\n| network | params | gradients | GMACs per sample | batch | TFLOP/s | forward ms | backward ms | update ms |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  const std::vector<Workload> nets = {
      workload("ResNet-101", resnet101_layers(), o.at("resnet-batch"), o.at("resnet-tflops"), o),
      workload("VGG-16", vgg16_layers(), o.at("vgg-batch"), o.at("vgg-tflops"), o)};
  for (const auto& w : nets) print_workload(w);
  std::printf("\n| network | all-reduce | overlap |");
  for (int g : kGpus) std::printf(" %d |", g);
  std::printf(" Horovod, 512 |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  const std::pair<const char*, Cost> algos[] = {{"hierarchical", hierarchical_seconds}, {"flat ring", flat_ring_seconds}};
  for (std::size_t n = 0; n < nets.size(); ++n)
    for (const auto& [algo, cost] : algos)
      for (bool overlap : {true, false}) {
        std::printf("| %s | %s | %s |", nets[n].name.c_str(), algo, overlap ? "yes" : "no");
        for (int g : kGpus)
          std::printf(" %.0f%% |", 100 * efficiency(nets[n], cluster(o, o.at("link-gbit"), 1), cost, g,
                                                     o.at("bucket-mib"), overlap));
        std::printf(" %s |\n", n == 0 ? "90%" : "68%");
      }
  return 0;
}

int predict(int argc, char** argv) {
  const Options o = parse(argc, argv, kH200);
  std::printf("Assumptions:");
  for (const auto& [k, v] : o) std::printf(" --%s %g", k.c_str(), v);
  std::printf("\n\n| network | params | gradients | GMACs/sample | batch | TFLOP/s | forward ms | backward ms | update ms |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  const std::vector<Workload> nets = {
      workload("ResNet-50", resnet50_layers(), o.at("resnet-batch"), o.at("resnet-tflops"), o),
      workload("VGG-16", vgg16_layers(), o.at("vgg-batch"), o.at("vgg-tflops"), o)};
  for (const auto& w : nets) print_workload(w);
  efficiency_table(nets, o);
  vgg_settings(nets[1], o);
  vgg_batches(o);
  return 0;
}
