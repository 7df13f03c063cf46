// PrefetchLoader: same batches as direct reads, errors rethrown on the
// consumer's thread, clean shutdown when the consumer stops early.
#include "io/loader.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/io_test_util.h"
#include "io/sampler.h"

namespace dlscale {
namespace {

using test::TempDir;

TEST(Loader, YieldsTheSameDataAsDirectReads) {
  TempDir tmp;
  write_dataset(tmp / "ds", test::make_dataset(50, {1, 3, 4}, SampleType::u8), 3);
  DatasetInfo info = open_dataset(tmp / "ds");
  auto batches = DistributedSampler(50, 8, 1, 2, ShuffleMode::every_epoch, 3).epoch_batches(1);
  for (int depth : {1, 2, 5}) {
    PrefetchLoader loader(info, batches, DType::f64, depth);
    DatasetReader reader(info);
    for (const auto& indices : batches) {
      std::optional<Batch> batch = loader.next();
      ASSERT_TRUE(batch.has_value());
      Tensor x;
      std::vector<std::int32_t> labels;
      reader.read(indices, DType::f64, x, labels);
      EXPECT_EQ(batch->labels, labels);
      ASSERT_EQ(batch->x.shape(), x.shape());
      EXPECT_EQ(std::memcmp(batch->x.raw(), x.raw(), x.bytes()), 0);
    }
    EXPECT_FALSE(loader.next().has_value());
    EXPECT_FALSE(loader.next().has_value());
  }
}

TEST(Loader, NoBatches) {
  TempDir tmp;
  write_dataset(tmp / "ds", test::make_dataset(5, {2}, SampleType::f32), 1);
  PrefetchLoader loader(open_dataset(tmp / "ds"), {}, DType::f32);
  EXPECT_FALSE(loader.next().has_value());
}

TEST(Loader, ErrorInTheReaderThreadIsRethrownInNext) {
  TempDir tmp;
  write_dataset(tmp / "ds", test::make_dataset(12, {2}, SampleType::f32, 10), 2);
  auto index = nlohmann::json::parse(test::read_text(tmp / "ds/index.json"));
  index["num_classes"] = 9;  // label of sample 3 becomes invalid
  test::write_text(tmp / "ds/index.json", index.dump());
  std::vector<std::vector<std::int64_t>> batches{{0, 1}, {2, 4}, {3, 5}, {6, 7}};
  PrefetchLoader loader(open_dataset(tmp / "ds"), batches, DType::f32, 2);
  EXPECT_TRUE(loader.next().has_value());
  EXPECT_TRUE(loader.next().has_value());
  EXPECT_ERROR_CONTAINS(loader.next(), "sample 3 has label 9");
}

TEST(Loader, StopsCleanlyWhenTheConsumerLeavesEarly) {
  TempDir tmp;
  write_dataset(tmp / "ds", test::make_dataset(200, {1, 8, 8}, SampleType::u8), 2);
  DatasetInfo info = open_dataset(tmp / "ds");
  auto batches = DistributedSampler(200, 4, 0, 1, ShuffleMode::every_epoch, 1).epoch_batches(0);
  {
    PrefetchLoader loader(info, batches, DType::f32, 3);
    EXPECT_TRUE(loader.next().has_value());
  }  // the destructor must join a producer blocked on a full queue
  { PrefetchLoader untouched(info, batches, DType::f32, 2); }
  SUCCEED();
}

}  // namespace
}  // namespace dlscale
