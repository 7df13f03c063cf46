// A GPU rank's training step: pinned staging on a copy stream, the device
// network, gradient buckets all-reduced with NCCL as backward finishes them,
// the loss-scale check and the device solver.
#include <array>
#include <cmath>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <string>

#include "layers/cuda_layers.h"
#include "layers/device_network.cuh"
#include "runtime/training/device_optimizer.cuh"
#include "runtime/core/gpu_context.cuh"
#include "runtime/training/gpu_training.h"
#include "runtime/parallel/bucket_schedule.h"
#include "runtime/parallel/nccl_allreduce.h"

namespace dlscale {

namespace {

// Two slots of pinned host memory and device memory for batches, copied on
// a stream of their own so the next batch is on the device before the
// current step ends (the seed's minibatchqueue onto gpuArray). A slot is
// refilled only after the compute stream is done with its last batch.
//
// Both slots are allocated once, at the largest batch, in the constructor
// after the compute stream is idle, and never change. The caching
// allocator hands out blocks in host order, which is safe for one stream
// only: a slot taken later (the first stage(next), after forward was
// queued, or a slot regrown for a larger batch) could get a block that
// forward released while its kernels still read it, and the copy stream
// would overwrite it under them. The other fix, a stream-aware allocator
// (an event recorded per released block and queried before reuse, as
// PyTorch's recordStream), costs events and bookkeeping on every release
// for the one user on a second stream, whose need is known up front: the
// sampler drops partial batches, so every training batch has the same size.
class BatchStager {
 public:
  struct Staged {
    const float* x = nullptr;
    const std::int32_t* labels = nullptr;
    std::int64_t batch = 0;
    int slot = 0;
  };

