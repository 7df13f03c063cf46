// Which gradient bucket is reduced when, without the reduction itself: the
// part of the GPU rank's NCCL buckets (runtime/training/gpu_training.cu,
// DeviceBuckets) that needs no device, so CI tests it against a fake reducer
// (tests/runtime/parallel/bucket_schedule_test.cpp).
//  - Bucket b covers one contiguous range of a flat gradient block; the
//    constructor checks that the params' gradients lie there in bucket order.
//  - A bucket starts once backward has reported every one of its params, and
//    strictly in plan order: a later bucket that is complete waits for the
//    earlier ones, because NCCL needs every rank to issue the same
//    collectives in the same order and backward's order may differ by rank.
//  - finish() starts what is left, waits for every reduction and resets the
//    counts for the next step.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "layers/layer.h"

namespace dlscale {

// A bucket's gradients: `count` elements from element `offset` of the block.
struct BucketRange {
  std::size_t bucket = 0, offset = 0, count = 0;
};

// What reduces the buckets (NCCL on the device; a recorder in tests).
class BucketReducer {
 public:
  virtual ~BucketReducer() = default;
  virtual void start(const BucketRange& range) = 0;  // queue the in-place sum of range
  virtual void wait() = 0;                           // every started sum is done
};

class BucketSchedule {
 public:
  // Where a param's gradient lies in the flat block (elements).
  struct Span {
    std::size_t offset = 0, count = 0;
  };
  // buckets: params of each bucket in plan order (GradientBuckets::bucket_params).
  // span_of is asked once per param. Throws naming the bucket and param when a
  // bucket is empty, a param is in two buckets, or a bucket's gradients do not
  // follow one another in the block.
  BucketSchedule(const std::vector<std::vector<Param*>>& buckets, const std::function<Span(const Param*)>& span_of,
                 BucketReducer& reducer);

  // Backward has produced the gradients of `ready` (one layer's params, maybe
  // none): starts every bucket that is complete now and has no earlier bucket
  // still waiting. Params of no bucket are ignored; a param reported twice
  // in one step is an error (counting it twice would start its bucket while
  // another gradient of it is still being written).
  void mark_ready(const std::vector<Param*>& ready);
  // Starts what is left in plan order, waits for all, and resets for the next step.
  void finish();

  std::size_t bucket_count() const { return buckets_.size(); }
  const BucketRange& range(std::size_t b) const { return buckets_[b].range; }
  // Buckets started in this step so far.
  std::size_t started() const { return next_; }

 private:
  struct Bucket {
    BucketRange range;
    std::size_t params = 0, pending = 0;
  };
  struct Entry {
    const Param* param;
    std::size_t bucket;
    bool reported;
  };
  Entry* find(const Param* p);

  BucketReducer& reducer_;
  std::vector<Bucket> buckets_;
  std::vector<Entry> entries_;  // sorted by param pointer
  std::size_t next_ = 0;
};

}  // namespace dlscale
