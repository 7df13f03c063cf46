// The option table of `dlscale train` and its conversion to TrainingOptions.
#include "launch/train_options.h"

#include "launch/parse_options.h"

#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace dlscale {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

struct OptionRow {
  const char* name;
  const char* fallback;  // nullptr: no default (optional)
  const char* help;
};

// The order here is the order of the resolved config.ini.
const OptionRow kOptions[] = {
    {"train-data", nullptr, "training dataset folder (from dlscale shard)"},
    {"validation-data", nullptr, "validation dataset folder"},
    {"test-data", nullptr, "test dataset folder, evaluated once after training"},
    {"staged-data", "false", "true: the data folders are node-local copies by `dlscale stage`; refuse unverified ones"},
    {"input", nullptr, "network input shape per sample, e.g. 1x28x28"},
    {"solver", "sgdm", "sgdm | adam | rmsprop"},
    {"max-epochs", "30", "passes over the training data"},
    {"mini-batch-size", "128", "global mini-batch size, split across the computing ranks"},
    {"initial-learn-rate", "0.01", "learning rate at the start (after warm-up)"},
    {"learn-rate-schedule", "none", "none | piecewise | cosine"},
    {"learn-rate-drop-factor", "0.1", "piecewise: factor applied every drop period"},
    {"learn-rate-drop-period", "10", "piecewise: epochs between drops"},
    {"min-learn-rate", "0", "cosine: final learning rate"},
    {"warmup-iterations", "0", "linear learning-rate warm-up, in iterations"},
    {"momentum", "0.9", "sgdm momentum"},
    {"gradient-decay-factor", "0.9", "adam: first-moment decay"},
    {"squared-gradient-decay-factor", "", "adam (default 0.999) and rmsprop (default 0.9)"},
    {"epsilon", "1e-8", "adam and rmsprop denominator offset"},
    {"l2-regularization", "0.0001", "L2 weight decay factor"},
    {"gradient-threshold", "inf", "clip gradients whose norm exceeds this"},
    {"gradient-threshold-method", "l2norm", "l2norm (per parameter) | global-l2norm"},
    {"shuffle", "once", "once | every-epoch | never"},
    {"augment-crop-padding", "0",
     "training images: pad each side with this many zeros and crop back at a random offset (0: off)"},
    {"augment-horizontal-flip", "false", "training images: mirror left-right with probability 1/2"},
    {"validation-frequency", "50", "iterations between validations"},
    {"validation-patience", "inf", "validations without a lower loss before training stops"},
    {"verbose", "true", "print the progress table"},
    {"verbose-frequency", "50", "iterations between progress rows"},
    {"output", nullptr, "run directory (default runs/<config name>-<time>)"},
    {"checkpoint-path", nullptr, "checkpoint folder (default <output>/checkpoints)"},
    {"checkpoint-frequency", "0", "checkpoint every N epochs or iterations (0: never)"},
    {"checkpoint-frequency-unit", "epoch", "epoch | iteration"},
    {"checkpoint-minutes", "0", "also checkpoint when this many minutes passed since the last one (0: off)"},
    {"checkpoint-keep", "0", "keep only the newest K checkpoints (0: all)"},
    {"resume", nullptr, "auto (newest valid checkpoint of the run) or a checkpoint file"},
    {"overwrite", "false", "a fresh run into a folder holding earlier checkpoints moves them to set-aside/"},
    {"execution-environment", "auto", "auto | cpu | gpu | multi-gpu | parallel-auto | parallel-cpu | parallel-gpu"},
    {"training-precision", "single", "single | double | automatic-mixed"},
    {"mixed-precision-type", "fp16",
     "automatic-mixed: fp16 | bf16, the math of dense and conv2d layers (float32 master weights)"},
    {"loss-scaling", "auto",
     "auto (dynamic under automatic-mixed with fp16) | none | dynamic: skip steps whose gradients overflow"},
    {"initial-loss-scale", "65536", "dynamic loss scaling: the scale at the start"},
    {"loss-scale-growth-interval", "2000", "dynamic loss scaling: good steps in a row before the scale doubles"},
    {"seed", "0", "seed of initialization, shuffling and dropout"},
    {"deterministic", "false", "bitwise-reproducible results for a fixed seed and rank count"},
    {"threads", "0", "CPU threads per rank (0: the CPUs this rank may use)"},
    {"gradient-bucket-size", "25", "MiB per gradient all-reduce bucket (the first is at most 1 MiB)"},
    {"collective-timeout", "600", "seconds a rank waits in a collective before it ends the job (0: no limit)"},
    {"checkpoint-timeout", "3600", "seconds the other ranks wait for rank 0 to write a checkpoint (0: no limit)"},
};

po::options_description option_table() {
  po::options_description desc("dlscale train options (same names on the command line and in the config file)");
  for (const auto& row : kOptions) {
    auto* value = po::value<std::string>();
    if (row.fallback) value->default_value(row.fallback);
    desc.add_options()(row.name, value, row.help);
  }
  desc.add_options()("layer", po::value<std::vector<std::string>>(),
                     "one network layer, repeated in order, e.g. \"conv2d filters=16 kernel=3 padding=same\"");
  return desc;
}

