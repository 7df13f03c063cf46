#!/usr/bin/env bash
# Builds the GPU check programs here and packs them, with every shared
# library they need but glibc and the big CUDA libraries, into
# gpu-bundle.tar.xz (ignored), for a lent GPU machine that cannot build them:
# its image has nvcc, CMake and PyTorch (with cuDNN, NCCL and cuBLAS as
# Python wheels) but no Open MPI, HDF5, Boost, OpenBLAS or GoogleTest, and
# no package registry. bench/gpu_check.sh unpacks it there and finds the
# CUDA libraries of that machine (docs/benchmarks.md, "GPU").
#   bench/gpu_bundle.sh        (BUILD: the build folder, default build-gpu-bundle)
# Then carry ["gpu-bundle.tar.xz", "data/fashion-mnist-idx"] in the device call.
#
# Inside: bin/ (dlscale and the GPU tests), lib/ (libdlscale.so and the
# ldd closure, cudart included), and Open MPI's plugins and help texts under
# usr/ as Open MPI lays them out, so OPAL_PREFIX relocates it; ranks there
# run as isolated MPI singletons (no mpirun, no orted). Built without oneDNN
# (CPU fast paths only; 38 MB the GPU checks do not need).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build-gpu-bundle}
programs=(launch/dlscale tests/gpu/test_layer_gpu tests/gpu/test_train_gpu tests/gpu/test_device_allocator
  tests/runtime/test_nccl_gpu)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDLSCALE_CUDA=ON -DCMAKE_DISABLE_FIND_PACKAGE_dnnl=ON >/dev/null
targets=()
for p in "${programs[@]}"; do targets+=("$(basename "$p")"); done
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for p in "${programs[@]}"; do cp "$build/$p" "$stage/bin/"; done

ompi=/usr/lib/x86_64-linux-gnu/openmpi
pmix=/usr/lib/x86_64-linux-gnu/pmix2
mkdir -p "$stage$ompi/lib" "$stage/usr/share" "$stage$pmix"
cp -a "$ompi/lib/openmpi3" "$stage$ompi/lib/"
cp -a /usr/share/openmpi "$stage/usr/share/"
cp -a "$pmix/lib" "$stage$pmix/"

# Every shared library the programs and plugins load, but glibc's (the lent
# machine's newer glibc runs what was linked here) and the CUDA libraries
# that machine has in its own versions (cuBLAS, cuDNN, NCCL, the driver).
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libcuda\.so|libcublas|libcudnn|libnccl|libnvidia)'
{
  for f in "$stage"/bin/* "$build/libdlscale.so"; do ldd "$f"; done
  find "$stage/usr" -name '*.so*' -type f -exec ldd {} \; 2>/dev/null
} | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u | while read -r name path; do
  if [[ ! $name =~ $skip ]]; then cp -L "$path" "$stage/lib/$name"; fi
done
cp -L "$build/libdlscale.so" "$stage/lib/"

rm -f gpu-bundle.tar.xz
tar -cJf gpu-bundle.tar.xz -C "$stage" .
echo "gpu-bundle.tar.xz: $(du -h gpu-bundle.tar.xz | cut -f1) ($(du -sh "$stage" | cut -f1) unpacked); carry it in the device call"
