// The client's side of one rendezvous store call (store_client.cpp), for comm_bench._C's
// store_exchange (module_c.cpp), which light_store.py calls.
#pragma once

namespace cb {
namespace store {

long exchange(int fd, const char* req, long len, bool answered, int timeout_ms, char* out, long cap);

}  // namespace store
}  // namespace cb
