// dlscale predict: a trained model.h5 over a dataset → predictions CSV and accuracy.
#include <boost/program_options.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "io/loader.h"
#include "io/model_file.h"
#include "io/sampler.h"
#include "launch/commands.h"
#include "launch/parse_options.h"
#include "runtime/training/evaluation.h"

namespace dlscale {

namespace po = boost::program_options;

int predict_command(const Args& args, Communicator& comm) {
  po::options_description desc("usage: dlscale predict --model RUN/model.h5 --data DIR [--output predictions.csv]");
  desc.add_options()("help,h", "this help")("model", po::value<std::string>(), "model.h5 written by dlscale train")(
      "data", po::value<std::string>(), "dataset folder written by dlscale shard")(
      "output", po::value<std::string>(), "CSV with one row per sample: index,label,predicted,probability")(
      "mini-batch-size", po::value<std::int64_t>()->default_value(256), "samples per forward pass");
  po::variables_map vm;
  parse_options(args, desc, vm);
  if (vm.count("help")) {
    if (comm.rank() == 0) std::cout << desc;
    return 0;
  }
  if (!vm.count("model") || !vm.count("data")) throw UsageError("predict needs --model and --data");
  if (comm.size() != 1) throw UsageError("predict runs as one process");

  auto net = load_model(vm["model"].as<std::string>());
  DatasetInfo data = open_dataset(vm["data"].as<std::string>());
  check_data_fits(*net, data, "prediction");
  const std::int64_t batch = vm["mini-batch-size"].as<std::int64_t>();
  if (batch < 1) throw UsageError("option mini-batch-size must be at least 1");

  std::ofstream csv;
  std::string csv_tmp;
  if (vm.count("output")) {
    csv_tmp = vm["output"].as<std::string>() + ".tmp";
    csv.open(csv_tmp, std::ios::trunc);
    if (!csv) fail("cannot write " + csv_tmp);
    csv << "index,label,predicted,probability\n";
  }
  PrefetchLoader loader(data, evaluation_batches(data.num_samples, batch, 0, 1), net->dtype());
  std::int64_t index = 0, correct = 0;
  while (auto b = loader.next()) {
    Tensor probs = net->predict(b->x);
    // One row of K probabilities per label: per sample, or per position of
    // a token window (index then counts tokens).
    const std::int64_t k = probs.dim(probs.rank() - 1);
    for (std::size_t i = 0; i < b->labels.size(); ++i, ++index) {
      std::int64_t best = 0;
      for (std::int64_t c = 1; c < k; ++c)
        if (probs.at(i * k + c) > probs.at(i * k + best)) best = c;
      correct += best == b->labels[i];
      if (csv.is_open()) csv << index << "," << b->labels[i] << "," << best << "," << probs.at(i * k + best) << "\n";
    }
  }
  if (csv.is_open()) {
    csv.close();
    if (std::rename(csv_tmp.c_str(), vm["output"].as<std::string>().c_str()) != 0) fail("cannot write " + csv_tmp);
  }
  std::printf("%lld %s, accuracy %.4f\n", static_cast<long long>(index), data.tokens ? "tokens" : "samples",
              index ? static_cast<double>(correct) / index : 0.0);
  return 0;
}

}  // namespace dlscale
