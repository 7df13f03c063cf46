// Builds without oneDNN: conv2d always takes its im2col + GEMM path.
#include "layers/conv2d_onednn.h"

namespace dlscale {

std::unique_ptr<OnednnConv2d> OnednnConv2d::create(const Conv2dGeometry&, bool, std::int64_t, bool) {
  return nullptr;
}

}  // namespace dlscale
