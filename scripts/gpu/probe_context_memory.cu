// One-off probe behind gpu_catalog.h: the device total as cudaMemGetInfo reports it and the
// CUDA context footprint (used right after cudaFree(0) on an idle GPU).
// Build: nvcc -O2 -cudart static -arch=sm_90 -o probe scripts/gpu/probe_context_memory.cu
#include <cstdio>
#include <cuda_runtime.h>
__global__ void k(float* x) { x[threadIdx.x] += 1.f; }
int main() {
  cudaFree(0);
  size_t f0, t0; cudaMemGetInfo(&f0, &t0);
  cudaDeviceProp p; cudaGetDeviceProperties(&p, 0);
  int drv = 0, rt = 0; cudaDriverGetVersion(&drv); cudaRuntimeGetVersion(&rt);
  printf("name=%s driver=%d runtime=%d\n", p.name, drv, rt);
  printf("after_context total=%zu (%zu MiB) free=%zu used=%zu (%.1f MiB)\n", t0, t0 >> 20, f0, t0 - f0, (t0 - f0) / 1048576.0);
  float* x; cudaMalloc(&x, 1 << 20); k<<<1, 32>>>(x); cudaDeviceSynchronize();
  size_t f1, t1; cudaMemGetInfo(&f1, &t1);
  printf("after_kernel_and_1MiB free=%zu used=%zu (%.1f MiB) err=%s\n", f1, t1 - f1, (t1 - f1) / 1048576.0, cudaGetErrorString(cudaGetLastError()));
  fflush(stdout);
  return 0;
}
