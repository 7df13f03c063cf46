// Augmentation: crop and flip on a tiny image by hand, the draws' range and
// keys, and through PrefetchLoader: a global batch is augmented identically
// on 1 and 2 ranks and when an epoch is resumed mid-way.
#include "io/augment.h"

#include <gtest/gtest.h>

#include <cstring>

#include "expect_error.h"
#include "io/io_test_util.h"
#include "io/loader.h"
#include "io/sampler.h"

namespace dlscale {
namespace {

using test::TempDir;

// A 2×3×4 image: channel 0 is 1..12, channel 1 is 101..112.
Tensor tiny_image() {
  Tensor x({1, 2, 3, 4}, DType::f32);
  for (int i = 0; i < 12; ++i) x.set(i, i + 1), x.set(12 + i, 101 + i);
  return x;
}

std::vector<double> apply(const AugmentDraw& draw, std::int64_t padding) {
  const Tensor x = tiny_image();
  Tensor y({1, 2, 3, 4}, DType::f32);
  augment_sample(x.data<float>(), y.data<float>(), 2, 3, 4, padding, draw);
  std::vector<double> v;
  for (std::int64_t i = 0; i < y.numel(); ++i) v.push_back(y.at(i));
  return v;
}

TEST(Augment, CropAndFlipOnATinyImage) {
  // Padding 1, the window at (0, 2) of the padded image: out[h][w] =
  // in[h-1][w+1], the image shifted down a row and left a column.
  EXPECT_EQ(apply({0, 2, false}, 1), (std::vector<double>{0,   0,   0,   0,   2,   3,   4,   0,   6,   7,   8,   0,
                                                          0,   0,   0,   0,   102, 103, 104, 0,   106, 107, 108, 0}));
  // The centred window, flipped: each row reversed.
  EXPECT_EQ(apply({1, 1, true}, 1), (std::vector<double>{4,   3,   2,   1,   8,   7,   6,   5,   12,  11,  10,  9,
                                                         104, 103, 102, 101, 108, 107, 106, 105, 112, 111, 110, 109}));
  // Crop (out[h][w] = in[h+1][w-1]) and then flip: out[h][w] = in[h+1][2-w].
  EXPECT_EQ(apply({2, 0, true}, 1), (std::vector<double>{7,   6,   5,   0,   11,  10,  9,   0,   0,   0,   0,   0,
                                                         107, 106, 105, 0,   111, 110, 109, 0,   0,   0,   0,   0}));
  // Without padding and flip the image is unchanged.
  EXPECT_EQ(apply({0, 0, false}, 0), apply({1, 1, false}, 1));
  EXPECT_EQ(apply({0, 0, false}, 0)[5], 6);
}

TEST(Augment, DrawsCoverTheRangeAndDependOnSeedEpochAndSample) {
  AugmentOptions o;
  o.crop_padding = 2;
  o.horizontal_flip = true;
  o.seed = 11;
  std::vector<int> tops(5, 0), lefts(5, 0);
  int flips = 0, epoch_differs = 0, seed_differs = 0;
  AugmentOptions other_seed = o;
  other_seed.seed = 12;
  auto same = [](const AugmentDraw& a, const AugmentDraw& b) {
    return a.top == b.top && a.left == b.left && a.flip == b.flip;
  };
  const int n = 4000;
  for (int s = 0; s < n; ++s) {
    const AugmentDraw d = augment_draw(o, 3, s);
    ASSERT_TRUE(d.top >= 0 && d.top <= 4 && d.left >= 0 && d.left <= 4) << s;
    ++tops[d.top], ++lefts[d.left], flips += d.flip;
    EXPECT_TRUE(same(d, augment_draw(o, 3, s)));  // a pure function of its key
    epoch_differs += !same(d, augment_draw(o, 4, s));
    seed_differs += !same(d, augment_draw(other_seed, 3, s));
  }
  // Each of 5 offsets has probability 1/5 (800 of 4000, sd ~25), a flip 1/2 (2000, sd ~32).
  for (int k = 0; k < 5; ++k) {
    EXPECT_NEAR(tops[k], n / 5, 150) << k;
    EXPECT_NEAR(lefts[k], n / 5, 150) << k;
  }
  EXPECT_NEAR(flips, n / 2, 200);
  // Another epoch or seed redraws: the same draw has probability 1/50.
  EXPECT_GT(epoch_differs, n * 9 / 10);
  EXPECT_GT(seed_differs, n * 9 / 10);

  AugmentOptions flip_only;
  flip_only.horizontal_flip = true;
  for (int s = 0; s < 100; ++s) EXPECT_EQ(augment_draw(flip_only, 0, s).top, 0);
  EXPECT_FALSE(AugmentOptions{}.enabled());
}

TEST(Augment, NonImageSamplesAreAnError) {
  AugmentOptions o;
  o.horizontal_flip = true;
  Tensor x({2, 6}, DType::f32);
  testing::expect_error([&] { augment_batch(x, {0, 1}, o, 0); }, "needs C×H×W images, but the samples are 6");
}

// Every batch of `epoch` as `world` ranks read it, rank slices joined in rank
// order: the global batches, as bytes.
std::vector<std::vector<unsigned char>> global_batches(const DatasetInfo& info, int world, int epoch,
                                                       const AugmentOptions& augment, std::int64_t skip = 0) {
  std::vector<std::vector<unsigned char>> joined;
  for (int rank = 0; rank < world; ++rank) {
    auto batches = DistributedSampler(info.num_samples, 8, rank, world, ShuffleMode::every_epoch, 5).epoch_batches(epoch);
    batches.erase(batches.begin(), batches.begin() + skip);  // as the trainer resumes mid-epoch
    PrefetchLoader loader(info, batches, DType::f32, 2, augment, epoch);
    joined.resize(batches.size());
    for (std::size_t b = 0; b < batches.size(); ++b) {
      std::optional<Batch> batch = loader.next();
      EXPECT_TRUE(batch.has_value());
      if (!batch) return joined;
      const auto* p = static_cast<const unsigned char*>(batch->x.raw());
      joined[b].insert(joined[b].end(), p, p + batch->x.bytes());
    }
  }
  return joined;
}

TEST(Augment, GlobalBatchIsTheSameOnOneAndTwoRanksAndWhenResumed) {
  TempDir tmp;
  write_dataset(tmp / "ds", test::make_dataset(40, {2, 4, 5}, SampleType::u8), 3);
  const DatasetInfo info = open_dataset(tmp / "ds");
  AugmentOptions augment;
  augment.crop_padding = 2;
  augment.horizontal_flip = true;
  augment.seed = 9;
  const auto one = global_batches(info, 1, 2, augment);
  ASSERT_EQ(one.size(), 5u);
  EXPECT_EQ(global_batches(info, 2, 2, augment), one);
  // Resumed after 2 batches of the epoch, on 2 ranks and on 1.
  const std::vector<std::vector<unsigned char>> tail(one.begin() + 2, one.end());
  EXPECT_EQ(global_batches(info, 2, 2, augment, 2), tail);
  EXPECT_EQ(global_batches(info, 1, 2, augment, 2), tail);
  // And it did augment: the plain batches differ, as do the next epoch's.
  EXPECT_NE(global_batches(info, 1, 2, AugmentOptions{}), one);
  EXPECT_NE(global_batches(info, 1, 3, augment)[0], global_batches(info, 1, 3, AugmentOptions{})[0]);
}

}  // namespace
}  // namespace dlscale
