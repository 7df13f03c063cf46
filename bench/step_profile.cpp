// What the scaling model (bench/scaling_model, docs/scaling.md) needs from
// one run of a network on P ranks, measured with the runtime's own pieces
// (Network, GradientBuckets, Optimizer) and written as one JSON file:
//  1. compute profile, no communication: forward (with the loss), each
//     layer's backward in backward order (from the timestamps of Network's
//     gradients-ready callback, the hook the buckets start from) with its
//     gradient bytes, and the optimizer update; per step the slowest rank's, means;
//  2. MPI_Allreduce and MPI_Iallreduce + MPI_Wait of float buffers from 4 KiB
//     up to --max-allreduce-mib (x4 each time, then the maximum itself) and
//     of the bucket sizes of part 3, each issued as a step issues it, after
//     the step's computation: the points of the alpha-beta fit;
//  3. per bucket size: the bucket layout (layers, bytes), the bucketed
//     all-reduce alone, and training steps with the all-reduce overlapped as
//     the runtime does it: step, forward, backward, wait in finish(), update,
//     the share of gradient bytes reduced before backward ended.
// The three parts take turns in --rounds rounds (a slow spell of a shared
// machine then falls on all of them alike); every all-reduce's sum is checked.
//   mpirun -n P step_profile CONFIG.ini [--batch 64] [--reps 20] [--rounds 4]
//                            [--buckets 0.25,25] [--max-allreduce-mib 256] [--output profile.json]
#include <mpi.h>

#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_common.h"
#include "layers/softmax.h"
#include "runtime/core/blas.h"
#include "runtime/core/heap.h"
#include "runtime/parallel/gradient_buckets.h"
#include "runtime/training/optimizer.h"

