// bench/scaling_model: the step-time model of docs/scaling.md.
//   scaling_model measured PROFILE.json...   predicted against measured step
//       time for every configuration of every profile bench/step_profile wrote
//   scaling_model predict [--option value]...  scaling efficiency of
//       ResNet-50- and VGG-16-sized gradients at 8..512 GPUs on H200-class nodes
//   scaling_model horovod [--option value]...  the same model in Horovod's
//       published setting (ResNet-101, VGG-16, 25 Gbit/s), beside its figures
// Tables are printed as Markdown, as docs/scaling.md shows them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/core/error.h"
#include "scaling_model.h"

namespace {

using namespace dlscale;
using namespace dlscale::bench;
using Json = nlohmann::json;

std::vector<Point> points(const Json& list) {
  std::vector<Point> out;
  for (const auto& p : list) out.push_back({p.at("bytes").get<double>(), p.at("seconds").get<double>()});
  return out;
}

// "alpha A us, 1/beta B GB/s", one such per line of the fit with the sizes it covers.
std::string describe(const AllreduceFit& f) {
  auto kib = [](double bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.0f KiB", bytes / 1024);
    return std::string(text);
  };
  std::string out;
  for (std::size_t k = 0; k < f.lines.size(); ++k) {
    char text[80];
    std::snprintf(text, sizeof text, "alpha %.1f us, 1/beta %.3f GB/s", f.lines[k].alpha * 1e6, 1e-9 / f.lines[k].beta);
    if (f.lines.size() > 1)
      out += (k == 0 ? "below " + kib(f.splits[0])
                     : k < f.splits.size() ? "; " + kib(f.splits[k - 1]) + " to " + kib(f.splits[k])
                                           : "; above " + kib(f.splits[k - 1])) + " ";
    out += text;
  }
  return out;
}

Json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("scaling_model: cannot open " + path);
  try {
    return Json::parse(in);
  } catch (const Json::exception& e) {
    fail("scaling_model: " + path + " is not a step_profile file: " + e.what());
  }
}

// One profile: its fits, then one row per bucket configuration.
void measured_rows(const std::string& path, double& worst_error) {
  const Json j = read_json(path);
  const int ranks = j.at("ranks").get<int>();
  const auto blocking = points(j.at("allreduce").at("blocking")), nonblocking = points(j.at("allreduce").at("nonblocking"));
  // One rank reduces nothing: its sweep times copies of nothing, maybe 0 s.
  const AllreduceFit fb = ranks > 1 ? fit_allreduce(blocking) : AllreduceFit{};
  const AllreduceFit fn = ranks > 1 ? fit_allreduce(nonblocking) : AllreduceFit{};
  std::printf("\n%s (%s): %d rank(s), local batch %d, %.2f MB of gradients\n", path.c_str(),
              j.at("config").get<std::string>().c_str(),
              ranks, j.at("local_batch").get<int>(), j.at("grad_bytes").get<double>() / 1e6);
  if (ranks == 1)
    std::printf("one rank: no all-reduce (the runtime reduces nothing), so no fit\n");
  else
    std::printf("fit MPI_Allreduce: %s (worst residual %.0f%%); MPI_Iallreduce+Wait: %s (worst %.0f%%)\n",
                describe(fb).c_str(), 100 * worst_relative_residual(fb, blocking), describe(fn).c_str(),
                100 * worst_relative_residual(fn, nonblocking));
  std::vector<LayerCost> layers;
  for (const auto& l : j.at("layers"))
    layers.push_back({l.at("name").get<std::string>(), l.at("backward_s").get<double>(), l.at("grad_bytes").get<double>()});
  // The runtime's non-last buckets use MPI_Iallreduce, the last MPI_Allreduce; one rank reduces nothing.
  auto allreduce = [&](double bytes, bool last) { return ranks == 1 ? 0.0 : (last ? fb : fn).at(bytes); };
  // How the ranks' non-blocking all-reduce advances (docs/scaling.md): "polled"
  // (MPI on CPU ranks: only inside MPI calls, which backward makes between
  // layers, so the model reduces every bucket after backward) or "async" (a
  // library that progresses on its own, as NCCL on its stream: the overlap
  // recurrence). Profiles without the field came from CPU ranks.
  const std::string progress = j.value("allreduce_progress", std::string("polled"));
  if (progress != "polled" && progress != "async")
    fail("scaling_model: " + path + ": allreduce_progress must be polled or async, not " + progress);
  const bool overlap = progress == "async";
  std::printf("all-reduce progress: %s (predicted with %s)\n\n", progress.c_str(),
              overlap ? "the overlap recurrence" : "every bucket reduced after backward");
  std::printf("| ranks | bucket MiB | buckets | measured step ms | predicted ms | error | %s prediction ms "
              "| all-reduce alone measured / predicted ms | hidden share measured / predicted with overlap |\n",
              overlap ? "no-overlap" : "overlap-recurrence");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& cfg : j.at("configurations")) {
    std::vector<Bucket> buckets;
    for (const auto& b : cfg.at("buckets"))
      buckets.push_back({b.at("bytes").get<double>(), b.at("layers").get<std::vector<std::size_t>>()});
    const double forward = j.at("forward_s").get<double>(), update = j.at("update_s").get<double>();
    const StepPrediction overlapped = predict_step(forward, layers, update, buckets, allreduce, true);
    const StepPrediction serial = predict_step(forward, layers, update, buckets, allreduce, false);
    const StepPrediction& p = overlap ? overlapped : serial;
    const StepPrediction& other = overlap ? serial : overlapped;
    const double measured = cfg.at("step_s").get<double>(), error = (p.step - measured) / measured;
    worst_error = std::max(worst_error, std::abs(error));
    const double hidden =
        overlapped.comm_total > 0 ? std::max(0.0, 1 - overlapped.exposed / overlapped.comm_total) : 1;
    std::printf("| %d | %g | %zu | %.3f | %.3f | %+.1f%% | %.3f | %.3f / %.3f | %.2f / %.2f |\n", ranks,
                cfg.at("bucket_mib").get<double>(), buckets.size(), measured * 1e3, p.step * 1e3, 100 * error,
                other.step * 1e3, cfg.at("allreduce_s").get<double>() * 1e3, p.comm_total * 1e3,
                cfg.at("hidden_time_share").get<double>(), hidden);
  }
}

int measured(int argc, char** argv) {
  if (argc < 3) fail("usage: scaling_model measured PROFILE.json...");
  double worst = 0;
  for (int i = 2; i < argc; ++i) try {
      measured_rows(argv[i], worst);
    } catch (const Json::exception& e) {
      fail("scaling_model: " + std::string(argv[i]) + " is not a step_profile file: " + e.what());
    }
  std::printf("\nlargest prediction error: %.1f%% (goal: within 10%%)\n", 100 * worst);
  return 0;
}

}  // namespace

int predict(int argc, char** argv);  // scaling_model_predict.cpp
int horovod(int argc, char** argv);

int main(int argc, char** argv) {
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "measured") return measured(argc, argv);
    if (cmd == "predict") return predict(argc, argv);
    if (cmd == "horovod") return horovod(argc, argv);
    fail("usage: scaling_model measured PROFILE.json... | scaling_model predict|horovod [--option value]...");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scaling_model: error: %s\n", e.what());
    return 1;
  }
}
