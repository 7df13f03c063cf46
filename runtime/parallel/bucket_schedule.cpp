// Bucket scheduling shared by the NCCL buckets; see bucket_schedule.h.
#include "runtime/parallel/bucket_schedule.h"

#include <algorithm>
#include <string>

#include "runtime/core/error.h"

namespace dlscale {

namespace {
std::string describe(std::size_t bucket, std::size_t index, const Param* p) {
  return "bucket " + std::to_string(bucket) + ", param " + std::to_string(index) + " ('" + p->name + "')";
}
}  // namespace

BucketSchedule::BucketSchedule(const std::vector<std::vector<Param*>>& buckets,
                               const std::function<Span(const Param*)>& span_of, BucketReducer& reducer)
    : reducer_(reducer) {
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const auto& params = buckets[b];
    DLSCALE_REQUIRE(!params.empty(), "gradient bucket " + std::to_string(b) + " has no params");
    Bucket bucket;
    bucket.range.bucket = b;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const Span s = span_of(params[i]);
      if (i == 0) bucket.range.offset = s.offset;
      // The reduction covers the range as one buffer: a gap or another
      // order would sum memory that is not this bucket's gradients.
      if (s.offset != bucket.range.offset + bucket.range.count)
        fail("gradients are not laid out in bucket order: " + describe(b, i, params[i]) + " starts at element " +
             std::to_string(s.offset) + ", where the bucket's previous gradient ends at element " +
             std::to_string(bucket.range.offset + bucket.range.count));
      bucket.range.count += s.count;
      entries_.push_back({params[i], b, false});
    }
    bucket.params = bucket.pending = params.size();
    buckets_.push_back(bucket);
  }
  std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) { return a.param < b.param; });
  for (std::size_t i = 1; i < entries_.size(); ++i)
    if (entries_[i].param == entries_[i - 1].param)
      fail("param '" + entries_[i].param->name + "' is in gradient buckets " + std::to_string(entries_[i - 1].bucket) +
           " and " + std::to_string(entries_[i].bucket));
}

BucketSchedule::Entry* BucketSchedule::find(const Param* p) {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), p,
                             [](const Entry& e, const Param* key) { return e.param < key; });
  return it != entries_.end() && it->param == p ? &*it : nullptr;
}

void BucketSchedule::mark_ready(const std::vector<Param*>& ready) {
  for (const Param* p : ready) {
    Entry* e = find(p);
    if (!e) continue;  // not a bucketed parameter
    if (e->reported)
      fail("param '" + p->name + "' of gradient bucket " + std::to_string(e->bucket) +
           " was reported ready twice in one step");
    e->reported = true;
    --buckets_[e->bucket].pending;
  }
  while (next_ < buckets_.size() && buckets_[next_].pending == 0) reducer_.start(buckets_[next_++].range);
}

void BucketSchedule::finish() {
  // Whatever backward did not report is final now.
  while (next_ < buckets_.size()) reducer_.start(buckets_[next_++].range);
  // Reset first: a wait that throws ends the step, and the next one starts clean.
  for (Bucket& b : buckets_) b.pending = b.params;
  for (Entry& e : entries_) e.reported = false;
  next_ = 0;
  reducer_.wait();
}

}  // namespace dlscale
