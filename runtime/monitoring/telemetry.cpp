// Per-rank resource sampling and RUN/telemetry.jsonl (see telemetry.h).
#include "runtime/monitoring/telemetry.h"

#include <dlfcn.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "runtime/core/error.h"
#include "runtime/parallel/link_probe.h"

namespace dlscale {

namespace {

// A "Key:   123 kB" line of /proc/self/status, in MiB; 0 when absent.
double status_mib(const char* key) {
  std::ifstream in("/proc/self/status");
  const std::string prefix = std::string(key) + ":";
  for (std::string line; std::getline(in, line);)
    if (line.compare(0, prefix.size(), prefix) == 0) return std::stod(line.substr(prefix.size())) / 1024.0;
  return 0;
}

// Rounded for a readable file: figures this coarse are all a monitor needs.
double rounded(double v, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;  // dividing by a power of ten prints short (0.021, not 0.0209999...)
}

// NVML's C interface, the few calls used, resolved once.
struct Nvml {
  using Device = void*;
  struct Utilization {
    unsigned int gpu, memory;
  };
  struct Memory {
    unsigned long long total, free, used;
  };
  int (*get_handle)(unsigned int, Device*) = nullptr;
  int (*get_utilization)(Device, Utilization*) = nullptr;
  int (*get_memory)(Device, Memory*) = nullptr;
  bool ready = false;

  Nvml() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    get_handle = reinterpret_cast<decltype(get_handle)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    get_utilization = reinterpret_cast<decltype(get_utilization)>(dlsym(lib, "nvmlDeviceGetUtilizationRates"));
    get_memory = reinterpret_cast<decltype(get_memory)>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
    ready = init && get_handle && get_utilization && get_memory && init() == 0;  // 0: NVML_SUCCESS
  }
};

}  // namespace

double resident_memory_mib() { return status_mib("VmRSS"); }

double peak_resident_memory_mib() {
  if (double hwm = status_mib("VmHWM"); hwm > 0) return hwm;
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // kB on Linux
}

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

std::optional<DeviceFigures> nvml_device_figures(int index) {
  static Nvml nvml;
  Nvml::Device device = nullptr;
  Nvml::Utilization u{};
  Nvml::Memory m{};
  if (!nvml.ready || index < 0 || nvml.get_handle(static_cast<unsigned>(index), &device) != 0 ||
      nvml.get_utilization(device, &u) != 0 || nvml.get_memory(device, &m) != 0)
    return std::nullopt;
  return DeviceFigures{static_cast<double>(u.gpu), static_cast<double>(m.used) / (1 << 20)};
}

int nvml_index(const std::string& visible_devices, int gpu_index) {
  std::vector<std::string> ids;
  std::stringstream in(visible_devices);
  for (std::string id; std::getline(in, id, ',');) ids.push_back(id);
  if (gpu_index >= 0 && gpu_index < static_cast<int>(ids.size())) {
    const std::string& id = ids[gpu_index];
    // A UUID (GPU-...) cannot be mapped without NVML's lookup: keep the CUDA index.
    if (!id.empty() && id.find_first_not_of("0123456789") == std::string::npos) return std::stoi(id);
  }
  return gpu_index;
}

std::string telemetry_line(const TelemetryRecord& r) {
  // Keys in the documented order, for people reading the file.
  using Json = nlohmann::ordered_json;
  Json ranks = Json::array();
  for (const auto& s : r.ranks)
    ranks.push_back({{"rank", s.rank},
                     {"host", s.host},
                     {"device", s.device},
                     {"step_time_s", rounded(s.step_time_s, 6)},
                     {"compute_time_s", rounded(s.compute_time_s, 6)},
                     {"samples_per_second", rounded(s.samples_per_second, 1)},
                     {"utilization_pct", rounded(s.utilization_pct, 1)},
                     {"memory_mib", rounded(s.memory_mib, 1)},
                     {"device_memory_mib",
                      s.device_memory_mib ? Json(rounded(*s.device_memory_mib, 1)) : Json()}});
  Json stragglers = Json::array();
  for (const auto& s : r.stragglers)
    stragglers.push_back({{"rank", s.rank},
                          {"host", s.host},
                          {"whole_node", s.whole_node},
                          {"excess_s", rounded(s.excess_s, 6)},
                          {"excess_pct", rounded(s.excess_ratio * 100, 1)},
                          {"step_time_s", rounded(s.step_s, 6)}});
  Json line = {{"time_s", rounded(r.time_s, 2)},
               {"iteration", r.iteration},
               {"ranks", ranks},
               {"stragglers", stragglers}};
  if (!r.links.empty()) {
    Json links = Json::array(), slow = Json::array();
    for (const auto& l : r.links)
      links.push_back({{"host", l.host}, {"upload_s", rounded(l.upload_s, 6)}, {"download_s", rounded(l.download_s, 6)}});
    for (const auto& s : r.link_stragglers)
      slow.push_back({{"host", s.host},
                      {"ranks", s.ranks},
                      {"cost_s", rounded(s.cost_s, 6)},
                      {"step_time_s", rounded(s.step_s, 6)},
                      {"probe_s", rounded(s.probe_s, 6)},
                      {"fastest_probe_s", rounded(s.fastest_probe_s, 6)}});
    line["links"] = links;
    line["link_stragglers"] = slow;
  }
  return line.dump();
}

