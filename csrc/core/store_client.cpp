// The client's side of one store call, for comm_bench/control/light_store.py (through _C's
// store_exchange): send the request and read the start of its answer in one call that
// releases the GIL once. A rank's client shares its interpreter with other threads (a
// harness runs hundreds in a process); each socket call from Python gives the GIL up and
// takes it back, and a barrier made six such hand-overs per client where TCPStore's C++
// client makes two.
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>

#include "store_client.h"
#include "store_wire.h"

namespace {

// Waits up to timeout_ms for fd to be ready for `events`: 0 ready, -ETIMEDOUT, or -errno.
int wait_for(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  for (;;) {
    int n = poll(&p, 1, timeout_ms);
    if (n > 0) return 0;
    if (n == 0) return -ETIMEDOUT;
    if (errno != EINTR) return -errno;
  }
}

// The answer (a frame that is not a quiet SET's refusal) has begun at a frame boundary.
bool answer_begun(const char* buf, long have) {
  long at = 0;
  while (at + 5 <= have) {
    if (static_cast<unsigned char>(buf[at + 4]) != cb::store::SET_REFUSED) return true;
    long size = long(cb::store::read_be32(buf + at));
    if (at + 4 + size > have) return false;
    at += 4 + size;
  }
  return false;
}

}  // namespace

// Sends req[0:len] on fd (non-blocking), then reads into out[0:cap]: with `answered`, until
// the answer has begun (earlier quiet SETs' refusals come first) or out is full, each wait
// at most timeout_ms; without it, only what has arrived already (0 bytes: nothing).
// Returns the bytes read, or -ETIMEDOUT, -ECONNRESET for a closed connection, or -errno.
long cb::store::exchange(int fd, const char* req, long len, bool answered, int timeout_ms, char* out, long cap) {
  long sent = 0;
  while (sent < len) {
    ssize_t n = ::send(fd, req + sent, size_t(len - sent), MSG_NOSIGNAL);
    if (n > 0) {
      sent += n;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int w = wait_for(fd, POLLOUT, timeout_ms);
      if (w < 0) return w;
    } else if (n < 0 && errno != EINTR) {
      return -errno;
    }
  }
  if (!answered) {           // a quiet SET: has a refusal arrived? (never waits)
    ssize_t n = ::recv(fd, out, size_t(cap), MSG_DONTWAIT);
    if (n > 0) return long(n);
    if (n == 0) return -ECONNRESET;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno;
  }
  long have = 0;
  while (have < cap && !answer_begun(out, have)) {
    int w = wait_for(fd, POLLIN, timeout_ms);
    if (w < 0) return have ? have : w;
    ssize_t n = ::recv(fd, out + have, size_t(cap - have), 0);
    if (n > 0) have += n;
    else if (n == 0) return have ? have : -ECONNRESET;
    else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return have ? have : -errno;
  }
  return have;
}