namespace {

using namespace dlscale;
using namespace dlscale::bench;
using Json = nlohmann::ordered_json;

struct Args {
  std::string config, output = "profile.json";
  int batch = 64, reps = 20, rounds = 4;
  std::vector<double> bucket_mib{0.25, 25};
  double max_allreduce_mib = 256;
};

Args parse_args(int argc, char** argv) {
  if (argc < 2) fail("usage: step_profile CONFIG.ini [--batch N] [--reps N] [--buckets MiB,MiB] "
                     "[--rounds N] [--max-allreduce-mib MiB] [--output FILE]");
  Args a;
  a.config = argv[1];
  for (int i = 2; i < argc; i += 2) {
    const std::string key = argv[i];
    if (i + 1 >= argc) fail("step_profile: " + key + " needs a value");
    const std::string value = argv[i + 1];
    if (key == "--batch") a.batch = std::stoi(value);
    else if (key == "--reps") a.reps = std::stoi(value);
    else if (key == "--rounds") a.rounds = std::stoi(value);
    else if (key == "--max-allreduce-mib") a.max_allreduce_mib = std::stod(value);
    else if (key == "--output") a.output = value;
    else if (key == "--buckets") {
      a.bucket_mib.clear();
      std::stringstream in(value);
      for (std::string item; std::getline(in, item, ',');) a.bucket_mib.push_back(std::stod(item));
    } else fail("step_profile: unknown option " + key);
  }
  if (a.batch < 1 || a.reps < 1 || a.rounds < 1 || a.bucket_mib.empty())
    fail("step_profile: batch, reps, rounds and buckets must be positive");
  return a;
}

// The config's `solver = ...` (sgdm when absent): the update costs what the run's solver costs.
std::string read_solver(const std::string& path) {
  std::ifstream in(path);
  std::string solver = "sgdm";
  for (std::string line; std::getline(in, line);) {
    auto eq = line.find('=');
    if (eq == std::string::npos || line.rfind("solver", 0) != 0) continue;
    std::stringstream v(line.substr(eq + 1));
    v >> solver;
  }
  return solver;
}

// The layers Network::backward reports, in its order (it skips add joins, the
// final softmax, a relu that the layer before applies (fused into batch
// norm), and a first layer without params): names and params.
struct BackwardLayer {
  std::string name;
  std::vector<Param*> params;
  std::size_t grad_bytes = 0;
};

std::vector<BackwardLayer> backward_layers(Network& net) {
  std::vector<BackwardLayer> out;
  const auto& nodes = net.nodes();
  for (int i = static_cast<int>(nodes.size()) - 2; i >= 0; --i) {
    if (!nodes[i].layer || nodes[i].applied_by_input) continue;
    if (i == 0 && nodes[i].layer->params().empty()) break;
    BackwardLayer l{std::to_string(i + 1) + " " + nodes[i].kind + " (" + nodes[i].name + ")",
                    nodes[i].layer->params(), 0};
    for (Param* p : l.params) l.grad_bytes += p->grad.bytes();
    out.push_back(std::move(l));
  }
  return out;
}

// One training step's input: random images and labels of the local batch.
struct Batch {
  Tensor x;
  std::vector<std::int32_t> labels;
};

Batch random_batch(Network& net, int batch, int rank) {
  Rng rng(rank + 1);
  Shape xs{batch};
  xs.insert(xs.end(), net.spec().input_shape.begin(), net.spec().input_shape.end());
  Batch b{Tensor(xs), std::vector<std::int32_t>(batch)};
  for (std::int64_t i = 0; i < b.x.numel(); ++i) b.x.data<float>()[i] = static_cast<float>(rng.uniform());
  for (auto& l : b.labels) l = static_cast<std::int32_t>(rng.below(net.num_classes()));
  return b;
}

struct Context {
  Communicator& comm;
  Network& net;
  Optimizer& opt;
  Batch batch;
  std::vector<BackwardLayer> layers;
};

void forward_loss(Context& c, Tensor& dlogits) {
  softmax_cross_entropy(c.net.forward_logits(c.batch.x, true), c.batch.labels.data(),
                        double(c.batch.labels.size()) * c.comm.size(), dlogits);
}

// Part 1, one step: forward, each layer's backward and the update on every
// rank without communication; rank 0 keeps the figures of the rank whose
// step took longest (in a synchronous step every rank waits for it).
void profile_step(Context& c, std::vector<std::vector<double>>& t, std::vector<int>& slowest, bool record) {
  const std::size_t n = c.layers.size();
  std::vector<double> mine(n + 2);  // [0] forward, [1..n] layers, [n+1] update
  Tensor dlogits;
  c.comm.barrier("step_profile");
  auto t0 = Clock::now();
  forward_loss(c, dlogits);
  mine[0] = since(t0);
  std::vector<double> stamps;
  t0 = Clock::now();
  c.net.backward(dlogits, [&](const std::vector<Param*>&) { stamps.push_back(since(t0)); });
  if (stamps.size() != n)
    fail("step_profile: backward reported " + std::to_string(stamps.size()) + " layers, expected " + std::to_string(n));
  t0 = Clock::now();
  c.opt.step(c.net.params(), 1e-4);
  mine[n + 1] = since(t0);
  for (std::size_t i = 0; i < n; ++i) mine[i + 1] = stamps[i] - (i ? stamps[i - 1] : 0.0);
  const std::vector<double> all = c.comm.gather(mine.data(), static_cast<int>(mine.size()));
  if (!record || c.comm.rank() != 0) return;
  std::size_t pick = 0;
  double most = -1;
  for (int k = 0; k < c.comm.size(); ++k) {
    double sum = 0;
    for (std::size_t i = 0; i < mine.size(); ++i) sum += all[k * mine.size() + i];
    if (sum > most) most = sum, pick = k;
  }
  ++slowest[pick];
  t.resize(mine.size());
  for (std::size_t i = 0; i < mine.size(); ++i) t[i].push_back(all[pick * mine.size() + i]);
}

// Part 1's figures: means over the recorded steps. Means, not medians: the
// measured step of part 3 is a mean (steps timed as blocks), and a step that
// the machine slowed counts in it as it counts in a run's throughput.
Json profile_summary(const Context& c, const std::vector<std::vector<double>>& t, const std::vector<int>& slowest) {
  const std::size_t n = c.layers.size();
  Json j;
  j["slowest_rank_steps"] = slowest;  // how often each rank was the slowest
  j["forward_s"] = mean(t[0]);
  j["update_s"] = mean(t[n + 1]);
  double bwd = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double m = mean(t[i + 1]);
    bwd += m;
    j["layers"].push_back({{"name", c.layers[i].name}, {"backward_s", m}, {"grad_bytes", c.layers[i].grad_bytes}});
  }
  j["backward_s"] = bwd;
  return j;
}

// The computation of a step without communication (forward with the loss,
// backward): what lies between one step's all-reduce and the next.
void compute_step(Context& c) {
  Tensor dlogits;
  forward_loss(c, dlogits);
  c.net.backward(dlogits);
}

// The time of each call of `reps`, as a step adds it: every rank times its
// call from post to completion, and the call's time is the shortest over the
// ranks. The rank that posts last (the one whose computation was slowest,
// which every other waits for) waits for no one, so its time is what the
// step adds after the slowest rank's computation, the quantity the model's
// step = computation + all-reduce needs; the others' include that wait.
template <typename F>
double mean_of_fastest_rank(Context& c, int reps, F&& call) {
  std::vector<double> t(reps);
  for (int r = 0; r < reps; ++r) {
    compute_step(c);
    const auto t0 = Clock::now();
    call();
    t[r] = since(t0);
  }
  DLSCALE_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, t.data(), reps, MPI_DOUBLE, MPI_MIN, c.comm.get()));
  return mean(t);
}

