// Background prefetch of mini-batches so reading overlaps compute (the seed's
// minibatchqueue). One reader thread owns its HDF5 handles.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "io/augment.h"
#include "io/dataset.h"

namespace dlscale {

struct Batch {
  Tensor x;                          // N × sample_shape
  std::vector<std::int32_t> labels;  // N
};

class PrefetchLoader {
 public:
  // Reads `batches` (lists of global sample indices) in order, at most
  // `depth` batches ahead of the consumer. With augment enabled, each sample
  // is augmented (in the reader thread) as drawn for (augment.seed, epoch,
  // its global index).
  PrefetchLoader(DatasetInfo info, std::vector<std::vector<std::int64_t>> batches, DType dtype, int depth = 2,
                 AugmentOptions augment = {}, std::int64_t epoch = 0);
  ~PrefetchLoader();  // stops the thread and joins it
  PrefetchLoader(const PrefetchLoader&) = delete;
  PrefetchLoader& operator=(const PrefetchLoader&) = delete;

  // The next batch, or nullopt after the last one. An error in the reader
  // thread is rethrown here, on the consumer's thread.
  std::optional<Batch> next();

 private:
  void run();

  DatasetInfo info_;
  std::vector<std::vector<std::int64_t>> batches_;
  DType dtype_;
  std::size_t depth_;
  AugmentOptions augment_;
  std::int64_t epoch_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Batch> ready_;
  std::size_t produced_ = 0, consumed_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace dlscale
