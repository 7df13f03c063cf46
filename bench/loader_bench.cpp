// Data-loading benchmark over a dlscale dataset folder, page cache warm:
//  - plain sequential read() of every shard file (the bytes on disk);
//  - DatasetReader: the shuffled batches of one epoch as training reads them,
//    and the same batches in file order;
//  - PrefetchLoader: the shuffled epoch through the background thread, taken
//    as fast as the consumer can.
// Each reader pass first checks it returned every sample, then times.
// Prints `key value` lines for bench/run.sh (MB/s of sample bytes read).
//   loader_bench DATA_DIR [batch=128] [repeats=3]
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <numeric>

#include "bench_common.h"
#include "io/dataset.h"
#include "io/loader.h"
#include "io/sampler.h"

namespace {

using namespace dlscale;
using namespace dlscale::bench;

// Reads the whole file with read() into buf; returns the bytes read.
std::int64_t read_file(const std::string& path, std::vector<char>& buf) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail("loader_bench: cannot open " + path);
  std::int64_t total = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      ::close(fd);
      fail("loader_bench: cannot read " + path);
    }
    if (n == 0) break;
    total += n;
  }
  ::close(fd);
  return total;
}

int run(int argc, char** argv) {
  if (argc < 2) fail("usage: loader_bench DATA_DIR [batch] [repeats]");
  const DatasetInfo data = open_dataset(argv[1]);
  const std::int64_t batch = argc > 2 ? std::stoll(argv[2]) : 128;
  const int repeats = argc > 3 ? std::stoi(argv[3]) : 3;
  const std::int64_t sample_bytes = numel(data.sample_shape) * (data.sample_type == SampleType::u8 ? 1 : 4);

  std::vector<char> buf(std::size_t(1) << 20);
  std::int64_t file_bytes = 0;
  for (const auto& s : data.shards) file_bytes += read_file(s.path, buf);  // warms the page cache

  DistributedSampler sampler(data.num_samples, batch, 0, 1, ShuffleMode::every_epoch, 1);
  const auto shuffled = sampler.epoch_batches(0);
  auto ordered = shuffled;
  std::int64_t next = 0;
  for (auto& b : ordered)
    for (auto& i : b) i = next++;
  const std::int64_t samples = next, bytes = samples * sample_bytes;

  auto read_all = [&](const std::vector<std::vector<std::int64_t>>& batches) {
    DatasetReader reader(data);
    Tensor x;
    std::vector<std::int32_t> labels;
    for (const auto& b : batches) reader.read(b, DType::f32, x, labels);
    if (reader.bytes_requested() != bytes) fail("loader_bench: the reader did not return every sample once");
  };
  auto prefetch_all = [&] {
    PrefetchLoader loader(data, shuffled, DType::f32);
    std::int64_t n = 0;
    while (auto b = loader.next()) n += static_cast<std::int64_t>(b->labels.size());
    if (n != samples) fail("loader_bench: the prefetch loader lost samples");
  };

  std::vector<double> plain_t, shuffled_t, ordered_t, prefetch_t;
  read_all(shuffled);  // warm-up (and the correctness checks)
  prefetch_all();
  for (int r = 0; r < repeats; ++r) {
    auto t0 = Clock::now();
    for (const auto& s : data.shards) read_file(s.path, buf);
    plain_t.push_back(since(t0));
    t0 = Clock::now();
    read_all(shuffled);
    shuffled_t.push_back(since(t0));
    t0 = Clock::now();
    read_all(ordered);
    ordered_t.push_back(since(t0));
    t0 = Clock::now();
    prefetch_all();
    prefetch_t.push_back(since(t0));
  }
  auto mbps = [](double b, double s) { return b / s / 1e6; };
  std::printf("dataset %s\nsamples %lld\nsample_bytes %lld\nfile_bytes %lld\n", argv[1],
              static_cast<long long>(samples), static_cast<long long>(bytes), static_cast<long long>(file_bytes));
  std::printf("plain_read_mb_per_s %.1f\n", mbps(double(file_bytes), median(plain_t)));
  std::printf("reader_shuffled_mb_per_s %.1f\n", mbps(double(bytes), median(shuffled_t)));
  std::printf("reader_ordered_mb_per_s %.1f\n", mbps(double(bytes), median(ordered_t)));
  std::printf("prefetch_shuffled_mb_per_s %.1f\n", mbps(double(bytes), median(prefetch_t)));
  std::printf("reader_shuffled_samples_per_s %.0f\n", double(samples) / median(shuffled_t));
  std::printf("prefetch_shuffled_samples_per_s %.0f\n", double(samples) / median(prefetch_t));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return dlscale::bench::run_benchmark("loader_bench", run, argc, argv); }
