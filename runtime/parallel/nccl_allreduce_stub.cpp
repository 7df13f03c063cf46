// NCCL all-reduce in builds without CUDA: every use says so.
#include "runtime/parallel/nccl_allreduce.h"

namespace dlscale {

struct NcclAllreduce::State {};

namespace {
[[noreturn]] void not_compiled() {
  fail("this dlscale was built without CUDA and NCCL (DLSCALE_CUDA=OFF or no toolkit found)");
}
}  // namespace

NcclAllreduce::NcclAllreduce(Communicator&, int, bool, float) { not_compiled(); }
NcclAllreduce::~NcclAllreduce() = default;
void NcclAllreduce::start(void*, std::size_t, DType, void*) { not_compiled(); }
void NcclAllreduce::wait() { not_compiled(); }
bool NcclAllreduce::compiled() { return false; }
std::vector<float> nccl_allreduce_roundtrip(Communicator&, int, const std::vector<float>&) { not_compiled(); }

}  // namespace dlscale
