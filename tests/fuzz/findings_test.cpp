// The bugs the fuzz targets found, as plain assertions on their messages:
// the replay tests only show that those inputs no longer crash, these show
// that each gets the error a user can act on (docs/reliability.md, "Fuzzing").
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "expect_error.h"
#include "io/dataset.h"
#include "io/file_checksum.h"
#include "launch/train_options.h"
#include "layers/network.h"
#include "runtime/core/tensor.h"

namespace dlscale {
namespace {

using testing::expect_error;

Network build(const Shape& input, std::vector<std::string> lines) {
  return Network(NetworkSpec{input, std::move(lines), "findings.ini"}, DType::f32, 1);
}

TEST(FuzzFindings, HugeDenseLayerIsAnErrorNamingItsLine) {
  expect_error([] { build({784}, {"dense units=1000000000", "softmax"}); }, "dense units=1000000000");
  expect_error([] { build({784}, {"dense units=1000000000", "softmax"}); }, "layer 1: dense: weight 1000000000x784");
}

TEST(FuzzFindings, HugeConvSizesAreErrorsBeforeAnyArithmetic) {
  expect_error([] { build({1, 4, 4}, {"conv2d filters=2000000000 kernel=3", "flatten", "softmax"}); },
               "weight 2000000000x1x3x3 would exceed 2147483647 elements");
  expect_error([] { build({1, 4, 4}, {"conv2d filters=2 kernel=3 padding=9223372036854775807", "softmax"}); },
               "padding=9223372036854775807");
  expect_error([] { build({1, 4, 4}, {"conv2d filters=2 kernel=3 stride=9223372036854775807 padding=same", "softmax"}); },
               "stride=9223372036854775807");
  expect_error([] { build({1, 4, 4}, {"maxpool size=9223372036854775807 padding=9223372036854775806", "softmax"}); },
               "size=9223372036854775807");
}

TEST(FuzzFindings, OverflowingShapesAreErrors) {
  expect_error([] { build({9999999999, 9999999999, 99999}, {"dense units=2", "softmax"}); },
               "input 9999999999x9999999999x99999");
  expect_error([] { (void)numel({4294967296, 4294967296, 4294967296}); }, "more elements than fit in 64 bits");
}

TEST(FuzzFindings, LayersJustBelowTheLimitStillBuild) {
  NetworkSpec spec{{4}, {"dense units=8", "softmax"}, "findings.ini"};
  spec.max_layer_elements = 32;  // the weight is 8x4 = 32: exactly at the limit
  EXPECT_EQ(Network(spec, DType::f32, 1).num_classes(), 8);
  spec.layer_lines[0] = "dense units=9";
  expect_error([&] { Network(spec, DType::f32, 1); }, "would exceed 32 elements");
}

TEST(FuzzFindings, OutOfRangeIntegerOptionsAreRefusedNotCut) {
  const auto path = (std::filesystem::temp_directory_path() / "dlscale-findings-test.ini").string();
  for (const char* value : {"1e300", "4294967297"}) {
    std::ofstream(path) << "train-data = d\ninput = 4\nlayer = softmax\nmax-epochs = " << value << "\n";
    expect_error([&] { parse_training_options({path}); }, "max-epochs: '" + std::string(value) +
                                                               "' must be an integer from 1 to 2147483647");
  }
  std::ofstream(path) << "train-data = d\ninput = 4\nlayer = softmax\nmax-epochs = 2147483647\n";
  EXPECT_EQ(parse_training_options({path}).max_epochs, 2147483647);
  std::filesystem::remove(path);
}

// Boost 1.74 loops for ever formatting an error whose option name holds
// "%canonical_option%"; such text is refused before Boost sees it.
TEST(FuzzFindings, BoostPlaceholderTextIsRefusedInsteadOfLoopingForEver) {
  const auto path = (std::filesystem::temp_directory_path() / "dlscale-placeholder-test.ini").string();
  std::ofstream(path) << "train-data = d\ninput = 4\nlayer = softmax\nte%canonical_option%st = 1\n";
  expect_error([&] { parse_training_options({path}); }, "'%canonical_option%' cannot appear in an option name or value");
  expect_error([&] { parse_training_options({"--x%value%", "1"}); }, "command line: '%value%' cannot appear");
  std::ofstream(path) << "train-data = d%\ninput = 4\nlayer = softmax\n";  // a lone % is fine
  EXPECT_EQ(parse_training_options({path}).train_data.find('%') != std::string::npos, true);
  std::filesystem::remove(path);
}

// The error of open_dataset(dir), run in a child process limited to 1 GiB
// of address space: an unbounded allocation ends there as an error of
// libhdf5's (or a crash), not as the test machine running out of memory.
std::string open_error_within_1_gib(const std::string& dir) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    const rlim_t one_gib = rlim_t{1} << 30;
    rlimit limit{one_gib, one_gib};
    setrlimit(RLIMIT_AS, &limit);
    std::string message = "no error";
    try {
      open_dataset(dir);
    } catch (const Error& e) {
      message = e.what();
    }
    (void)!write(fds[1], message.data(), message.size());
    _exit(0);
  }
  close(fds[1]);
  std::string message;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) message.append(buffer, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child died: status " << status;
  return message;
}

// regressions/fuzz_shard/hdf5-oom-35m-small-allocations.bin: a shard on
// which libhdf5 1.10 allocates without bound (its root group's name heap has
// a free list that loops). Damaged after its index was written, the CRC-32
// refuses it before libhdf5 sees it; written so (its index holding its own
// CRC, as fuzz_shard makes it), the heap check in open_h5_read refuses it.
TEST(FuzzFindings, ShardWhoseHeapFreeListLoopsIsOneErrorWithinBoundedMemory) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "skipped in the address lane: ASan reserves terabytes of address space for its shadow memory, "
                  "so an address-space limit cannot stand for a memory limit there";
#endif
  std::ifstream in(DLSCALE_FUZZ_REGRESSIONS "/fuzz_shard/hdf5-oom-35m-small-allocations.bin", std::ios::binary);
  const std::string packed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t nul = packed.find('\0');
  ASSERT_NE(nul, std::string::npos);
  const auto dir = std::filesystem::temp_directory_path() / ("dlscale-findings-oom-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string shard = (dir / "shard-00000.h5").string();
  std::ofstream(shard, std::ios::binary) << packed.substr(nul + 1);
  auto index = nlohmann::json::parse(packed.substr(0, nul));
  index["shards"][0]["crc32"] = "0a1b2c3d";  // the CRC of the shard before it was damaged
  std::ofstream((dir / "index.json").string()) << index.dump();
  std::string message = open_error_within_1_gib(dir.string());
  EXPECT_NE(message.find(shard + ": the file is damaged or was changed after index.json was written"),
            std::string::npos) << message;
  index["shards"][0]["crc32"] = crc32_text(file_crc32(shard));
  std::ofstream((dir / "index.json").string()) << index.dump();
  message = open_error_within_1_gib(dir.string());
  EXPECT_NE(message.find("cannot open " + shard + ": it is damaged (its root group's name heap has a free list that"),
            std::string::npos)
      << message;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dlscale
