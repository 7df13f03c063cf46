// Training-time augmentation of C×H×W image samples: a random crop of the
// image padded with zeros, and a random horizontal flip (the CIFAR/ResNet
// recipe; PyTorch's RandomCrop(padding=P) + RandomHorizontalFlip()).
//
// What happens to a sample is drawn from (seed, epoch, global sample index)
// alone, by a counter-based hash: not from a stream that depends on which
// rank reads the sample or how many samples came before it. So a global
// batch is augmented identically on 1 rank or on 64, and a run resumed from
// a checkpoint mid-epoch draws what the uninterrupted run drew.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/core/tensor.h"

namespace dlscale {

struct AugmentOptions {
  std::int64_t crop_padding = 0;  // P: pad every side with P zeros, crop H×W at a random offset (0: off)
  bool horizontal_flip = false;   // mirror left-right with probability 1/2
  std::uint64_t seed = 0;
  bool enabled() const { return crop_padding > 0 || horizontal_flip; }
};

// One sample's draw: crop offsets in [0, 2P] into the padded image (P, P is
// the uncropped image) and whether to flip.
struct AugmentDraw {
  std::int64_t top = 0, left = 0;
  bool flip = false;
};
AugmentDraw augment_draw(const AugmentOptions& options, std::int64_t epoch, std::int64_t sample);

// out (C×H×W) = the H×W window at (top, left) of `in` padded with P zeros on
// every side, then mirrored left-right if draw.flip:
//   out[c][h][w] = in[c][h + top - P][w' + left - P], w' = flip ? W-1-w : w
// (0 where that falls outside `in`). in and out must not overlap.
template <class T>
void augment_sample(const T* in, T* out, std::int64_t channels, std::int64_t height, std::int64_t width,
                    std::int64_t padding, const AugmentDraw& draw) {
  for (std::int64_t c = 0; c < channels; ++c)
    for (std::int64_t h = 0; h < height; ++h) {
      const std::int64_t sh = h + draw.top - padding;
      T* row = out + (c * height + h) * width;
      if (sh < 0 || sh >= height) {
        for (std::int64_t w = 0; w < width; ++w) row[w] = T(0);
        continue;
      }
      const T* src = in + (c * height + sh) * width;
      for (std::int64_t w = 0; w < width; ++w) {
        const std::int64_t sw = (draw.flip ? width - 1 - w : w) + draw.left - padding;
        row[w] = sw >= 0 && sw < width ? src[sw] : T(0);
      }
    }
}

// Augments batch x (N×C×H×W) in place; samples[i] is row i's global index.
void augment_batch(Tensor& x, const std::vector<std::int64_t>& samples, const AugmentOptions& options,
                   std::int64_t epoch);

}  // namespace dlscale
