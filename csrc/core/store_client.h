// The client's side of one rendezvous store call (store_client.cpp), for comm_bench._C's
// store_exchange (module_c.cpp), which light_store.py calls.
#pragma once

extern "C" long cb_store_exchange(int fd, const char* req, long len, int answered, int timeout_ms, char* out,
                                  long cap);
