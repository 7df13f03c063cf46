// PrefetchLoader: a producer thread reads batches through its own
// DatasetReader (HDF5 handles stay in the thread that uses them) into a
// bounded queue; the consumer takes them in order.
#include "io/loader.h"

#include <algorithm>

namespace dlscale {

PrefetchLoader::PrefetchLoader(DatasetInfo info, std::vector<std::vector<std::int64_t>> batches, DType dtype, int depth,
                               AugmentOptions augment, std::int64_t epoch)
    : info_(std::move(info)),
      batches_(std::move(batches)),
      dtype_(dtype),
      depth_(static_cast<std::size_t>(std::max(depth, 1))),
      augment_(augment),
      epoch_(epoch) {
  thread_ = std::thread([this] { run(); });
}

PrefetchLoader::~PrefetchLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PrefetchLoader::run() {
  try {
    DatasetReader reader(info_);
    for (std::size_t i = 0; i < batches_.size(); ++i) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stop_ || ready_.size() < depth_; });
        if (stop_) return;
      }
      // Read outside the queue lock so the consumer can take earlier batches.
      Batch batch;
      reader.read(batches_[i], dtype_, batch.x, batch.labels);
      augment_batch(batch.x, batches_[i], augment_, epoch_);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.push_back(std::move(batch));
        ++produced_;
      }
      cv_.notify_all();
    }
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
    }
    cv_.notify_all();
  }
}

std::optional<Batch> PrefetchLoader::next() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return !ready_.empty() || error_ || consumed_ == batches_.size(); });
  // Batches read before a failure are still delivered, so the error surfaces
  // exactly where the failing batch would have.
  if (!ready_.empty()) {
    Batch batch = std::move(ready_.front());
    ready_.pop_front();
    ++consumed_;
    lock.unlock();
    cv_.notify_all();
    return batch;
  }
  if (error_) std::rethrow_exception(error_);
  return std::nullopt;
}

}  // namespace dlscale
