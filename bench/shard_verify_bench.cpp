// What checking the shards' CRC-32 costs (docs/data-format.md): over a
// dlscale dataset folder, page cache warm, alternating REPEATS times (medians):
//  - a plain read() of every shard file in 1 MiB blocks (the baseline);
//  - file_crc32 of every shard: the same read plus zlib's CRC-32, which is
//    what open_dataset adds in front of libhdf5;
//  - open_dataset as a whole (CRC-32 and the HDF5 shape checks).
// Prints one line per figure and the ratios against the plain read.
//   shard_verify_bench DATA_DIR [repeats=5]
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench_common.h"
#include "io/dataset.h"
#include "io/file_checksum.h"

namespace {

using namespace dlscale;
using namespace dlscale::bench;

std::int64_t plain_read(const std::string& path, std::vector<char>& block) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("shard_verify_bench: cannot open " + path);
  std::int64_t total = 0;
  for (ssize_t n; (n = ::read(fd, block.data(), block.size())) > 0;) total += n;
  ::close(fd);
  return total;
}

int run(int argc, char** argv) {
  if (argc < 2) fail("usage: shard_verify_bench DATA_DIR [repeats]");
  const std::string dir = argv[1];
  const int repeats = argc > 2 ? std::stoi(argv[2]) : 5;
  const DatasetInfo data = open_dataset(dir);  // also warms the page cache
  std::vector<char> block(std::size_t{1} << 20);
  std::int64_t bytes = 0;
  for (const auto& s : data.shards) bytes += plain_read(s.path, block);
  std::vector<double> read_s, crc_s, open_s;
  std::uint32_t sink = 0;
  for (int r = 0; r < repeats; ++r) {
    auto t = Clock::now();
    for (const auto& s : data.shards) plain_read(s.path, block);
    read_s.push_back(since(t));
    t = Clock::now();
    for (const auto& s : data.shards) sink ^= file_crc32(s.path);
    crc_s.push_back(since(t));
    t = Clock::now();
    sink ^= static_cast<std::uint32_t>(open_dataset(dir).num_samples);
    open_s.push_back(since(t));
  }
  const double mb = static_cast<double>(bytes) / 1e6, read = median(read_s), crc = median(crc_s);
  const double open = median(open_s);
  std::printf("dataset %s: %zu shards, %.1f MB (sink %08x)\n", dir.c_str(), data.shards.size(), mb, sink);
  std::printf("plain read()          %8.2f ms  %8.0f MB/s\n", read * 1e3, mb / read);
  std::printf("CRC-32 of the shards  %8.2f ms  %8.0f MB/s  ratio to plain read %.2f\n", crc * 1e3, mb / crc,
              crc / read);
  std::printf("open_dataset (all)    %8.2f ms              ratio to plain read %.2f\n", open * 1e3, open / read);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shard_verify_bench: %s\n", e.what());
    return 1;
  }
}
