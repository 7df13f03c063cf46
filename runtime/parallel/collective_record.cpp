#include "runtime/parallel/collective_record.h"

#include <algorithm>
#include <chrono>

namespace dlscale {

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

CollectiveRecord::CollectiveRecord(std::size_t capacity) : ring_(capacity > 0 ? capacity : 1) {}

void CollectiveRecord::begin(const char* kind, std::int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  CollectiveEntry& e = ring_[static_cast<std::size_t>(next_seq_ - 1) % ring_.size()];
  e.seq = next_seq_++;
  e.kind.assign(kind ? kind : "a collective");  // reuses the slot's buffer once the ring is warm
  e.bytes = bytes;
  e.iteration = iteration_;
  e.started = wall_seconds();
  e.ended = 0;
}

void CollectiveRecord::end() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (next_seq_ == 1) return;
  ring_[static_cast<std::size_t>(next_seq_ - 2) % ring_.size()].ended = wall_seconds();
}

void CollectiveRecord::set_iteration(std::int64_t iteration) {
  std::lock_guard<std::mutex> lock(mutex_);
  iteration_ = iteration;
  ++progress_;
}

void CollectiveRecord::note_progress() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++progress_;
}

void CollectiveRecord::set_activity(const char* what, double limit_s) {
  std::lock_guard<std::mutex> lock(mutex_);
  activity_ = what, activity_limit_ = what ? limit_s : 0;
  ++progress_;
}

WorkProgress CollectiveRecord::progress() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {progress_, activity_ ? activity_ : "", activity_limit_};
}

std::vector<CollectiveEntry> CollectiveRecord::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::int64_t n = std::min<std::int64_t>(next_seq_ - 1, static_cast<std::int64_t>(ring_.size()));
  std::vector<CollectiveEntry> out;
  out.reserve(static_cast<std::size_t>(n));
  for (std::int64_t s = next_seq_ - n; s < next_seq_; ++s) out.push_back(ring_[static_cast<std::size_t>(s - 1) % ring_.size()]);
  return out;
}

std::optional<CollectiveEntry> CollectiveRecord::last() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (next_seq_ == 1) return std::nullopt;
  return ring_[static_cast<std::size_t>(next_seq_ - 2) % ring_.size()];
}

}  // namespace dlscale
