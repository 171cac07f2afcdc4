// A CUDA trainer for scripts/gpu_check.sh: fed by goldminer over the client C ABI
// (include/goldminer/client.h), it does what a training step does to a GPU.
//
// Each step: gm_client_next (the data wait), cudaMemcpy of the batch host to device,
// a kernel that spins for --kernel-ms milliseconds, cudaDeviceSynchronize. The spin
// is a clock64() busy loop; its cycles per millisecond are measured once at start
// with CUDA events, so a step's GPU time is --kernel-ms whatever the clock speed.
// Batches without data (a "range" source without stages) are stood in for by
// --copy-bytes bytes, so every step copies.
//
//   --steps N        stop after N steps (default 0: until the data ends or a signal)
//   --kernel-ms X    GPU time per step in milliseconds (default 20)
//   --copy-bytes B   bytes copied for a batch without data (default 1 MiB)
//
// Signals keep their default action: `goldminer profile` stops the trainer with
// SIGTERM, which the CUPTI injection library handles (flush, then die of it).
// Exit: 0 at the end, 2 on a client error, 3 on a CUDA error, 64 on bad flags.
//
// Build: nvcc -O2 -I include tests/gpu/cuda_trainer.cu -o cuda_trainer \
//          -L BUILD/client -lgoldminer_client -Xlinker -rpath -Xlinker BUILD/client
#include <cuda_runtime.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "goldminer/client.h"

namespace {

struct Options {
  long steps = 0;
  double kernel_ms = 20;
  double copy_bytes = 1 << 20;
};

bool ParseOptions(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; i += 2) {
    char* end = nullptr;
    errno = 0;
    double value = i + 1 < argc ? std::strtod(argv[i + 1], &end) : -1;
    if (i + 1 >= argc || errno != 0 || end == argv[i + 1] || *end != '\0' || value < 0) {
      std::fprintf(stderr, "cuda_trainer: %s needs a number >= 0\n", argv[i]);
      return false;
    }
    if (std::strcmp(argv[i], "--steps") == 0) {
      o.steps = static_cast<long>(value);
    } else if (std::strcmp(argv[i], "--kernel-ms") == 0) {
      o.kernel_ms = value;
    } else if (std::strcmp(argv[i], "--copy-bytes") == 0) {
      o.copy_bytes = value;
    } else {
      std::fprintf(stderr, "cuda_trainer: unknown flag %s (--steps, --kernel-ms, --copy-bytes)\n",
                   argv[i]);
      return false;
    }
  }
  return true;
}

__global__ void Spin(long long cycles, unsigned long long* sink) {
  long long start = clock64();
  long long now = start;
  while (now - start < cycles) now = clock64();
  if (threadIdx.x == 0 && blockIdx.x == 0) *sink += static_cast<unsigned long long>(now - start);
}

bool CudaOk(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "cuda_trainer: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// clock64() cycles per millisecond, measured with events over a ~50 ms spin.
bool CyclesPerMs(unsigned long long* sink, double& out) {
  int khz = 0;
  if (!CudaOk(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0), "clock rate")) return false;
  double guess = khz > 0 ? khz : 1.5e6;
  cudaEvent_t begin, end;
  if (!CudaOk(cudaEventCreate(&begin), "cudaEventCreate") ||
      !CudaOk(cudaEventCreate(&end), "cudaEventCreate")) {
    return false;
  }
  cudaEventRecord(begin);
  Spin<<<1, 32>>>(static_cast<long long>(guess * 50), sink);
  cudaEventRecord(end);
  if (!CudaOk(cudaEventSynchronize(end), "calibration spin")) return false;
  float ms = 0;
  cudaEventElapsedTime(&ms, begin, end);
  out = ms > 0 ? guess * 50 / ms : guess;
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  std::printf("cuda_trainer: clock64 runs at %.0f cycles/ms (nominal %d kHz)\n", out, khz);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseOptions(argc, argv, o)) return 64;
  unsigned long long* sink = nullptr;
  if (!CudaOk(cudaMalloc(&sink, sizeof(*sink)), "cudaMalloc")) return 3;
  double cycles_per_ms = 0;
  if (!CyclesPerMs(sink, cycles_per_ms)) return 3;
  std::vector<unsigned char> stand_in(static_cast<size_t>(o.copy_bytes), 1);
  void* device = nullptr;
  size_t device_bytes = 0;

  gm_client* client = nullptr;
  if (gm_client_open(nullptr, -1, -1, &client) != GM_OK) {
    std::fprintf(stderr, "cuda_trainer: %s\n", gm_last_error());
    return 2;
  }
  long steps = 0;
  unsigned long long samples = 0;
  int rc = 0;
  while (o.steps == 0 || steps < o.steps) {
    gm_batch* batch = nullptr;
    if (gm_client_next(client, &batch) != GM_OK) {
      std::fprintf(stderr, "cuda_trainer: %s\n", gm_last_error());
      rc = 2;
      break;
    }
    if (batch == nullptr) break;  // the end of the epoch
    const void* data = gm_batch_data(batch);
    size_t bytes = gm_batch_data_bytes(batch);
    if (bytes == 0) {
      data = stand_in.data();
      bytes = stand_in.size();
    }
    if (bytes > device_bytes) {
      cudaFree(device);
      if (!CudaOk(cudaMalloc(&device, bytes), "cudaMalloc")) return 3;
      device_bytes = bytes;
    }
    if (!CudaOk(cudaMemcpy(device, data, bytes, cudaMemcpyHostToDevice), "cudaMemcpy")) return 3;
    Spin<<<1, 32>>>(static_cast<long long>(o.kernel_ms * cycles_per_ms), sink);
    if (!CudaOk(cudaDeviceSynchronize(), "step")) return 3;
    samples += gm_batch_size(batch);
    gm_batch_free(batch);
    ++steps;
  }
  gm_client_stats stats{};
  gm_client_stats_get(client, &stats);
  gm_client_close(client);
  cudaFree(device);
  cudaFree(sink);
  std::printf("cuda_trainer: %ld steps, %llu samples, %.3f s data wait\n", steps, samples,
              stats.data_wait_s);
  return rc;
}
