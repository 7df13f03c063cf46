// Memory of a training run: the resident memory at the end of each epoch
// (telemetry.jsonl samples every epoch end, with no minimum window between
// lines here) stays flat after the second epoch, and summary.json reports
// the peak. One rank, in this process.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "io/shard_writer.h"
#include "runtime/monitoring/telemetry.h"
#include "runtime/training/trainer.h"
#include "synthetic_data.h"

namespace dlscale::testing {
namespace {

constexpr int kEpochs = 6, kBatch = 2048, kBatchesPerEpoch = 4;
constexpr int kPixels = 32 * 32;
// One mini-batch as the loader hands it over: kBatch float32 images.
constexpr double kBatchMib = kBatch * kPixels * 4.0 / (1 << 20);  // 8 MiB
// Growth allowed from the end of epoch 2 to the end of any later epoch. After
// two epochs every buffer of the loop has been allocated and freed at least
// once (the loader's thread, its batches, activations, gradients). glibc's
// default malloc keeps freed large buffers in its heap once it has raised its
// mmap threshold, so VmRSS then swings by the size of the biggest
// temporaries (measured with a conv2d network: 136..186 MiB, up and down,
// from epoch to epoch). The test fixes the threshold at 128 KiB (mallopt,
// below): every buffer above it, a batch included, is mapped when allocated
// and unmapped when freed, so VmRSS follows what the loop holds. trainnet
// leaves that setting alone (only the dlscale command line raises the
// threshold, runtime/core/heap.h). Until it did, trainnet raised it to 32 MiB
// behind the test's back, the batches lived in the heap, and about one run
// in six saw resident memory step up once by about 10 MiB at epoch 5. What remains
// is small allocations settling (HDF5, MPI, the allocator's per-thread
// arenas): measured at most 0.1 MiB over epochs 2..6 in twelve runs. One leaked batch per epoch adds
// kBatchMib (8 MiB) per epoch, 16 MiB by epoch 4 and 32 MiB by epoch 6; a leak
// per step four times that. One batch of growth is twice the creep seen and
// half of the smallest leak looked for by epoch 4.
constexpr double kAllowedGrowthMib = kBatchMib;
static_assert(kAllowedGrowthMib < 2 * kBatchMib, "a batch leaked per epoch must exceed the bound by epoch 4");

RawDataset images_32x32(std::int64_t n) {
  RawDataset d;
  d.sample_shape = {1, 32, 32};
  d.sample_type = SampleType::u8;
  Rng rng(5);
  for (std::int64_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(rng.below(4));
    d.labels.push_back(c);
    for (int p = 0; p < kPixels; ++p)
      d.samples.push_back(static_cast<std::uint8_t>(rng.below(80) + (p / 256 == c ? 150 : 0)));
  }
  return d;
}

TEST(Memory, ResidentMemoryDoesNotGrowAcrossEpochs) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "skipped in the address lane: ASan's allocator has no mallopt and keeps freed blocks in "
                  "quarantine, so resident memory says nothing about growth there (LeakSanitizer checks leaks)";
#endif
  ASSERT_EQ(mallopt(M_MMAP_THRESHOLD, 128 * 1024), 1);  // fixed: no dynamic raise (see kAllowedGrowthMib)
  const fs::path dir = scratch_dir("memory");
  write_dataset((dir / "train").string(), images_32x32(kBatch * kBatchesPerEpoch), 2);
  TrainingOptions o;
  o.train_data = (dir / "train").string();
  o.network.input_shape = {1, 32, 32};
  // Dense layers only: with the oneDNN conv2d path VmRSS climbs by 10..30 MiB
  // over the first four or five epochs and then stays flat (oneDNN's own
  // caches warming up, measured over 10 epochs), which would hide what this
  // test looks for: growth of the training loop itself.
  o.network.layer_lines = {"dense units=64", "relu", "dense units=4", "softmax"};
  o.solver.solver = "adam";
  o.max_epochs = kEpochs;
  o.mini_batch_size = kBatch;
  o.shuffle = ShuffleMode::every_epoch;
  o.verbose = false;
  o.verbose_frequency = 1000;
  o.threads = 1;
  o.execution_environment = "cpu";
  o.config_text = "memory test";
  o.output = (dir / "run").string();
  Communicator comm;
  setenv("DLSCALE_TELEMETRY_WINDOW", "0", 1);  // a line at every epoch end, however short the epoch
  TrainingResult result = trainnet(o, comm);
  unsetenv("DLSCALE_TELEMETRY_WINDOW");
  ASSERT_EQ(result.epochs, kEpochs);

  std::vector<double> epoch_end_mib;
  std::ifstream in(dir / "run" / "telemetry.jsonl");
  for (std::string line; std::getline(in, line);) {
    TelemetryRecord r = parse_telemetry_line(line);
    ASSERT_EQ(r.ranks.size(), 1u);
    if (r.iteration % kBatchesPerEpoch == 0) epoch_end_mib.push_back(r.ranks[0].memory_mib);
  }
  ASSERT_EQ(epoch_end_mib.size(), static_cast<std::size_t>(kEpochs)) << "one sample at the end of every epoch";
  std::string figures;
  for (double m : epoch_end_mib) figures += " " + std::to_string(m);
  std::cout << "resident memory (MiB) at each epoch end:" << figures << "\n";
  for (int e = 2; e < kEpochs; ++e)
    EXPECT_LE(epoch_end_mib[e] - epoch_end_mib[1], kAllowedGrowthMib)
        << "resident memory grew from epoch 2 to epoch " << e + 1 << "; MiB at each epoch end:" << figures;

  std::ifstream s(dir / "run" / "summary.json");
  nlohmann::json summary = nlohmann::json::parse(s);
  ASSERT_TRUE(summary["peak_rss_mib"].is_number()) << summary.dump();
  ASSERT_EQ(summary["peak_rss_mib_per_rank"].size(), 1u);
  // The high-water mark is at least what was resident at any sample.
  EXPECT_GE(summary["peak_rss_mib"].get<double>() + 0.05,  // telemetry rounds to 0.1 MiB
            *std::max_element(epoch_end_mib.begin(), epoch_end_mib.end()));
  EXPECT_DOUBLE_EQ(summary["peak_rss_mib"].get<double>(), summary["peak_rss_mib_per_rank"][0].get<double>());
}

}  // namespace
}  // namespace dlscale::testing
