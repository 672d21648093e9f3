// HMAC-SHA256 for the rendezvous store's handshake (store_wire.proof's twin): the store's
// loop runs in C++ without Python, and the core links nothing beyond the C++ runtime.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace cb::store {

// HMAC-SHA256(key, message): 32 raw bytes.
std::string hmac_sha256(const std::string& key, const std::string& message);

// Equal, in a time that does not depend on where they differ (hmac.compare_digest).
bool same_digest(const std::string& a, const std::string& b);

}  // namespace cb::store