// An all-reduce of `buf`, blocking or not, as the trainer issues it.
void allreduce_once(Communicator& comm, std::vector<float>& buf, bool blocking) {
  const int count = static_cast<int>(buf.size());
  if (blocking) {
    DLSCALE_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, comm.get()));
  } else {
    MPI_Request req;
    DLSCALE_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, comm.get(), &req));
    DLSCALE_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
  }
}

// Part 2: the points of the alpha-beta fit. 4 KiB, 16 KiB, ... (x4), and the
// maximum itself, so the fit reaches the largest bucket instead of
// extrapolating to it; and the sizes of the buckets measured in part 3. MPI
// changes algorithm between the ladder's sizes: at 2 ranks over TCP a 1 MiB
// all-reduce took 3.0 ms where the CNN's 0.83 MB bucket took 1.9, and a line
// through 256 KiB and 1 MiB missed the bucket by a third.
// Each call is issued as the trainer issues it: once per step, after the
// step's computation, timed as mean_of_fastest_rank says. Back to back, over
// a link limited with tbf, the same calls took up to twice as long (the
// link's queue never drained; docs/scaling.md), which no step sees. The
// calls are spread over the rounds of parts 1 and 3: measured after them,
// the VGG-like network's 64 MiB took 234 ms in one run and 164 ms in the
// next at 2 nodes and 5 Gbit/s, and the model missed those steps by up to
// +19 % and then -24 % (in rounds: +0.1 to +6 % in two runs).
class AllreduceSweep {
 public:
  AllreduceSweep(Context& c, double max_mib, const std::vector<std::size_t>& bucket_bytes, int rounds) : c_(c) {
    const auto max_bytes = static_cast<std::size_t>(max_mib * (1 << 20)) / 4 * 4;
    for (std::size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) sizes_.push_back(bytes);
    if (sizes_.empty() || sizes_.back() < max_bytes) sizes_.push_back(max_bytes);
    for (std::size_t bytes : bucket_bytes)
      if (bytes >= 4) sizes_.push_back(bytes / 4 * 4);
    std::sort(sizes_.begin(), sizes_.end());
    sizes_.erase(std::unique(sizes_.begin(), sizes_.end()), sizes_.end());
    for (std::size_t bytes : sizes_) {
      // 20 calls of a small size in all, fewer of a large one, at least 8:
      // over TCP at 5 Gbit/s single calls of tens of MiB vary by tens of
      // percent, and with 4 the VGG-like network's buckets, posted together,
      // took 0.88 to 1.18 times the sum of the sweep's points of their sizes.
      const int calls = static_cast<int>(std::clamp<std::size_t>((std::size_t(64) << 20) / bytes, 8, 20));
      per_round_.push_back((calls + rounds - 1) / rounds);
      buffers_.emplace_back(bytes / 4);
      check(buffers_.back());
    }
    seconds_[0].resize(sizes_.size());
    seconds_[1].resize(sizes_.size());
  }

  // One round: every size, blocking and not, its share of the calls.
  void round() {
    for (std::size_t i = 0; i < sizes_.size(); ++i)
      for (bool blocking : {true, false}) {
        const double t =
            mean_of_fastest_rank(c_, per_round_[i], [&] { allreduce_once(c_.comm, buffers_[i], blocking); });
        seconds_[blocking].at(i).push_back(t);
      }
  }

  Json summary() const {
    Json j = {{"blocking", Json::array()}, {"nonblocking", Json::array()}};
    for (std::size_t i = 0; i < sizes_.size(); ++i)
      for (bool blocking : {true, false})
        j[blocking ? "blocking" : "nonblocking"].push_back(
            {{"bytes", sizes_[i]}, {"seconds", mean(seconds_[blocking][i])}});
    return j;
  }

 private:
  // Both calls' sums on a first call of each; the buffer then stays 0, so the
  // sums of the timed calls stay exact.
  void check(std::vector<float>& buf) {
    for (bool blocking : {true, false}) {
      std::fill(buf.begin(), buf.end(), 1.0f);
      allreduce_once(c_.comm, buf, blocking);
      const auto ranks = static_cast<float>(c_.comm.size());
      if (buf[buf.size() / 2] != ranks || buf.back() != ranks)
        fail("step_profile: all-reduce of " + std::to_string(buf.size()) + " floats gave a wrong sum");
    }
    std::fill(buf.begin(), buf.end(), 0.0f);
  }

