// dlscale generate: samples text from a trained byte-level language model
// (a network on T token ids ending in a T×256 softmax, causal attention).
#include <boost/program_options.hpp>
#include <cmath>
#include <iostream>

#include "io/model_file.h"
#include "io/text_tokens.h"
#include "launch/commands.h"
#include "launch/parse_options.h"

namespace dlscale {

namespace po = boost::program_options;

namespace {

// The model must predict the next byte at every position, and position t
// must see only positions 0…t: then the slots after the prompt can hold
// anything while the prompt is shorter than the context.
void check_language_model(Network& net, const std::string& path) {
  const auto& nodes = net.nodes();
  if (net.positions() < 2 || net.num_classes() != kByteVocabulary || nodes.front().kind != "embedding")
    throw UsageError(path + " is not a byte-level language model (an embedding over T token ids first, a softmax "
                     "over T×256 last); it outputs " + to_string(nodes.back().output_shape));
  for (const auto& node : nodes)
    if (node.kind == "attention" && node.layer->settings().at("causal") == 0)
      throw UsageError(path + ": layer '" + node.name + "' is attention without causal=true: each position sees "
                       "later ones, so the model cannot generate one token at a time");
}

// Index drawn from softmax(logits / temperature); the argmax for temperature 0.
template <class T>
int draw(const T* logits, int k, double temperature, Rng& rng) {
  int best = 0;
  for (int j = 1; j < k; ++j)
    if (logits[j] > logits[best]) best = j;
  if (temperature == 0) return best;
  std::vector<double> p(k);
  double sum = 0;
  for (int j = 0; j < k; ++j) sum += p[j] = std::exp((logits[j] - logits[best]) / temperature);
  double u = rng.uniform() * sum;
  for (int j = 0; j < k; ++j)
    if ((u -= p[j]) < 0) return j;
  return best;  // rounding left u just above 0
}

}  // namespace

int generate_command(const Args& args, Communicator& comm) {
  po::options_description desc(
      "usage: dlscale generate --model RUN/model.h5 --prompt TEXT --tokens N [--temperature t] [--seed s]");
  desc.add_options()("help,h", "this help")("model", po::value<std::string>(), "model.h5 of a byte-level language model")(
      "prompt", po::value<std::string>(), "text to continue (at least one byte)")(
      "tokens", po::value<std::int64_t>()->default_value(200), "bytes to generate")(
      "temperature", po::value<double>()->default_value(1.0), "sampling temperature; 0 takes the likeliest byte")(
      "seed", po::value<std::uint64_t>()->default_value(1), "random seed of the sampling");
  po::variables_map vm;
  parse_options(args, desc, vm);
  if (vm.count("help")) {
    if (comm.rank() == 0) std::cout << desc;
    return 0;
  }
  if (comm.size() != 1) throw UsageError("generate runs as one process");
  if (!vm.count("model") || !vm.count("prompt")) throw UsageError("generate needs --model and --prompt");
  const std::string prompt = vm["prompt"].as<std::string>();
  const std::int64_t tokens = vm["tokens"].as<std::int64_t>();
  const double temperature = vm["temperature"].as<double>();
  if (prompt.empty()) throw UsageError("option prompt must hold at least one byte");
  if (tokens < 0) throw UsageError("option tokens must be at least 0");
  if (!(temperature >= 0) || !std::isfinite(temperature)) throw UsageError("option temperature must be 0 or more");

  const std::string path = vm["model"].as<std::string>();
  auto net = load_model(path);
  check_language_model(*net, path);
  const std::int64_t context = net->spec().input_shape[0];
  Rng rng(vm["seed"].as<std::uint64_t>());
  std::string text = prompt;
  std::cout << prompt << std::flush;
  Tensor x({1, context}, net->dtype());
  for (std::int64_t n = 0; n < tokens; ++n) {
    // The last `context` bytes, from position 0; later slots stay 0.
    const std::int64_t used = std::min<std::int64_t>(context, static_cast<std::int64_t>(text.size()));
    const std::size_t from = text.size() - static_cast<std::size_t>(used);
    for (std::int64_t t = 0; t < context; ++t)
      x.set(t, t < used ? static_cast<unsigned char>(text[from + static_cast<std::size_t>(t)]) : 0);
    Tensor logits = net->forward_logits(x, false);
    const int next = dispatch(logits.dtype(), [&]<class T>() {
      return draw(logits.data<T>() + (used - 1) * kByteVocabulary, kByteVocabulary, temperature, rng);
    });
    text.push_back(static_cast<char>(next));
    std::cout << static_cast<char>(next) << std::flush;
  }
  std::cout << "\n";
  return 0;
}

}  // namespace dlscale
