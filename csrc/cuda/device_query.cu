// What the CUDA runtime and sysfs say about the GPUs: count, properties, PCI bus id and
// NUMA node, driver and runtime versions, peer access, NUMA nodes of the host.
#include <cuda_runtime.h>
#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <string>

#include "cuda_bench.h"
#include "cuda_util.cuh"

namespace cb {
namespace cuda {

int device_count(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = cuda_err(e);
    cudaGetLastError();
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device";
  return n;
}

static std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(c));
  return s;
}

// C stdio, not iostreams: where the host compiler links libstdc++ statically into
// the module (seen on the GPU machine's /opt/gcc), an ifstream crashes in
// codecvt once the process has loaded the shared libstdc++ (numpy, torch).
static int read_int_file(const std::string& path, int fallback) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return fallback;
  int v = fallback;
  if (std::fscanf(f, "%d", &v) != 1) v = fallback;
  std::fclose(f);
  return v;
}

DeviceInfo device_info(int dev) {
  cudaDeviceProp p;
  CB_CUDA(cudaGetDeviceProperties(&p, dev), "reading the properties of GPU " + std::to_string(dev));
  DeviceInfo d;
  d.index = dev;
  d.name = p.name;
  char bus[64] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), dev) == cudaSuccess) {
    std::string b = lower(bus);
    // sysfs spells the domain with 4 digits; the runtime may give 8
    if (b.size() > 12 && b.find(':') == 8) b = b.substr(4);
    d.pci_bus_id = b;
    d.numa_node = read_int_file("/sys/bus/pci/devices/" + b + "/numa_node", -1);
  }
  d.sm_count = p.multiProcessorCount;
  d.major = p.major;
  d.minor = p.minor;
  d.total_mem = p.totalGlobalMem;
  d.async_engines = p.asyncEngineCount;
  d.l2_bytes = p.l2CacheSize;
  d.mem_bus_width = p.memoryBusWidth;
  return d;
}

int driver_version() {
  int v = 0;
  cudaDriverGetVersion(&v);
  return v;
}

int runtime_version() {
  int v = 0;
  cudaRuntimeGetVersion(&v);
  return v;
}

bool can_access_peer(int dev, int peer) {
  int ok = 0;
  if (cudaDeviceCanAccessPeer(&ok, dev, peer) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return ok != 0;
}

int numa_node_count() {
  DIR* d = opendir("/sys/devices/system/node");
  if (!d) return 1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, "node", 4) == 0 && std::isdigit(e->d_name[4])) ++n;
  }
  closedir(d);
  return std::max(n, 1);
}

}  // namespace cuda
}  // namespace cb
