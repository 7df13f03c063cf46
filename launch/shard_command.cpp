// dlscale shard: idx, CSV or .npy inputs → a sharded HDF5 dataset folder.
#include <boost/program_options.hpp>
#include <cstring>
#include <iostream>

#include "io/shard_writer.h"
#include "launch/commands.h"
#include "launch/parse_options.h"
#include "layers/network.h"

namespace dlscale {

namespace po = boost::program_options;

namespace {

std::string guess_format(const std::string& path) {
  auto ends = [&](const char* s) { return path.size() >= std::strlen(s) && path.rfind(s) == path.size() - std::strlen(s); };
  if (ends(".npy")) return "npy";
  if (ends(".csv")) return "csv";
  return "idx";
}

}  // namespace

int shard_command(const Args& args, Communicator& comm) {
  po::options_description desc(
      "usage: dlscale shard --images F --labels F --output DIR [--shards N]\n"
      "       dlscale shard --csv F --output DIR [--label-column C] [--header] [--sample-shape 1x28x28]");
  desc.add_options()("help,h", "this help")("format", po::value<std::string>(), "idx | csv | npy (default: from the file name)")(
      "images", po::value<std::string>(), "idx images (.gz or not) or .npy samples")(
      "labels", po::value<std::string>(), "idx labels (.gz or not) or .npy labels")(
      "csv", po::value<std::string>(), "CSV file: one sample per row")(
      "label-column", po::value<int>()->default_value(0), "CSV: column of the class label (-1: last)")(
      "header", po::bool_switch(), "CSV: the first row is a header")(
      "sample-shape", po::value<std::string>(), "CSV: reshape features, e.g. 1x28x28 (default: N×F)")(
      "output", po::value<std::string>(), "dataset folder to create")(
      "shards", po::value<int>()->default_value(1), "number of shard files")(
      "num-classes", po::value<int>()->default_value(0), "number of classes (default: max label + 1)")(
      "overwrite", po::bool_switch(), "replace an existing dataset folder");
  po::variables_map vm;
  parse_options(args, desc, vm);
  if (vm.count("help")) {
    if (comm.rank() == 0) std::cout << desc;
    return 0;
  }
  if (comm.rank() != 0) return 0;  // one writer; shard is not a parallel job
  if (!vm.count("output")) throw UsageError("shard needs --output DIR");
  const int shards = vm["shards"].as<int>();
  if (shards < 1) throw UsageError("option shards must be at least 1");

  RawDataset data;
  const std::string first = vm.count("csv") ? vm["csv"].as<std::string>()
                            : vm.count("images") ? vm["images"].as<std::string>()
                                                 : "";
  if (first.empty()) throw UsageError("shard needs --images and --labels, or --csv");
  const std::string format = vm.count("format") ? vm["format"].as<std::string>() : guess_format(first);
  if (format == "csv") {
    Shape shape;
    if (vm.count("sample-shape")) shape = parse_shape(vm["sample-shape"].as<std::string>(), "sample-shape");
    data = read_csv(first, vm["label-column"].as<int>(), vm["header"].as<bool>(), shape);
  } else if (format == "idx" || format == "npy") {
    if (!vm.count("images") || !vm.count("labels")) throw UsageError(format + " input needs --images and --labels");
    data = format == "idx" ? read_idx(vm["images"].as<std::string>(), vm["labels"].as<std::string>())
                           : read_npy(vm["images"].as<std::string>(), vm["labels"].as<std::string>());
  } else {
    throw UsageError("unknown format '" + format + "' (expected idx, csv or npy)");
  }
  write_dataset(vm["output"].as<std::string>(), data, shards, vm["num-classes"].as<int>(), vm["overwrite"].as<bool>());
  std::cout << "wrote " << data.num_samples() << " samples of shape " << to_string(data.sample_shape) << " ("
            << to_string(data.sample_type) << ") in " << shards << " shard(s) to " << vm["output"].as<std::string>()
            << "\n";
  return 0;
}

}  // namespace dlscale
