// dlscale shard: idx, CSV or .npy inputs → a sharded HDF5 dataset folder.
#include <boost/program_options.hpp>
#include <cstring>
#include <iostream>

#include "io/shard_writer.h"
#include "io/text_tokens.h"
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

// --text: byte windows of the files, the last validation-fraction of them
// (in text order: held out, not interleaved with training windows) into
// --validation-output.
void shard_text(const po::variables_map& vm, int shards) {
  TextWindows how;
  how.context = vm["context"].as<std::int64_t>();
  how.stride = vm.count("stride") ? vm["stride"].as<std::int64_t>() : how.context;
  if (how.context < 1) throw UsageError("option context must be at least 1");
  if (how.stride < 1) throw UsageError("option stride must be at least 1");
  const double fraction = vm["validation-fraction"].as<double>();
  if (!(fraction >= 0 && fraction < 1)) throw UsageError("option validation-fraction must be in [0, 1)");
  if ((fraction > 0) != (vm.count("validation-output") > 0))
    throw UsageError("--validation-fraction and --validation-output go together");
  const auto bytes = read_text_files(vm["text"].as<std::vector<std::string>>());
  const std::int64_t total = count_windows(static_cast<std::int64_t>(bytes.size()), how);
  const auto held = static_cast<std::int64_t>(static_cast<double>(total) * fraction);
  if (fraction > 0 && (held < 1 || held >= total))
    throw UsageError("validation-fraction " + std::to_string(fraction) + " of " + std::to_string(total) +
                     " windows leaves no validation or no training window");
  auto write = [&](const std::string& dir, std::int64_t first, std::int64_t end) {
    RawDataset data = text_windows(bytes, how, first, end);
    write_dataset(dir, data, shards, kByteVocabulary, vm["overwrite"].as<bool>());
    std::cout << "wrote " << data.num_samples() << " windows of " << how.context << " byte tokens (stride "
              << how.stride << ", vocabulary " << kByteVocabulary << ") in " << shards << " shard(s) to " << dir
              << "\n";
  };
  write(vm["output"].as<std::string>(), 0, total - held);
  if (held > 0) write(vm["validation-output"].as<std::string>(), total - held, total);
}

}  // namespace

int shard_command(const Args& args, Communicator& comm) {
  po::options_description desc(
      "usage: dlscale shard --images F --labels F --output DIR [--shards N]\n"
      "       dlscale shard --csv F --output DIR [--label-column C] [--header] [--sample-shape 1x28x28]\n"
      "       dlscale shard --text F... --context T --output DIR [--stride S]\n"
      "                     [--validation-fraction f --validation-output DIR2]");
  desc.add_options()("help,h", "this help")("format", po::value<std::string>(), "idx | csv | npy (default: from the file name)")(
      "images", po::value<std::string>(), "idx images (.gz or not) or .npy samples")(
      "labels", po::value<std::string>(), "idx labels (.gz or not) or .npy labels")(
      "csv", po::value<std::string>(), "CSV file: one sample per row")(
      "text", po::value<std::vector<std::string>>()->multitoken(), "plain text files: a byte-level token dataset")(
      "context", po::value<std::int64_t>(), "text: tokens per window (T)")(
      "stride", po::value<std::int64_t>(), "text: bytes between window starts (default: T)")(
      "validation-fraction", po::value<double>()->default_value(0.0), "text: the last fraction of windows held out")(
      "validation-output", po::value<std::string>(), "text: dataset folder for the held-out windows")(
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

  if (vm.count("text")) {
    if (!vm.count("context")) throw UsageError("--text needs --context T (tokens per window)");
    shard_text(vm, shards);
    return 0;
  }
  for (const char* text_only : {"context", "stride", "validation-output"})
    if (vm.count(text_only)) throw UsageError(std::string("--") + text_only + " applies to --text input only");
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
