#include "mpi_loop.h"

#include <string>

#include "../harness.h"

namespace cb {

namespace {
struct Calls {
  const MpiPair& p;
  void send(const char* b, int n) const {
    int rc = p.send(b, n, p.byte_type, p.peer, 0, p.comm);
    if (rc) throw Error("MPI_Send to rank " + std::to_string(p.peer) + " returned error " + std::to_string(rc));
  }
  void recv(char* b, int n) const {
    alignas(16) char status[256];  // larger than any MPI's MPI_Status
    int rc = p.recv(b, n, p.byte_type, p.peer, 0, p.comm, status);
    if (rc) throw Error("MPI_Recv from rank " + std::to_string(p.peer) + " returned error " + std::to_string(rc));
  }
};
}  // namespace

std::vector<double> mpi_pair_loop(const MpiPair& p, char* inp, char* out, char* ack, int nbytes,
                                  bool src, bool lat, int iters, int warmup) {
  Calls c{p};
  auto step = [&] {
    if (lat) {
      if (src) { c.send(inp, nbytes); c.recv(out, nbytes); }
      else { c.recv(out, nbytes); c.send(out, nbytes); }
    } else if (src) {
      c.send(inp, nbytes);
    } else {
      c.recv(out, nbytes);
    }
  };
  auto finish = [&] {  // a stream ends when the receiver says all arrived
    if (lat) return;
    if (src) c.recv(ack, 1);
    else c.send(ack, 1);
  };
  for (int i = 0; i < warmup; ++i) step();
  finish();
  TimedLoop loop{size_t(iters)};
  loop.start();
  for (int i = 0; i < iters; ++i) { step(); loop.mark(size_t(i)); }
  if (!lat) { finish(); loop.extend_last(); }
  return loop.samples_us();
}

}  // namespace cb
