// A pair's timed MPI loop in C++: MPI_Send / MPI_Recv called through the addresses that
// mpi4py's own libmpi exports (found at run time), so comm-bench builds without MPI
// headers, runs against whichever MPI mpi4py loaded, and no Python runs per iteration.
#pragma once
#include <cstdint>
#include <vector>

namespace cb {

// MPI handles (MPI_Comm, MPI_Datatype) are pointers in Open MPI and ints in MPICH: passed
// as intptr_t, they land in the same argument registers either way (x86-64, aarch64).
using MpiSendFn = int (*)(const void*, int, intptr_t, int, int, intptr_t);
using MpiRecvFn = int (*)(void*, int, intptr_t, int, int, intptr_t, void*);

struct MpiPair {
  MpiSendFn send;
  MpiRecvFn recv;
  intptr_t byte_type;  // MPI_BYTE
  intptr_t comm;
  int peer;
};

// The loop of transports/_framework.pair_steps, in C++: "lat" a ping-pong (the source's
// samples are whole round trips), "bw" a stream whose last sample includes the receiver's
// 1-byte acknowledgement. Returns per-iteration times (us); throws cb::Error on an MPI error.
std::vector<double> mpi_pair_loop(const MpiPair& p, char* inp, char* out, char* ack, int nbytes,
                                  bool src, bool lat, int iters, int warmup);

}  // namespace cb
