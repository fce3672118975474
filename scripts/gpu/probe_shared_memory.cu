// One-off probe behind shared placement's per-rank memory accounting: several processes on one
// GPU, each allocating a different amount; what does each see through cudaMemGetInfo
// (device-wide) and through NVML's per-process lists, with and without an MPS server?
// Build: nvcc -O2 -arch=sm_90 -o probe scripts/gpu/probe_shared_memory.cu -ldl
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime.h>

struct ProcInfo { unsigned int pid; unsigned long long used; unsigned int gi, ci; };  // nvmlProcessInfo_t (v2/v3 layout)
using InitFn = int (*)();
using HandleFn = int (*)(unsigned int, void**);
using ProcsFn = int (*)(void*, unsigned int*, ProcInfo*);

static void nvml_list(const char* tag) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!lib) { printf("[%d %s] no libnvidia-ml: %s\n", getpid(), tag, dlerror()); return; }
  auto init = (InitFn)dlsym(lib, "nvmlInit_v2");
  auto handle = (HandleFn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
  if (!init || !handle || init() != 0) { printf("nvml init failed\n"); return; }
  void* dev = nullptr; handle(0, &dev);
  const char* names[] = {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetMPSComputeRunningProcesses_v3"};
  for (const char* n : names) {
    auto fn = (ProcsFn)dlsym(lib, n);
    if (!fn) { printf("[%d %s] %s missing\n", getpid(), tag, n); continue; }
    ProcInfo infos[64]; unsigned int count = 64;
    int rc = fn(dev, &count, infos);
    printf("[%d %s] %s rc=%d count=%u:", getpid(), tag, n, rc, count);
    for (unsigned i = 0; i < count && rc == 0; ++i) printf(" pid %u used %.1f MiB;", infos[i].pid, infos[i].used / 1048576.0);
    printf("\n");
  }
  fflush(stdout);
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 2;
  for (int r = 0; r < n; ++r) {
    if (fork() == 0) {
      cudaFree(0);
      size_t f0, t0; cudaMemGetInfo(&f0, &t0);
      void* p = nullptr;
      cudaError_t e = cudaMalloc(&p, (size_t)(r + 1) << 30);
      size_t f1, t1; cudaMemGetInfo(&f1, &t1);
      printf("[%d rank %d] ctx used %.1f MiB, after %d GiB used %.1f MiB (%s)\n", getpid(), r, (t0 - f0) / 1048576.0, r + 1,
             (t1 - f1) / 1048576.0, cudaGetErrorString(e));
      fflush(stdout);
      sleep(2);
      if (r == 0) nvml_list("rank0");
      sleep(2);
      _exit(0);
    }
  }
  sleep(1);
  for (int r = 0; r < n; ++r) wait(nullptr);
  return 0;
}