TelemetryRecord parse_telemetry_line(const std::string& text) {
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    TelemetryRecord r;
    r.time_s = j.at("time_s").get<double>();
    r.iteration = j.at("iteration").get<std::int64_t>();
    for (const auto& s : j.at("ranks")) {
      RankSample k;
      k.rank = s.at("rank").get<int>();
      k.host = s.at("host").get<std::string>();
      k.device = s.at("device").get<std::string>();
      k.step_time_s = s.at("step_time_s").get<double>();
      // Lines written before compute time was measured: no wait known.
      k.compute_time_s = s.contains("compute_time_s") ? s["compute_time_s"].get<double>() : k.step_time_s;
      k.samples_per_second = s.at("samples_per_second").get<double>();
      k.utilization_pct = s.at("utilization_pct").get<double>();
      k.memory_mib = s.at("memory_mib").get<double>();
      if (s.contains("device_memory_mib") && !s["device_memory_mib"].is_null())
        k.device_memory_mib = s["device_memory_mib"].get<double>();
      r.ranks.push_back(std::move(k));
    }
    if (j.contains("stragglers"))
      for (const auto& s : j["stragglers"]) {
        Straggler k;
        k.rank = s.at("rank").get<int>();
        k.host = s.at("host").get<std::string>();
        k.whole_node = s.at("whole_node").get<bool>();
        k.excess_s = s.at("excess_s").get<double>();
        k.excess_ratio = s.at("excess_pct").get<double>() / 100;
        k.step_s = s.at("step_time_s").get<double>();
        r.stragglers.push_back(std::move(k));
      }
    if (j.contains("links"))
      for (const auto& l : j["links"])
        r.links.push_back({l.at("host").get<std::string>(), l.at("upload_s").get<double>(), l.at("download_s").get<double>()});
    if (j.contains("link_stragglers"))
      for (const auto& s : j["link_stragglers"])
        r.link_stragglers.push_back({s.at("host").get<std::string>(), s.at("ranks").get<std::vector<int>>(),
                                     s.at("cost_s").get<double>(), s.at("step_time_s").get<double>(),
                                     s.at("probe_s").get<double>(), s.at("fastest_probe_s").get<double>()});
    return r;
  } catch (const nlohmann::json::exception& e) {
    fail("not a telemetry record (" + std::string(e.what()) + "): " + text.substr(0, 200));
  }
}

double default_telemetry_window_s() {
  const char* v = std::getenv("DLSCALE_TELEMETRY_WINDOW");
  if (!v || !*v) return Telemetry::kMinWindowS;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (*end != '\0' || !(s >= 0 && s <= 3600))
    fail("DLSCALE_TELEMETRY_WINDOW=" + std::string(v) + " is not a number of seconds from 0 to 3600");
  return s;
}

Telemetry::Telemetry(Communicator& comm, const JobSetup& job, const std::string& file, bool writer, bool append,
                     double interval_s, double min_window_s)
    : comm_(comm), job_(job), interval_s_(interval_s), min_window_s_(min_window_s) {
  // The computing communicator keeps the job's rank order (split by rank).
  for (std::size_t r = 0; r < job.plan.ranks.size(); ++r)
    if (job.plan.ranks[r].computes) world_ranks_.push_back(static_cast<int>(r));
  if (static_cast<int>(world_ranks_.size()) != comm.size()) world_ranks_.clear();  // a communicator of its own
  const int me = world_ranks_.empty() ? comm.rank() : world_ranks_[comm.rank()];
  if (me < static_cast<int>(job.threads.size())) threads_ = std::max(1, job.threads[me]);
  if (me < static_cast<int>(job.plan.ranks.size()) && job.plan.ranks[me].device.rfind("gpu", 0) == 0)
    gpu_ = nvml_index(job.ranks[me].visible_devices, job.plan.ranks[me].gpu_index);
  if (!world_ranks_.empty() && !job.plan.all_gpu()) {
    std::set<std::string> distinct;
    for (int r : world_ranks_) probe_hosts_.push_back(job.ranks[r].host), distinct.insert(job.ranks[r].host);
    if (distinct.size() < 3) probe_hosts_.clear();
  }
  if (!writer) return;
  out_.open(file, append ? std::ios::app : std::ios::trunc);
  if (!out_) fail("cannot write " + file);
}

