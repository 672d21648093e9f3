// The rendezvous store's wire format in C++ (comm_bench/control/store_wire.py is the other
// side and its description): frames are a 4-byte big-endian length, the op or status byte,
// then fields, each a 4-byte length and bytes.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "store_server.h"

namespace cb::store {

enum Op { SET, GET, ADD, CHECK, DELETE, WAIT, MULTI_GET, MULTI_SET, AUTH, SET_QUIET };
enum Status { OK, TIMED_OUT, REFUSED, SET_REFUSED };
constexpr int32_t ABSENT = -1, LATER = -2;     // multi_get's lengths: no such key; no room in this reply

inline int64_t read_be32(const char* p) {
  auto u = reinterpret_cast<const unsigned char*>(p);
  return int64_t(uint32_t(u[0]) << 24 | uint32_t(u[1]) << 16 | uint32_t(u[2]) << 8 | uint32_t(u[3]));
}

inline void put_be32(std::string& out, size_t n) {
  out += char((n >> 24) & 0xff);
  out += char((n >> 16) & 0xff);
  out += char((n >> 8) & 0xff);
  out += char(n & 0xff);
}

// The fields after a body's op byte, as views into it; false if one runs past the body.
inline bool split_fields(std::string_view body, std::vector<std::string_view>& out) {
  size_t at = 1;
  while (at < body.size()) {
    if (body.size() - at < 4) return false;
    size_t n = size_t(read_be32(body.data() + at));
    if (n > body.size() - at - 4) return false;
    out.push_back(body.substr(at + 4, n));
    at += 4 + n;
  }
  return true;
}

// Keys travel joined by NUL; an empty field names no key.
inline std::vector<std::string_view> split_keys(std::string_view joined) {
  std::vector<std::string_view> keys;
  if (joined.empty()) return keys;
  size_t at = 0;
  for (;;) {
    size_t nul = joined.find('\0', at);
    if (nul == std::string_view::npos) {
      keys.push_back(joined.substr(at));
      return keys;
    }
    keys.push_back(joined.substr(at, nul - at));
    at = nul + 1;
  }
}

// The answer to a request refused before it was served: a SET_QUIET's names its key, so the
// client, which reads it ahead of a later reply, can say which SET failed.
Reply refusal(std::string_view body, std::string_view why);

}  // namespace cb::store