class Reader {
 public:
  explicit Reader(const po::variables_map& vm) : vm_(vm) {}
  bool has(const char* name) const { return vm_.count(name) && !vm_[name].as<std::string>().empty(); }
  std::string str(const char* name) const { return has(name) ? vm_[name].as<std::string>() : ""; }
  double number(const char* name) const {
    auto v = str(name);
    try {
      std::size_t used = 0;
      double d = std::stod(v, &used);
      if (used == v.size()) return d;
    } catch (const std::exception&) {
    }
    throw UsageError("option " + std::string(name) + ": '" + v + "' is not a number");
  }
  // Most options end up in an int; a value past `max` is refused rather than
  // cut to a different number (or, past 2^63, undefined behaviour).
  std::int64_t integer(const char* name, std::int64_t min,
                       std::int64_t max = std::numeric_limits<int>::max()) const {
    double d = number(name);
    if (std::isinf(d) && d > 0) return std::numeric_limits<int>::max();
    if (d != std::floor(d) || d < static_cast<double>(min) || d > static_cast<double>(max))
      throw UsageError("option " + std::string(name) + ": '" + str(name) + "' must be an integer from " +
                       std::to_string(min) + " to " + std::to_string(max));
    return static_cast<std::int64_t>(d);
  }
  bool flag(const char* name) const {
    auto v = str(name);
    if (v == "true" || v == "1" || v == "yes" || v == "on") return true;
    if (v == "false" || v == "0" || v == "no" || v == "off") return false;
    throw UsageError("option " + std::string(name) + ": '" + v + "' is not true or false");
  }
  std::string path(const char* name) const {
    if (!has(name)) return "";
    return fs::absolute(str(name)).lexically_normal().string();
  }

 private:
  const po::variables_map& vm_;
};

std::string default_output(const std::string& config_path) {
  auto stem = config_path.empty() ? std::string("run") : fs::path(config_path).stem().string();
  auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return fs::absolute("runs/" + stem + "-" + stamp).string();
}

// The resolved options as a config file `dlscale train` accepts as is.
std::string resolved_config(const po::variables_map& vm, const TrainingOptions& o) {
  std::ostringstream out;
  out << "# resolved by dlscale train; rerun with: dlscale train config.ini\n";
  Reader r(vm);
  for (const auto& row : kOptions) {
    std::string name = row.name, value = r.str(row.name);
    if (name == "train-data") value = o.train_data;
    if (name == "validation-data") value = o.validation_data;
    if (name == "test-data") value = o.test_data;
    if (name == "output") value = o.output;
    if (name == "checkpoint-path") value = o.checkpoint_path;
    if (name == "resume" || name == "staged-data") continue;  // how this run started or reads, not what it trains
    if (!value.empty()) out << name << " = " << value << "\n";
  }
  for (const auto& layer : o.network.layer_lines) out << "layer = " << layer << "\n";
  return out.str();
}