  // max_batch samples of sample_numel floats and labels_per_sample labels
  // (1, or T for token data) per slot.
  BatchStager(GpuContext& ctx, std::int64_t max_batch, std::int64_t sample_numel, std::int64_t labels_per_sample)
      : ctx_(ctx),
        max_batch_(max_batch),
        max_labels_(max_batch * labels_per_sample),
        x_capacity_(sizeof(float) * static_cast<std::size_t>(max_batch * sample_numel)) {
    DLSCALE_REQUIRE(max_batch > 0 && sample_numel > 0 && labels_per_sample > 0,
                    "the batch stager needs the batch size, sample shape and labels per sample");
    DLSCALE_CHECK_CUDA(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    // Idle: every block released so far is no longer read by any kernel.
    ctx_.synchronize();
    const std::size_t bytes = x_capacity_ + sizeof(std::int32_t) * static_cast<std::size_t>(max_labels_);
    for (Slot& s : slots_) {
      DLSCALE_CHECK_CUDA(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
      DLSCALE_CHECK_CUDA(cudaEventCreateWithFlags(&s.consumed, cudaEventDisableTiming));
      s.host = DeviceBuffer(ctx_.pinned_allocator(), bytes);
      s.device = ctx_.alloc(bytes);
    }
  }
  ~BatchStager() {
    if (copy_stream_) cudaStreamSynchronize(copy_stream_);
    for (Slot& s : slots_) {
      if (s.copied) cudaEventDestroy(s.copied);
      if (s.consumed) cudaEventDestroy(s.consumed);
    }
    if (copy_stream_) cudaStreamDestroy(copy_stream_);
  }
  BatchStager(const BatchStager&) = delete;
  BatchStager& operator=(const BatchStager&) = delete;

  // Queues batch's copy; at most two batches are staged and not yet taken.
  void stage(const Batch& batch) {
    DLSCALE_REQUIRE(queued_.size() < slots_.size(), "more than two batches staged");
    DLSCALE_REQUIRE(batch.x.dtype() == DType::f32, "the GPU backend trains on float32 batches");
    const int k = next_slot_;
    next_slot_ = (next_slot_ + 1) % static_cast<int>(slots_.size());
    Slot& s = slots_[k];
    const std::size_t x_bytes = batch.x.bytes(), label_bytes = sizeof(std::int32_t) * batch.labels.size();
    // Never regrown (see the class comment).
    DLSCALE_REQUIRE(static_cast<std::int64_t>(batch.labels.size()) <= max_labels_ && x_bytes <= x_capacity_,
                    "a batch of " + std::to_string(batch.labels.size()) + " labels (" + std::to_string(x_bytes) +
                        " bytes) does not fit the staging slots of " + std::to_string(max_batch_) + " samples (" +
                        std::to_string(max_labels_) + " labels, " + std::to_string(x_capacity_) + " bytes)");
    // The pinned block may still be feeding this slot's previous copy.
    DLSCALE_CHECK_CUDA(cudaEventSynchronize(s.copied));
    std::memcpy(s.host.get(), batch.x.raw(), x_bytes);
    std::memcpy(s.host.as<char>() + x_bytes, batch.labels.data(), label_bytes);
    // The device block may still be read by the step that used it last.
    DLSCALE_CHECK_CUDA(cudaStreamWaitEvent(copy_stream_, s.consumed, 0));
    DLSCALE_CHECK_CUDA(
        cudaMemcpyAsync(s.device.get(), s.host.get(), x_bytes + label_bytes, cudaMemcpyHostToDevice, copy_stream_));
    DLSCALE_CHECK_CUDA(cudaEventRecord(s.copied, copy_stream_));
    queued_.push_back({s.device.as<float>(), reinterpret_cast<const std::int32_t*>(s.device.as<char>() + x_bytes),
                       batch.x.rank() ? batch.x.dim(0) : 0, k});
  }

  bool empty() const { return queued_.empty(); }
  void clear() { queued_.clear(); }

  // The oldest staged batch; work queued on the compute stream after this waits for its copy.
  Staged take() {
    DLSCALE_REQUIRE(!queued_.empty(), "no staged batch");
    Staged front = queued_.front();
    queued_.pop_front();
    DLSCALE_CHECK_CUDA(cudaStreamWaitEvent(gpu::stream(ctx_), slots_[front.slot].copied, 0));
    return front;
  }
  // The compute stream has queued everything that reads the batch.
  void release(const Staged& staged) {
    DLSCALE_CHECK_CUDA(cudaEventRecord(slots_[staged.slot].consumed, gpu::stream(ctx_)));
  }

 private:
  struct Slot {
    DeviceBuffer host, device;  // x then labels
    cudaEvent_t copied = nullptr, consumed = nullptr;
  };
  GpuContext& ctx_;
  std::int64_t max_batch_, max_labels_;
  std::size_t x_capacity_;
  cudaStream_t copy_stream_ = nullptr;
  std::array<Slot, 2> slots_;
  int next_slot_ = 0;
  std::deque<Staged> queued_;
};

// GradientBuckets' plan on device gradients: bucket b is one contiguous
// range of DeviceNetwork's gradient block, all-reduced in place by NCCL as
// soon as backward has queued its last gradient (PyTorch DDP's overlap).
// Every rank's gradient already carries 1/global batch, so the sum is the
// mean gradient, as on the CPU path. Which bucket starts when, and the
// layout check, are BucketSchedule's (tested in CI without a GPU); this
// class only turns its ranges into NCCL calls on the compute stream.
class DeviceBuckets final : public BucketReducer {
 public:
  DeviceBuckets(const GradientBuckets& plan, const DeviceNetwork& net, NcclAllreduce& nccl, GpuContext& ctx)
      : nccl_(nccl), ctx_(ctx), block_(net.gradient_block()), schedule_(plan_of(plan), span_in(net), *this) {}

  void mark_ready(const std::vector<Param*>& ready) { schedule_.mark_ready(ready); }
  // Starts what is left and waits for every sum; the compute stream may go on.
  void finish() { schedule_.finish(); }

  void start(const BucketRange& r) override {
    nccl_.start(block_ + r.offset, r.count, DType::f32, gpu::stream(ctx_));
  }
  // This rank's own backward first (compute time; it cannot wait on other
  // ranks), then the sums: what is left is the wait for the others. The
  // last bucket's sum waits for the same backward, so the step ends no later.
  void wait() override {
    ctx_.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    nccl_.wait();
    wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  double wait_seconds() const { return wait_s_; }

 private:
  static std::vector<std::vector<Param*>> plan_of(const GradientBuckets& plan) {
    std::vector<std::vector<Param*>> buckets;
    for (std::size_t b = 0; b < plan.bucket_count(); ++b) buckets.push_back(plan.bucket_params(b));
    return buckets;
  }
  static std::function<BucketSchedule::Span(const Param*)> span_in(const DeviceNetwork& net) {
    return [&net](const Param* p) {
      const gpu::DeviceParam& d = net.device_param(p);
      DLSCALE_REQUIRE(d.grad >= net.gradient_block(), "a device gradient lies outside the gradient block");
      return BucketSchedule::Span{static_cast<std::size_t>(d.grad - net.gradient_block()),
                                  static_cast<std::size_t>(d.count)};
    };
  }

  NcclAllreduce& nccl_;
  GpuContext& ctx_;
  float* block_;
  BucketSchedule schedule_;
  double wait_s_ = 0;
};

class CudaTraining final : public GpuTraining {
 public:
  CudaTraining(Network& net, Optimizer& optimizer, GradientBuckets& buckets, Communicator& comm,
               const GpuTrainingOptions& o)
      : host_net_(net),
        host_buckets_(buckets),
        comm_(comm),
        ctx_(o.device, comm.rank(), GpuOptions{o.deterministic, false}),
        net_(net, ctx_, o.dropout_seed, gpu::math_precision_from_name(o.half_type)),
        optimizer_(optimizer, net.params(), net_.params(), ctx_),
        stager_(ctx_, o.batch_size, numel(net.spec().input_shape), net.positions()),
        forced_host_(o.reduce_hook.path == GpuReduceHook::Path::host) {
    if (use_nccl(comm, o)) {
      nccl_ = std::make_unique<NcclAllreduce>(comm, o.device, o.deterministic, o.reduce_hook.nccl_factor);
      buckets_ = std::make_unique<DeviceBuckets>(buckets, net_, *nccl_, ctx_);
    }
  }

  GpuStepResult step(const Batch& batch, const Batch* next, double normalizer, double learn_rate,
                     std::int64_t iteration, LossScaler* scaler) override {
    if (stager_.empty()) stager_.stage(batch);
    const BatchStager::Staged staged = stager_.take();
    // One prediction per sample, or per position of a token window (positions = T).
    const std::int64_t predictions = staged.batch * host_net_.positions();
    DLSCALE_REQUIRE(predictions == static_cast<std::int64_t>(batch.labels.size()),
                    "the staged batch is not the one being trained");
    const float* logits = net_.forward_logits(staged.x, staged.batch, true, static_cast<std::uint64_t>(iteration));
    // The next batch's copy overlaps this step from here on.
    if (next) stager_.stage(*next);
    DeviceBuffer dlogits = ctx_.alloc(sizeof(float) * std::max<std::int64_t>(predictions * net_.num_classes(), 1));
    const gpu::LossSums sums = gpu::softmax_cross_entropy(ctx_, logits, staged.labels, predictions,
                                                          net_.num_classes(), normalizer, dlogits.as<float>());
    net_.backward(dlogits.as<float>(), [&](const std::vector<Param*>& ready) {
      if (buckets_) buckets_->mark_ready(ready);
    });
    stager_.release(staged);
    reduce_gradients();
    GpuStepResult result{{sums.loss_sum, sums.correct}, true};
    if (scaler) {
      float* grads = net_.gradient_block();
      const std::int64_t n = net_.gradient_count();
      gpu::scale(ctx_, grads, n, 1.0 / scaler->scale());
      const bool finite = std::isfinite(gpu::squared_norm(ctx_, grads, n));
      result.step_taken = scaler->decide(finite, std::isfinite(sums.loss_sum), iteration + 1, comm_);
    }
    if (result.step_taken) optimizer_.step(learn_rate);
    return result;
  }

  void clear_staged() override { stager_.clear(); }
  double peer_wait_seconds() const override { return buckets_ ? buckets_->wait_seconds() : 0; }

  LossResult evaluate(const Batch& batch) override {
    DeviceBuffer x = to_device(ctx_, batch.x);
    DeviceBuffer labels = ctx_.alloc(sizeof(std::int32_t) * std::max<std::size_t>(batch.labels.size(), 1));
    ctx_.upload(labels.get(), batch.labels.data(), sizeof(std::int32_t) * batch.labels.size());
    const std::int64_t predictions = static_cast<std::int64_t>(batch.labels.size());
    const float* logits = net_.forward_logits(x.as<float>(), batch.x.rank() ? batch.x.dim(0) : 0, false, 0);
    const gpu::LossSums sums = gpu::softmax_cross_entropy(ctx_, logits, labels.as<std::int32_t>(), predictions,
                                                          net_.num_classes(), 1.0, nullptr);
    return {sums.loss_sum, sums.correct};
  }

  void to_host() override {
    net_.to_host();
    optimizer_.to_host();
  }
  void from_host() override {
    net_.from_host();
    optimizer_.from_host();
  }

 private:
  // NCCL buckets were started during backward; the MPI path of a mixed job
  // takes the gradients through the host buckets instead.
  void reduce_gradients() {
    if (buckets_) {
      buckets_->finish();
      return;
    }
    if (comm_.size() == 1 && !forced_host_) return;
    const auto params = host_net_.params();
    const auto& device = net_.params();
    for (std::size_t i = 0; i < params.size(); ++i)
      ctx_.download(params[i]->grad.raw(), device[i].grad, params[i]->grad.bytes());
    host_buckets_.mark_ready(params);
    host_buckets_.finish();
    for (std::size_t i = 0; i < params.size(); ++i)
      ctx_.upload(device[i].grad, params[i]->grad.raw(), params[i]->grad.bytes());
    ctx_.synchronize();
  }

  // NCCL when every computing rank has a GPU and there is someone to sum
  // with; DLSCALE_GPU_REDUCE (gpu_reduce_hook.h) forces either path.
  static bool use_nccl(const Communicator& comm, const GpuTrainingOptions& o) {
    switch (o.reduce_hook.path) {
      case GpuReduceHook::Path::host:
        return false;
      case GpuReduceHook::Path::nccl:
        if (!o.nccl)
          fail("rank " + std::to_string(comm.rank()) + ": DLSCALE_GPU_REDUCE=nccl-x2 needs every computing rank "
               "on a GPU, but this job mixes CPU and GPU ranks");
        return true;
      case GpuReduceHook::Path::automatic:
        break;
    }
    return comm.size() > 1 && o.nccl;
  }

  Network& host_net_;
  GradientBuckets& host_buckets_;
  Communicator& comm_;
  GpuContext ctx_;
  DeviceNetwork net_;
  DeviceOptimizer optimizer_;
  BatchStager stager_;
  bool forced_host_;  // DLSCALE_GPU_REDUCE=host: the host buckets even with one rank
  std::unique_ptr<NcclAllreduce> nccl_;
  std::unique_ptr<DeviceBuckets> buckets_;
};

}  // namespace

std::unique_ptr<GpuTraining> make_gpu_training(Network& net, Optimizer& optimizer, GradientBuckets& buckets,
                                               Communicator& comm, const GpuTrainingOptions& options) {
  if (net.dtype() != DType::f32)
    fail("rank " + std::to_string(comm.rank()) + " trains on a GPU, which computes in single precision; set "
         "training-precision=single (double is for CPU ranks)");
  return std::make_unique<CudaTraining>(net, optimizer, buckets, comm, options);
}

}  // namespace dlscale
