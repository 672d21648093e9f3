// libnccl loaded at run time (dlopen), so nothing NCCL is needed to build or to
// import comm_bench: the few types and prototypes used here are declared below
// with NCCL's public ABI (nccl.h, stable since 2.x).
//
// Candidates come from Python (transports/nccl.py): --nccl-lib PATH, the
// nvidia-nccl wheel, torch's lib folder, then the system's libnccl.so.2.
#pragma once
#include <dlfcn.h>

#include <climits>
#include <cstddef>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "harness.h"

typedef struct CUstream_st* cudaStream_t;

namespace cb {
namespace nccl {

typedef struct ncclComm* ncclComm_t;
struct ncclUniqueId {
  char internal[128];
};
enum ncclResult_t {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
};
enum ncclDataType_t {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
};
enum ncclRedOp_t { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 };
typedef struct ncclWindow_vidmem* ncclWindow_t;
// ncclConfig_t as NCCL 2.28 declares it (ncclConfig_v22800). Used only with a library of
// 2.28 or newer, which reads the fields up to the version the struct says it is.
struct ncclConfig_v22800 {
  size_t size = sizeof(ncclConfig_v22800);
  unsigned int magic = 0xcafebeef;
  unsigned int version = 22800;
  int blocking = INT_MIN, cgaClusterSize = INT_MIN, minCTAs = INT_MIN, maxCTAs = INT_MIN;
  const char* netName = nullptr;
  int splitShare = INT_MIN, trafficClass = INT_MIN;
  const char* commName = nullptr;
  int collnetEnable = INT_MIN, CTAPolicy = INT_MIN, shrinkShare = INT_MIN, nvlsCTAs = INT_MIN,
      nChannelsPerNetPeer = INT_MIN, nvlinkCentricSched = INT_MIN;
};
const int NCCL_WIN_COLL_SYMMETRIC = 0x01;

struct Api {
  void* handle = nullptr;
  std::string path;
  int version = 0;
  ncclResult_t (*GetVersion)(int*) = nullptr;
  ncclResult_t (*GetUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*CommInitRank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*CommInitRankConfig)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_v22800*) = nullptr;  // 2.14
  ncclResult_t (*CommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*CommAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*) = nullptr;
  const char* (*GetErrorString)(ncclResult_t) = nullptr;
  const char* (*GetLastError)(ncclComm_t) = nullptr;  // 2.13+, may be absent
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*Broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*Reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
                         cudaStream_t) = nullptr;
  ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*ReduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                cudaStream_t) = nullptr;
  ncclResult_t (*Send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*Recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*GroupStart)() = nullptr;
  ncclResult_t (*GroupEnd)() = nullptr;
  // Optional: nullptr where the loaded library predates them (looked up, never required)
  ncclResult_t (*AlltoAll)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) = nullptr;  // 2.28
  ncclResult_t (*Gather)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*Scatter)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*MemAlloc)(void**, size_t) = nullptr;  // 2.19: cuMem buffers, what nccl-tests allocates
  ncclResult_t (*MemFree)(void*) = nullptr;
  ncclResult_t (*CommRegister)(ncclComm_t, void*, size_t, void**) = nullptr;  // 2.19 (nccl-tests -R 1)
  ncclResult_t (*CommDeregister)(ncclComm_t, void*) = nullptr;
  ncclResult_t (*CommWindowRegister)(ncclComm_t, void*, size_t, ncclWindow_t*, int) = nullptr;  // 2.27 (-R 2)
  ncclResult_t (*CommWindowDeregister)(ncclComm_t, ncclWindow_t) = nullptr;

  std::string error(ncclResult_t r, ncclComm_t comm = nullptr) const {
    std::string s = GetErrorString ? GetErrorString(r) : ("NCCL error " + std::to_string(int(r)));
    if (comm && GetLastError) {
      const char* last = GetLastError(comm);
      if (last && *last) s += " (" + std::string(last) + ")";
    }
    return s;
  }
};

inline Api& api() {
  static Api a;
  return a;
}

template <typename T>
inline bool sym(void* h, const char* name, T& out) {
  out = reinterpret_cast<T>(dlsym(h, name));
  return out != nullptr;
}

// Loads the first candidate that opens and has every symbol; returns the API
// (the same one on later calls). Throws cb::Error naming what was tried.
inline Api& load(const std::vector<std::string>& candidates) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  Api& a = api();
  if (a.handle) return a;
  std::string tried;
  for (const auto& c : candidates) {
    void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      const char* e = dlerror();
      std::string why = e ? e : "cannot open";
      // dlerror() usually starts with the name already: say it once
      tried += "\n  " + (why.compare(0, c.size() + 1, c + ":") == 0 ? why : c + ": " + why);
      continue;
    }
    Api t;
    t.handle = h;
    bool ok = sym(h, "ncclGetVersion", t.GetVersion) && sym(h, "ncclGetUniqueId", t.GetUniqueId) &&
              sym(h, "ncclCommInitRank", t.CommInitRank) && sym(h, "ncclCommDestroy", t.CommDestroy) &&
              sym(h, "ncclCommAbort", t.CommAbort) && sym(h, "ncclCommGetAsyncError", t.CommGetAsyncError) &&
              sym(h, "ncclGetErrorString", t.GetErrorString) && sym(h, "ncclAllReduce", t.AllReduce) &&
              sym(h, "ncclBroadcast", t.Broadcast) && sym(h, "ncclReduce", t.Reduce) &&
              sym(h, "ncclAllGather", t.AllGather) && sym(h, "ncclReduceScatter", t.ReduceScatter) &&
              sym(h, "ncclSend", t.Send) && sym(h, "ncclRecv", t.Recv) &&
              sym(h, "ncclGroupStart", t.GroupStart) && sym(h, "ncclGroupEnd", t.GroupEnd);
    if (!ok) {
      tried += "\n  " + c + ": missing NCCL symbols (NCCL 2.7 or newer is needed)";
      dlclose(h);
      continue;
    }
    sym(h, "ncclGetLastError", t.GetLastError);
    sym(h, "ncclCommInitRankConfig", t.CommInitRankConfig);
    sym(h, "ncclAlltoAll", t.AlltoAll);
    sym(h, "ncclGather", t.Gather);
    sym(h, "ncclScatter", t.Scatter);
    if (!(sym(h, "ncclMemAlloc", t.MemAlloc) && sym(h, "ncclMemFree", t.MemFree))) t.MemAlloc = nullptr;
    if (!(sym(h, "ncclCommRegister", t.CommRegister) && sym(h, "ncclCommDeregister", t.CommDeregister)))
      t.CommRegister = nullptr;
    if (!(sym(h, "ncclCommWindowRegister", t.CommWindowRegister) &&
          sym(h, "ncclCommWindowDeregister", t.CommWindowDeregister)))
      t.CommWindowRegister = nullptr;
    t.GetVersion(&t.version);
    char where[4096] = {0};
    void* any = reinterpret_cast<void*>(t.GetVersion);
    Dl_info info;
    if (dladdr(any, &info) && info.dli_fname) std::snprintf(where, sizeof(where), "%s", info.dli_fname);
    t.path = where[0] ? where : c;
    a = t;
    return a;
  }
  throw Error("cannot load libnccl; tried:" + (tried.empty() ? std::string(" nothing") : tried) +
              "\n  install the nvidia-nccl-cu13 (or -cu12) wheel, or pass --nccl-lib PATH");
}

}  // namespace nccl
}  // namespace cb
