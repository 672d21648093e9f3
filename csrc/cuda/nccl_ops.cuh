// The NCCL ops, one entry each (as nccl-tests' struct testColl, src/common.h): an op's
// facts and the function that issues it. NcclBench::run (nccl_bench.cu) reads only this
// table; a new op is one entry here, its name in comm_bench/ops.py and, when its output
// is checked, a case of expected_of in nccl_bench.cu.
#pragma once
#include <string>

#include "nccl_loader.h"

namespace cb {
namespace cuda {

using namespace cb::nccl;

// The check kernel's name for an op: device code cannot read the host table, so
// expected_of (nccl_bench.cu) switches on this code.
enum OpCode { OP_ALL_REDUCE, OP_ALL_GATHER, OP_REDUCE_SCATTER, OP_BROADCAST, OP_REDUCE, OP_ALLTOALL,
              OP_SENDRECV, OP_SEND, OP_RECV, OP_GATHER, OP_SCATTER };

// Where the input of an in-place run sits, as nccl-tests places it (sendInplaceOffset /
// recvInplaceOffset x rank).
enum InPlace {
  NOT_IN_PLACE,    // the op has no in-place form (alltoall, the point-to-point ops)
  SAME_BUFFER,     // input and output are one buffer
  INPUT_IN_OUTPUT, // the input is this rank's chunk of the output (all_gather, gather)
  OUTPUT_IN_INPUT, // the output is this rank's chunk of the input (reduce_scatter, scatter)
};

enum Output { EVERY_RANK, ROOT_ONLY, NO_OUTPUT };  // which ranks have an output to check

// A failed NCCL call marks the communicator broken (aborted, not destroyed) and throws.
inline void nccl_ok(ncclResult_t r, const char* what, int rank, ncclComm_t comm, bool& broken) {
  if (r != ncclSuccess && r != ncclInProgress) {
    broken = true;
    throw Error("rank " + std::to_string(rank) + ": " + what + ": " + api().error(r, comm));
  }
}

// One run's arguments, filled once by run(), for the issue functions.
struct OpArgs {
  const Api& a;
  ncclComm_t comm;
  cudaStream_t s;
  ncclDataType_t t;
  ncclRedOp_t redop;
  size_t total;  // elements of the whole per-rank vector
  size_t chunk;  // total / ranks: one rank's part of a split op
  size_t es;     // element size
  int n, r, root, peer;
  bool& broken;
  void ok(ncclResult_t res, const char* what) const { nccl_ok(res, what, r, comm, broken); }
  char* at(char* p, int rank) const { return p + size_t(rank) * chunk * es; }  // rank's chunk
};

constexpr const char* kGroupApi = "ncclSend/ncclRecv group";

struct NcclOp {
  const char* name;   // as comm_bench/ops.py names it
  OpCode code;
  bool split;         // the vector splits into one chunk per rank (total % ranks must be 0)
  InPlace in_place;
  bool pair;          // to / from one `peer` rank; the pair's barrier is the op itself
  bool has_input;     // initialised with this rank's values (recv sends nothing)
  Output output;
  const char* (*api)(const Api&);  // the NCCL call(s) recorded: the grouped fallback where the library lacks the op
  void (*issue)(const OpArgs&, char* send, char* recv);
};

// The grouped send/recv bodies are nccl-tests' for libraries without the collective.
static const NcclOp NCCL_OPS[] = {
    {"all_reduce", OP_ALL_REDUCE, false, SAME_BUFFER, false, true, EVERY_RANK,
     [](const Api&) { return "ncclAllReduce"; },
     [](const OpArgs& c, char* sp, char* rp) {
       c.ok(c.a.AllReduce(sp, rp, c.total, c.t, c.redop, c.comm, c.s), "ncclAllReduce");
     }},
    {"all_gather", OP_ALL_GATHER, true, INPUT_IN_OUTPUT, false, true, EVERY_RANK,
     [](const Api&) { return "ncclAllGather"; },
     [](const OpArgs& c, char* sp, char* rp) {
       c.ok(c.a.AllGather(sp, rp, c.chunk, c.t, c.comm, c.s), "ncclAllGather");
     }},
    {"reduce_scatter", OP_REDUCE_SCATTER, true, OUTPUT_IN_INPUT, false, true, EVERY_RANK,
     [](const Api&) { return "ncclReduceScatter"; },
     [](const OpArgs& c, char* sp, char* rp) {
       c.ok(c.a.ReduceScatter(sp, rp, c.chunk, c.t, c.redop, c.comm, c.s), "ncclReduceScatter");
     }},
    {"broadcast", OP_BROADCAST, false, SAME_BUFFER, false, true, EVERY_RANK,
     [](const Api&) { return "ncclBroadcast"; },
     [](const OpArgs& c, char* sp, char* rp) {
       c.ok(c.a.Broadcast(sp, rp, c.total, c.t, c.root, c.comm, c.s), "ncclBroadcast");
     }},
    {"reduce", OP_REDUCE, false, SAME_BUFFER, false, true, ROOT_ONLY,
     [](const Api&) { return "ncclReduce"; },
     [](const OpArgs& c, char* sp, char* rp) {
       c.ok(c.a.Reduce(sp, rp, c.total, c.t, c.redop, c.root, c.comm, c.s), "ncclReduce");
     }},
    {"alltoall", OP_ALLTOALL, true, NOT_IN_PLACE, false, true, EVERY_RANK,
     [](const Api& a) { return a.AlltoAll ? "ncclAlltoAll" : kGroupApi; },
     [](const OpArgs& c, char* sp, char* rp) {
       if (c.a.AlltoAll) return c.ok(c.a.AlltoAll(sp, rp, c.chunk, c.t, c.comm, c.s), "ncclAlltoAll");
       c.ok(c.a.GroupStart(), "ncclGroupStart");
       for (int p = 0; p < c.n; ++p) {
         c.ok(c.a.Send(c.at(sp, p), c.chunk, c.t, p, c.comm, c.s), "ncclSend");
         c.ok(c.a.Recv(c.at(rp, p), c.chunk, c.t, p, c.comm, c.s), "ncclRecv");
       }
       c.ok(c.a.GroupEnd(), "ncclGroupEnd (alltoall)");
     }},
    {"sendrecv", OP_SENDRECV, false, NOT_IN_PLACE, false, true, EVERY_RANK,
     [](const Api&) { return kGroupApi; },
     [](const OpArgs& c, char* sp, char* rp) {  // a ring: to the next rank, from the one before
       c.ok(c.a.GroupStart(), "ncclGroupStart");
       c.ok(c.a.Send(sp, c.total, c.t, (c.r + 1) % c.n, c.comm, c.s), "ncclSend");
       c.ok(c.a.Recv(rp, c.total, c.t, (c.r - 1 + c.n) % c.n, c.comm, c.s), "ncclRecv");
       c.ok(c.a.GroupEnd(), "ncclGroupEnd (sendrecv)");
     }},
    {"send", OP_SEND, false, NOT_IN_PLACE, true, true, NO_OUTPUT,
     [](const Api&) { return "ncclSend"; },
     [](const OpArgs& c, char* sp, char*) { c.ok(c.a.Send(sp, c.total, c.t, c.peer, c.comm, c.s), "ncclSend"); }},
    {"recv", OP_RECV, false, NOT_IN_PLACE, true, false, EVERY_RANK,
     [](const Api&) { return "ncclRecv"; },
     [](const OpArgs& c, char*, char* rp) { c.ok(c.a.Recv(rp, c.total, c.t, c.peer, c.comm, c.s), "ncclRecv"); }},
    {"gather", OP_GATHER, true, INPUT_IN_OUTPUT, false, true, ROOT_ONLY,
     [](const Api& a) { return a.Gather ? "ncclGather" : kGroupApi; },
     [](const OpArgs& c, char* sp, char* rp) {
       if (c.a.Gather) return c.ok(c.a.Gather(sp, rp, c.chunk, c.t, c.root, c.comm, c.s), "ncclGather");
       c.ok(c.a.GroupStart(), "ncclGroupStart");
       c.ok(c.a.Send(sp, c.chunk, c.t, c.root, c.comm, c.s), "ncclSend");
       if (c.r == c.root)
         for (int p = 0; p < c.n; ++p) c.ok(c.a.Recv(c.at(rp, p), c.chunk, c.t, p, c.comm, c.s), "ncclRecv");
       c.ok(c.a.GroupEnd(), "ncclGroupEnd (gather)");
     }},
    {"scatter", OP_SCATTER, true, OUTPUT_IN_INPUT, false, true, EVERY_RANK,
     [](const Api& a) { return a.Scatter ? "ncclScatter" : kGroupApi; },
     [](const OpArgs& c, char* sp, char* rp) {
       if (c.a.Scatter) return c.ok(c.a.Scatter(sp, rp, c.chunk, c.t, c.root, c.comm, c.s), "ncclScatter");
       c.ok(c.a.GroupStart(), "ncclGroupStart");
       if (c.r == c.root)
         for (int p = 0; p < c.n; ++p) c.ok(c.a.Send(c.at(sp, p), c.chunk, c.t, p, c.comm, c.s), "ncclSend");
       c.ok(c.a.Recv(rp, c.chunk, c.t, c.root, c.comm, c.s), "ncclRecv");
       c.ok(c.a.GroupEnd(), "ncclGroupEnd (scatter)");
     }},
};

inline const NcclOp& nccl_op(const std::string& name) {
  for (const NcclOp& op : NCCL_OPS)
    if (name == op.name) return op;
  throw Error("unknown NCCL op '" + name + "'");
}

}  // namespace cuda
}  // namespace cb
