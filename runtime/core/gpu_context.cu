// GpuContext: device, stream, cuBLAS/cuDNN handles and allocators of a rank.
#include <string>

#include "runtime/core/gpu_context.cuh"

namespace dlscale {

GpuContext::GpuContext(int device, int rank, GpuOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.device = device;
  s.rank = rank;
  s.options = options;
  int count = 0;
  DLSCALE_CHECK_CUDA(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count)
    fail("rank " + std::to_string(rank) + ": GPU " + std::to_string(device) + " was asked for but this process sees " +
         std::to_string(count) + " GPU(s); check CUDA_VISIBLE_DEVICES");
  DLSCALE_CHECK_CUDA(cudaSetDevice(device));
  // Non-blocking: the stream does not serialize with the legacy default
  // stream, which other threads and libraries may be using.
  DLSCALE_CHECK_CUDA(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  DLSCALE_CHECK_CUBLAS(cublasCreate(&s.cublas));
  DLSCALE_CHECK_CUBLAS(cublasSetStream(s.cublas, s.stream));
  // Default math never lowers FP32 inputs to TF32 (only NVIDIA_TF32_OVERRIDE=1
  // would); TF32 tensor cores only when asked for.
  DLSCALE_CHECK_CUBLAS(cublasSetMathMode(s.cublas, options.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                      : CUBLAS_DEFAULT_MATH));
  DLSCALE_CHECK_CUDNN(cudnnCreate(&s.cudnn));
  DLSCALE_CHECK_CUDNN(cudnnSetStream(s.cudnn, s.stream));
  // Debug mode covers device memory, where kernels on two streams race; the
  // pinned blocks are only the stager's, which keeps them for the whole run.
  s.allocator = std::make_unique<CachingAllocator>(make_cuda_device_backing(device, s.stream), rank,
                                                   allocator_mode_from_env());
  s.pinned = std::make_unique<CachingAllocator>(make_cuda_pinned_backing(), rank);
}

GpuContext::~GpuContext() = default;  // Impl's destructor releases everything

int GpuContext::device() const { return impl_->device; }
int GpuContext::rank() const { return impl_->rank; }
const GpuOptions& GpuContext::options() const { return impl_->options; }
void* GpuContext::stream() const { return impl_->stream; }
GpuContext::Impl& GpuContext::impl() { return *impl_; }
CachingAllocator& GpuContext::allocator() { return *impl_->allocator; }
CachingAllocator& GpuContext::pinned_allocator() { return *impl_->pinned; }

void GpuContext::synchronize() { DLSCALE_CHECK_CUDA(cudaStreamSynchronize(impl_->stream)); }

void GpuContext::upload(void* device_dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return;
  DLSCALE_CHECK_CUDA(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, impl_->stream));
  // Callers pass pageable memory (tensors, a local) and change or free it as
  // soon as this returns, and CUDA promises nothing about when an async copy
  // from pageable memory has read its source ("might be synchronous"). So
  // wait for the copy. Staging through pinned memory would keep it
  // asynchronous, but needs a pinned block per upload held until the copy
  // is done. The uploads are parameters and solver state (start, resume),
  // the host-bucket gradients (followed by a synchronize anyway),
  // evaluation batches, and per step only softmax's 8-byte label guard,
  // whose function waits for the stream a few calls later regardless; the
  // batches of the hot path are copied from pinned slots on the copy stream
  // (BatchStager), not through here.
  synchronize();
}

void GpuContext::download(void* host_dst, const void* device_src, std::size_t bytes) {
  if (bytes == 0) return;
  DLSCALE_CHECK_CUDA(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, impl_->stream));
  synchronize();
}

void GpuContext::zero(void* device_dst, std::size_t bytes) {
  if (bytes == 0) return;
  DLSCALE_CHECK_CUDA(cudaMemsetAsync(device_dst, 0, bytes, impl_->stream));
}

DeviceBuffer to_device(GpuContext& ctx, const Tensor& host) {
  DLSCALE_REQUIRE(host.dtype() == DType::f32,
                  "the GPU backend computes in float32 but got a " + to_string(host.dtype()) + " tensor");
  DeviceBuffer buffer = ctx.alloc(host.bytes());
  ctx.upload(buffer.get(), host.raw(), host.bytes());
  return buffer;
}

Tensor to_host(GpuContext& ctx, const void* device_src, const Shape& shape) {
  Tensor out(shape, DType::f32);
  ctx.download(out.raw(), device_src, out.bytes());
  return out;
}

}  // namespace dlscale