void fill_options(const Reader& r, TrainingOptions& o) {
  o.train_data = r.path("train-data");
  o.validation_data = r.path("validation-data");
  o.test_data = r.path("test-data");
  o.staged_data = r.flag("staged-data");
  o.solver.solver = r.str("solver");
  o.solver.momentum = r.number("momentum");
  o.solver.gradient_decay = r.number("gradient-decay-factor");
  o.solver.squared_gradient_decay = r.has("squared-gradient-decay-factor")
                                        ? r.number("squared-gradient-decay-factor")
                                        : (o.solver.solver == "rmsprop" ? 0.9 : 0.999);
  o.solver.epsilon = r.number("epsilon");
  o.solver.l2_regularization = r.number("l2-regularization");
  o.solver.gradient_threshold = r.number("gradient-threshold");
  o.solver.gradient_threshold_method = r.str("gradient-threshold-method");
  o.schedule.initial_learn_rate = r.number("initial-learn-rate");
  o.schedule.schedule = r.str("learn-rate-schedule");
  o.schedule.drop_factor = r.number("learn-rate-drop-factor");
  o.schedule.drop_period = static_cast<int>(r.integer("learn-rate-drop-period", 1));
  o.schedule.min_learn_rate = r.number("min-learn-rate");
  o.schedule.warmup_iterations = r.integer("warmup-iterations", 0);
  o.max_epochs = static_cast<int>(r.integer("max-epochs", 1));
  o.mini_batch_size = r.integer("mini-batch-size", 1);
  try {
    o.shuffle = parse_shuffle(r.str("shuffle"));
  } catch (const Error& e) {
    throw UsageError(std::string("option shuffle: ") + e.what());
  }
  o.augment.crop_padding = r.integer("augment-crop-padding", 0, 4096);
  o.augment.horizontal_flip = r.flag("augment-horizontal-flip");
  o.validation_frequency = r.integer("validation-frequency", 1);
  o.validation_patience = static_cast<int>(r.integer("validation-patience", 1));
  o.verbose = r.flag("verbose");
  o.verbose_frequency = r.integer("verbose-frequency", 1);
  o.checkpoint_path = r.path("checkpoint-path");
  o.checkpoint_frequency = r.integer("checkpoint-frequency", 0);
  o.checkpoint_frequency_unit = r.str("checkpoint-frequency-unit");
  if (o.checkpoint_frequency_unit != "epoch" && o.checkpoint_frequency_unit != "iteration")
    throw UsageError("option checkpoint-frequency-unit: '" + o.checkpoint_frequency_unit +
                     "' (expected epoch or iteration)");
  o.checkpoint_minutes = r.number("checkpoint-minutes");
  o.checkpoint_keep = static_cast<int>(r.integer("checkpoint-keep", 0));
  o.resume = r.str("resume");
  if (!o.resume.empty() && o.resume != "auto") o.resume = r.path("resume");
  o.overwrite = r.flag("overwrite");
  o.execution_environment = r.str("execution-environment");
  o.training_precision = r.str("training-precision");
  o.mixed_precision_type = r.str("mixed-precision-type");
  if (o.mixed_precision_type != "fp16" && o.mixed_precision_type != "bf16")
    throw UsageError("option mixed-precision-type: '" + o.mixed_precision_type + "' (expected fp16 or bf16)");
  o.loss_scale.mode = r.str("loss-scaling");
  o.loss_scale.initial_scale = r.number("initial-loss-scale");
  o.loss_scale.growth_interval = r.integer("loss-scale-growth-interval", 1);
  try {
    validate(o.loss_scale);
  } catch (const Error& e) {
    throw UsageError(std::string("option ") + e.what());
  }
  o.seed = static_cast<std::uint64_t>(r.integer("seed", 0, std::int64_t{1} << 53));  // exact in a double
  o.deterministic = r.flag("deterministic");
  o.threads = static_cast<int>(r.integer("threads", 0));
  o.gradient_bucket_mib = r.number("gradient-bucket-size");
  o.collective_timeout_s = r.number("collective-timeout");
  o.checkpoint_timeout_s = r.number("checkpoint-timeout");
  if (!(o.gradient_bucket_mib > 0)) throw UsageError("option gradient-bucket-size must be a positive number of MiB");
}

}  // namespace

std::string training_options_help() {
  std::ostringstream out;
  out << "usage: dlscale train CONFIG.ini [--option value ...]\n\n" << option_table();
  return out.str();
}

std::vector<std::string> training_option_names() {
  std::vector<std::string> names;
  for (const auto& row : kOptions) names.push_back(row.name);
  names.push_back("layer");
  return names;
}

namespace {

// comm: the ranks that must agree on a default output folder (none: one process).
TrainingOptions parse_options_on(const Args& args, Communicator* comm) {
  po::options_description desc = option_table();
  desc.add_options()("config", po::value<std::string>(), "INI config file");
  po::positional_options_description positional;
  positional.add("config", 1);
  po::variables_map vm;
  try {
    parse_options(args, desc, vm, &positional);
    if (vm.count("config")) {
      const auto path = vm["config"].as<std::string>();
      std::ifstream file(path);
      if (!file) throw UsageError("cannot open config file " + path);
      std::stringstream text;
      text << file.rdbuf();
      reject_boost_placeholders(text.str(), path);
      try {
        po::store(po::parse_config_file(text, desc), vm);
      } catch (const po::error& e) {
        throw UsageError(path + ": " + e.what());
      }
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  Reader r(vm);
  TrainingOptions o;
  fill_options(r, o);
  if (o.train_data.empty()) throw UsageError("no training data: set train-data in the config or on the command line");
  if (!r.has("input")) throw UsageError("no network input shape: set input (e.g. input = 1x28x28)");
  const std::string config_path = vm.count("config") ? vm["config"].as<std::string>() : "";
  o.network.source = config_path.empty() ? "command line" : config_path;
  try {
    o.network.input_shape = parse_shape(r.str("input"), "input");
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (vm.count("layer")) o.network.layer_lines = vm["layer"].as<std::vector<std::string>>();
  if (o.augment.enabled() && o.network.input_shape.size() != 3)
    throw UsageError("options augment-crop-padding and augment-horizontal-flip need image samples (input = CxHxW), "
                     "but input = " + r.str("input"));
  o.output = r.path("output");
  if (o.output.empty()) {
    o.output = default_output(config_path);
    if (comm) comm->broadcast(o.output, 0);  // every rank names the same folder
  }
  o.config_text = resolved_config(vm, o);
  return o;
}

}  // namespace

TrainingOptions parse_training_options(const Args& args, Communicator& comm) { return parse_options_on(args, &comm); }

TrainingOptions parse_training_options(const Args& args) { return parse_options_on(args, nullptr); }

}  // namespace dlscale