  Context& c_;
  std::vector<std::size_t> sizes_;
  std::vector<int> per_round_;
  std::vector<std::vector<float>> buffers_;
  std::vector<std::vector<double>> seconds_[2];  // [blocking][size]: one mean per round
};

// The bucket plan as layers: which layers (indices in backward order) have
// params in each bucket, and the bucket's bytes.
Json bucket_layout(const GradientBuckets& buckets, const std::vector<BackwardLayer>& layers) {
  std::map<const Param*, std::size_t> layer_of;
  for (std::size_t i = 0; i < layers.size(); ++i)
    for (const Param* p : layers[i].params) layer_of[p] = i;
  Json out = Json::array();
  const auto sizes = buckets.bucket_sizes_bytes();
  for (std::size_t b = 0; b < buckets.bucket_count(); ++b) {
    std::vector<std::size_t> idx;
    for (const Param* p : buckets.bucket_params(b)) {
      auto it = layer_of.find(p);
      if (it == layer_of.end()) fail("step_profile: a bucketed param belongs to no layer backward reports");
      if (idx.empty() || idx.back() != it->second) idx.push_back(it->second);
    }
    out.push_back({{"bytes", sizes[b]}, {"layers", idx}});
  }
  return out;
}

// Part 3, a block of `steps` steps of one bucket size, with a bucketer of
// its own (built outside the timing; it copies the gradients, so its buffer
// is touched before): the bucketed all-reduce alone (all gradients ready at
// once, after a step's computation, timed as the sweep's calls are; sum
// checked on a first call), then training steps with the all-reduce
// overlapped as the trainer does it, back to back as in training and timed
// as a block (slowest rank's mean), so the skew of leaving a barrier is not
// counted in every step; forward, backward, wait and update are rank 0's per
// step.
struct ConfigTimes {
  double bucket_mib = 0;
  Json layout;
  std::vector<double> alone, step, forward, backward, wait, update, hidden;
};

void allreduce_all(GradientBuckets& buckets, const std::vector<Param*>& params) {
  for (auto it = params.rbegin(); it != params.rend(); ++it) buckets.mark_ready({*it});
  buckets.finish();
}

void overlapped_block(Context& c, ConfigTimes& ct, int steps, bool record) {
  GradientBuckets buckets(c.net.params(), c.comm, static_cast<std::size_t>(ct.bucket_mib * (1 << 20)));
  if (ct.layout.is_null()) ct.layout = bucket_layout(buckets, c.layers);
  auto params = c.net.params();
  for (Param* p : params) std::fill_n(p->grad.data<float>(), p->grad.numel(), 1.0f);
  allreduce_all(buckets, params);
  for (Param* p : params)
    if (p->grad.data<float>()[p->grad.numel() - 1] != static_cast<float>(c.comm.size()))
      fail("step_profile: the bucketed all-reduce gave a wrong sum");
  const double alone = mean_of_fastest_rank(c, steps, [&] { allreduce_all(buckets, params); });
  const double hidden_alone = buckets.hidden_share();
  Tensor dlogits;
  std::vector<double> v[4];
  c.comm.barrier("step_profile");
  const auto t0 = Clock::now();
  for (int k = 0; k < steps; ++k) {
    const auto s0 = Clock::now();
    forward_loss(c, dlogits);
    v[0].push_back(since(s0));
    c.net.backward(dlogits, [&](const std::vector<Param*>& ready) { buckets.mark_ready(ready); });
    v[1].push_back(since(s0) - v[0].back());
    buckets.finish();
    v[2].push_back(since(s0) - v[0].back() - v[1].back());
    c.opt.step(c.net.params(), 1e-4);
    v[3].push_back(since(s0) - v[0].back() - v[1].back() - v[2].back());
  }
  const double step = since(t0) / steps;
  const double slowest_step = c.comm.allreduce_max(step);
  if (!record) return;
  ct.alone.push_back(alone);
  ct.step.push_back(slowest_step);
  for (int k = 0; k < steps; ++k) {
    ct.forward.push_back(v[0][k]);
    ct.backward.push_back(v[1][k]);
    ct.wait.push_back(v[2][k]);
    ct.update.push_back(v[3][k]);
  }
  // hidden_share() counts every finish(): 1 + steps alone, then the training steps.
  const double n_alone = 1.0 + steps;
  ct.hidden.push_back((buckets.hidden_share() * (n_alone + steps) - hidden_alone * n_alone) / steps);
}