void Telemetry::step_done(std::int64_t local_samples, double wait_s) {
  step_seconds_ += seconds(last_step_end_);
  wait_seconds_ += wait_s;
  ++steps_;
  samples_ += local_samples;
}

Telemetry::Figures Telemetry::figures() const {
  const double wall = seconds(window_start_), cpu = process_cpu_seconds() - cpu_at_window_start_;
  Figures f = {steps_ > 0 ? step_seconds_ / static_cast<double>(steps_) : 0,
               step_seconds_ > 0 ? static_cast<double>(samples_) / step_seconds_ : 0,
               wall > 0 ? cpu / wall / threads_ * 100 : 0,
               resident_memory_mib(),
               std::numeric_limits<double>::quiet_NaN(),
               wall,
               steps_ > 0 ? std::max(step_seconds_ - wait_seconds_, 0.0) / static_cast<double>(steps_) : 0,
               static_cast<double>(steps_)};
  if (gpu_)
    if (auto d = nvml_device_figures(*gpu_)) f[2] = d->utilization_pct, f[4] = d->memory_used_mib;
  return f;
}

void Telemetry::sample(double time_s, std::int64_t iteration) {
  if (iteration == last_iteration_) return;  // same on every rank: the collectives stay matched
  last_iteration_ = iteration;
  pending_ = figures(), pending_time_s_ = time_s, pending_iteration_ = iteration;
  // The shortest window of any rank decides, the same on every rank.
  const double shortest = -comm_.allreduce_max(-(*pending_)[5]);
  if (shortest >= min_window_s_) publish();
}

void Telemetry::publish() {
  // Between two windows: this one's figures are taken, and the probe's time
  // is kept out of the next step's too.
  std::vector<LinkTimes> probes;
  if (!probe_hosts_.empty()) {
    const auto t0 = Clock::now();
    probes = probe_links(comm_, probe_hosts_, kLinkProbeBytes);
    last_step_end_ += Clock::now() - t0;
  }
  const std::vector<double> all = comm_.gather(pending_->data(), static_cast<int>(pending_->size()), 0);
  pending_.reset();
  window_start_ = Clock::now(), cpu_at_window_start_ = process_cpu_seconds();
  step_seconds_ = 0, wait_seconds_ = 0, steps_ = 0, samples_ = 0;
  if (!out_.is_open()) return;
  TelemetryRecord record{pending_time_s_, pending_iteration_, {}, {}, {}, {}};
  std::vector<RankWindow> windows;
  std::int64_t steps = 0;  // the same on every rank: steps are synchronous
  for (int r = 0; r < comm_.size(); ++r) {
    const double* v = all.data() + std::tuple_size_v<Figures> * static_cast<std::size_t>(r);
    const int job_rank = world_ranks_.empty() ? r : world_ranks_[r];
    RankSample s;
    s.rank = job_rank;
    if (job_rank < static_cast<int>(job_.ranks.size())) s.host = job_.ranks[job_rank].host;
    if (job_rank < static_cast<int>(job_.plan.ranks.size())) s.device = job_.plan.ranks[job_rank].device;
    s.step_time_s = v[0], s.samples_per_second = v[1], s.utilization_pct = v[2], s.memory_mib = v[3];
    if (!std::isnan(v[4])) s.device_memory_mib = v[4];
    s.compute_time_s = v[6];
    windows.push_back({s.rank, s.host, s.step_time_s, s.compute_time_s});
    steps = std::max(steps, static_cast<std::int64_t>(v[7]));
    record.ranks.push_back(std::move(s));
  }
  for (const auto& line : detector_.observe(windows, steps, pending_time_s_))
    if (say_) say_(line);
  record.stragglers = detector_.current();
  if (!probes.empty()) {
    for (const auto& p : probes) record.links.push_back({p.host, p.upload_s, p.download_s});
    for (const auto& line : link_detector_.observe(record.links, windows, steps, pending_time_s_))
      if (say_) say_(line);
    record.link_stragglers = link_detector_.current();
  }
  out_ << telemetry_line(record) << "\n";
  out_.flush();  // dlscale monitor reads it while the run goes on
}

std::vector<double> Telemetry::gather_peak_memory() {
  if (pending_) publish();  // every rank has one or none: their samples and decisions matched
  const double peak = peak_resident_memory_mib();
  return comm_.gather(&peak, 1, 0);
}

}  // namespace dlscale
