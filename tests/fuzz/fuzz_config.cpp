// libFuzzer target: the input is a `dlscale train` INI config file. It goes
// through the real option table (launch/train_options.cpp), the solver and
// schedule checks and the model-spec parser (LayerSpec, the registry and
// Network construction). A dlscale::Error is the expected answer to a bad
// file; a crash, a sanitizer report, any other exception or a hang is a bug.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_util.h"
#include "launch/train_options.h"
#include "layers/network.h"
#include "runtime/training/lr_schedule.h"
#include "runtime/training/optimizer.h"

namespace {

// Bounds the work of one input (weights are drawn one by one): the library
// rejects any larger layer with an error naming it, as it does at its real
// limit, so the check itself is fuzzed too.
constexpr std::int64_t kFuzzLayerElements = 1 << 16;
constexpr std::size_t kMaxLayers = 64;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dlscale;
  static const std::string path = fuzz::scratch_dir() + "/config.ini";
  fuzz::write_file(path, data, size);
  try {
    TrainingOptions o = parse_training_options({path});
    validate(o.solver);
    LearnRateSchedule schedule(o.schedule, 7, o.max_epochs);
    (void)schedule.rate(0);
    (void)schedule.rate(7 * static_cast<std::int64_t>(o.max_epochs) - 1);
    if (o.network.layer_lines.size() > kMaxLayers) return 0;
    o.network.max_layer_elements = kFuzzLayerElements;
    const DType dtype = o.training_precision == "double" ? DType::f64 : DType::f32;
    Network net(o.network, dtype, o.seed);
    (void)net.describe();
    (void)net.named_tensors();
    net.set_random_state(net.random_state());
  } catch (const Error& e) {
    // A clear message for a bad config: what the parser is for.
    if (std::getenv("DLSCALE_FUZZ_VERBOSE")) std::fprintf(stderr, "error: %s\n", e.what());
  }
  return 0;
}
