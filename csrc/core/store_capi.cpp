// The rendezvous store's entry points for comm_bench/control/store_server.py, a C ABI that
// it loads with ctypes from this module's own file: the store needs no Python object, and
// comm_bench._C's pybind11 module stays as it is.
#include <cstdio>
#include <thread>

#include "store_server.h"

#define CB_STORE_API extern "C" __attribute__((visibility("default")))

// limits: max_message, max_hello, max_stored, max_wait_keys, max_outbound, max_wait_ms,
// max_list_keys, max_logged, max_conns (Limits' order). Takes listen_fd; the server runs
// on a thread of its own until the process exits. NULL (and a line on stderr) on failure.
CB_STORE_API void* cb_store_start(int listen_fd, const char* secret, long secret_len, const long long* limits,
                                  double auth_window_s) {
  cb::store::Limits l{limits[0], limits[1], limits[2], limits[3], limits[4], limits[5], limits[6], limits[7],
                      limits[8], auth_window_s};
  try {
    auto* server = new cb::store::Server(listen_fd, std::string(secret, size_t(secret_len)), l);
    std::thread([server] { server->run(); }).detach();
    return server;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "comm-bench store: could not start (%s)\n", e.what());
    return nullptr;
  }
}

// What the loop last published: 0 connections refused at the handshake, 1 connections
// dropped because serving them failed, 2 wait groups indexed, 3 keys waited for, 4 open
// connections.
CB_STORE_API long long cb_store_counter(void* handle, int which) {
  auto* s = static_cast<cb::store::Server*>(handle);
  switch (which) {
    case 0: return s->refused_hellos.load();
    case 1: return s->dropped.load();
    case 2: return s->indexed_groups.load();
    case 3: return s->indexed_keys.load();
    case 4: return s->connections.load();
    default: return -1;
  }
}