Json config_summary(const Context& c, const ConfigTimes& ct) {
  const double alone = mean(ct.alone), wait = mean(ct.wait);
  return {{"bucket_mib", ct.bucket_mib},
          {"buckets", ct.layout},
          {"allreduce_s", alone},
          {"step_s", mean(ct.step)},
          {"forward_s", mean(ct.forward)},
          {"backward_s", mean(ct.backward)},
          {"wait_s", wait},
          {"update_s", mean(ct.update)},
          {"hidden_share", mean(ct.hidden)},
          {"hidden_time_share", c.comm.size() == 1 ? 1.0 : std::max(0.0, 1.0 - wait / std::max(alone, 1e-12))}};
}

int run(int argc, char** argv) {
  Communicator comm;
  const Args a = parse_args(argc, argv);
  keep_freed_tensor_memory_mapped();  // as the dlscale command line does
  set_cpu_threads(1);
  Network net(read_spec(a.config), DType::f32, 1);
  SolverOptions solver;
  solver.solver = read_solver(a.config);
  auto opt = make_optimizer(solver);
  Context c{comm, net, *opt, random_batch(net, a.batch, comm.rank()), backward_layers(net)};
  std::size_t grad_bytes = 0;
  for (const auto& l : c.layers) grad_bytes += l.grad_bytes;

  Json out = {{"config", a.config}, {"ranks", comm.size()}, {"local_batch", a.batch}, {"repetitions", a.reps},
              {"rounds", a.rounds}, {"solver", solver.solver}, {"threads_per_rank", 1}, {"grad_bytes", grad_bytes},
              // CPU ranks over MPI: a non-blocking all-reduce advances only
              // inside MPI calls (GradientBuckets polls between layers).
              {"allreduce_progress", "polled"}};
  // Parts 1, 2 and 3 take turns in rounds, so that a slow spell of a shared
  // machine falls on the profile, the all-reduces and every bucket size alike.
  std::vector<std::vector<double>> profile_t;
  std::vector<int> slowest(comm.size());
  std::vector<ConfigTimes> times;
  for (double mib : a.bucket_mib) times.push_back({mib, {}, {}, {}, {}, {}, {}, {}, {}});
  // A warm-up round (one step each; it finds the bucket layouts, which part
  // 2 measures too), then `rounds` recorded ones of reps/rounds steps each.
  profile_step(c, profile_t, slowest, false);
  for (auto& ct : times) overlapped_block(c, ct, 1, false);
  std::vector<std::size_t> bucket_bytes;
  for (const auto& ct : times)
    for (const auto& b : ct.layout) bucket_bytes.push_back(b.at("bytes").get<std::size_t>());
  AllreduceSweep sweep(c, a.max_allreduce_mib, bucket_bytes, a.rounds);
  const int block = std::max(1, a.reps / a.rounds);
  for (int round = 0; round < a.rounds; ++round) {
    for (int k = 0; k < block; ++k) profile_step(c, profile_t, slowest, true);
    for (auto& ct : times) overlapped_block(c, ct, block, true);
    sweep.round();
  }
  if (comm.rank() != 0) return 0;
  Json profile = profile_summary(c, profile_t, slowest);
  Json configs = Json::array();
  for (const auto& ct : times) configs.push_back(config_summary(c, ct));
  for (auto& [k, v] : profile.items()) out[k] = v;
  out["allreduce"] = sweep.summary();
  out["configurations"] = configs;
  std::ofstream f(a.output);
  f << out.dump(1) << "\n";
  if (!f) fail("step_profile: cannot write " + a.output);
  std::printf("ranks %d, %s, local batch %d: forward %.3f ms, backward %.3f ms, update %.3f ms, %.2f MB of gradients\n",
              comm.size(), a.config.c_str(), a.batch, out["forward_s"].get<double>() * 1e3,
              out["backward_s"].get<double>() * 1e3, out["update_s"].get<double>() * 1e3, grad_bytes / 1e6);
  for (const auto& cfg : configs)
    std::printf("  buckets %.2f MiB (%zu): step %.3f ms, all-reduce alone %.3f ms, wait %.3f ms, hidden %.2f\n",
                cfg["bucket_mib"].get<double>(), cfg["buckets"].size(), cfg["step_s"].get<double>() * 1e3,
                cfg["allreduce_s"].get<double>() * 1e3, cfg["wait_s"].get<double>() * 1e3,
                cfg["hidden_share"].get<double>());
  std::printf("wrote %s\n", a.output.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return dlscale::bench::run_benchmark("step_profile", run, argc, argv); }
