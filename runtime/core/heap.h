// How glibc's malloc treats the large blocks training frees each step. A
// program that trains calls this once at start (the dlscale command line
// and the benchmarks do); the library itself leaves the allocator as its
// host program set it, so an embedding program or a test keeps its own
// settings.
#pragma once

namespace dlscale {

// Keeps freed blocks up to 32 MiB in the heap instead of returning them to
// the kernel (see heap.cpp for the measured cost); process-wide.
void keep_freed_tensor_memory_mapped();

}  // namespace dlscale
