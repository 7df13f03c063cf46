// Counter-based draws for augmentation (see io/augment.h).
#include "io/augment.h"

#include <cstring>

#include "runtime/core/error.h"

namespace dlscale {

namespace {

// splitmix64's finalizer: nearby inputs give unrelated outputs.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Keeps augmentation's stream apart from the shuffling and initialization
// streams drawn from the same seed.
constexpr std::uint64_t kAugmentDomain = 0x6175676D656E7431ull;  // "augment1"

}  // namespace

AugmentDraw augment_draw(const AugmentOptions& options, std::int64_t epoch, std::int64_t sample) {
  const std::uint64_t key = mix(mix(options.seed ^ kAugmentDomain) ^ mix(static_cast<std::uint64_t>(epoch)) ^
                                mix(mix(static_cast<std::uint64_t>(sample))));
  AugmentDraw d;
  const auto span = static_cast<std::uint64_t>(2 * options.crop_padding + 1);
  d.top = options.crop_padding > 0 ? static_cast<std::int64_t>(mix(key + 1) % span) : 0;
  d.left = options.crop_padding > 0 ? static_cast<std::int64_t>(mix(key + 2) % span) : 0;
  d.flip = options.horizontal_flip && (mix(key + 3) >> 63) != 0;
  return d;
}

void augment_batch(Tensor& x, const std::vector<std::int64_t>& samples, const AugmentOptions& options,
                   std::int64_t epoch) {
  if (!options.enabled()) return;
  if (x.rank() != 4)
    fail("augmentation (augment-crop-padding, augment-horizontal-flip) needs C×H×W images, but the samples are " +
         to_string(Shape(x.shape().begin() + (x.rank() ? 1 : 0), x.shape().end())));
  DLSCALE_REQUIRE(static_cast<std::int64_t>(samples.size()) == x.dim(0), "augment_batch: one index per sample");
  const std::int64_t C = x.dim(1), H = x.dim(2), W = x.dim(3), per = C * H * W;
  dispatch(x.dtype(), [&]<class T>() {
    std::vector<T> scratch(static_cast<std::size_t>(per));
    T* px = x.data<T>();
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const AugmentDraw d = augment_draw(options, epoch, samples[i]);
      if (d.top == options.crop_padding && d.left == options.crop_padding && !d.flip) continue;  // unchanged
      T* sample = px + static_cast<std::int64_t>(i) * per;
      std::memcpy(scratch.data(), sample, sizeof(T) * static_cast<std::size_t>(per));
      augment_sample(scratch.data(), sample, C, H, W, options.crop_padding, d);
    }
  });
}

}  // namespace dlscale
