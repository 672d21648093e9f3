// What each request of the rendezvous store does (store_wire.py names the ops). Every field
// is checked before use; a request that fails a check is refused with a reason (Refused)
// and its connection goes on.
#include <algorithm>
#include <sys/epoll.h>

#include <cstring>

#include "store_hmac.h"
#include "store_server.h"
#include "store_wire.h"

namespace cb::store {
namespace {

using Fields = std::vector<std::string_view>;

const Reply& ok_empty() {       // a SET's or WAIT's answer: one shared object
  static const Reply r = make_frame(OK, {});
  return r;
}

const Reply& not_ours() {
  static const Reply r = make_frame(
      REFUSED, {"this process does not hold the run's secret: its COMM_BENCH_SECRET or "
                "COMM_BENCH_SECRET_FILE, or (without them) its launcher, MASTER_ADDR, "
                "MASTER_PORT or job ids, differ from rank 0's"});
  return r;
}

// A decimal whole number of at most 19 digits, ASCII only (as the Python store took them).
bool whole(std::string_view s, __int128* out) {
  size_t at = s.size() && s[0] == '-' ? 1 : 0;
  size_t digits = s.size() - at;
  if (digits < 1 || digits > 19) return false;
  __int128 v = 0;
  for (size_t i = at; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = at ? -v : v;
  return true;
}

__int128 whole_or_refuse(std::string_view s, const char* what) {
  __int128 v;
  if (!whole(s, &v))
    throw Refused(std::string("a malformed request: its ") + what + " must be a whole number of at most 19 digits");
  return v;
}

std::string decimal(__int128 v) {
  if (v == 0) return "0";
  bool negative = v < 0;
  unsigned __int128 u = negative ? (unsigned __int128)(-(v + 1)) + 1 : (unsigned __int128)v;
  std::string s;
  while (u) {
    s += char('0' + int(u % 10));
    u /= 10;
  }
  if (negative) s += '-';
  std::reverse(s.begin(), s.end());
  return s;
}

int fields_taken(int op) {      // -1: not a request
  switch (op) {
    case SET: case SET_QUIET: case GET: case ADD: case WAIT: return 2;
    case CHECK: case DELETE: case MULTI_GET: return 1;
    case MULTI_SET: return 3;
    default: return -1;
  }
}

Reply values_frame(const std::vector<int32_t>& lengths, const std::vector<const std::string*>& values) {
  size_t blob = 0;
  for (auto* v : values) blob += v->size();
  auto out = std::make_shared<std::string>();
  out->reserve(13 + 4 * lengths.size() + blob);
  put_be32(*out, 9 + 4 * lengths.size() + blob);
  *out += char(OK);
  put_be32(*out, 4 * lengths.size());
  for (int32_t n : lengths) {       // little endian, as struct.pack("<i")
    uint32_t u = uint32_t(n);
    for (int b = 0; b < 4; ++b) *out += char((u >> (8 * b)) & 0xff);
  }
  put_be32(*out, blob);
  for (auto* v : values) *out += *v;
  return out;
}

}  // namespace

Reply make_frame(int head, std::initializer_list<std::string_view> fields) {
  size_t size = 1;
  for (auto f : fields) size += 4 + f.size();
  auto out = std::make_shared<std::string>();
  out->reserve(4 + size);
  put_be32(*out, size);
  *out += char(head);
  for (auto f : fields) {
    put_be32(*out, f.size());
    out->append(f.data(), f.size());
  }
  return out;
}

Reply refusal(std::string_view body, std::string_view why) {
  if (body.empty() || static_cast<unsigned char>(body[0]) != SET_QUIET) return make_frame(REFUSED, {why});
  Fields f;
  std::string_view key = split_fields(body, f) && !f.empty() ? f[0] : std::string_view("?");
  return make_frame(SET_REFUSED, {key, why});
}

Reply Server::answer(Conn* c, int op, const Fields& f) {
  if (!c->authed) {
    std::string expected = hmac_sha256(secret_, std::string("comm-bench store\0", 17) + c->challenge);
    if (op != AUTH || f.size() != 1 || !same_digest(std::string(f[0]), expected)) {
      refused_hellos.fetch_add(1);
      send(c, not_ours());       // a small reply: the socket takes it at once
      close(c);
      return nullptr;
    }
    c->authed = true;
    hellos_.erase(c->hello_seq);
    return ok_empty();
  }
  int taken = fields_taken(op);
  if (taken < 0) return make_frame(REFUSED, {"an unknown request"});
  if (int(f.size()) != taken)
    throw Refused("a malformed request: " + std::to_string(f.size()) + " fields where op " + std::to_string(op) +
                  " takes " + std::to_string(taken));
  if (op == CHECK || op == DELETE || op == MULTI_GET || op == MULTI_SET) {
    int64_t named = int64_t(std::count(f[0].begin(), f[0].end(), '\0')) + 1;
    if (named > limits_.max_list_keys)
      throw Refused("a request naming " + std::to_string(named) + " keys (at most " +
                    std::to_string(limits_.max_list_keys) + ")");
  }
  switch (op) {
    case SET_QUIET: {
      std::string why = set(f[0], f[1]);
      return why.empty() ? nullptr : make_frame(SET_REFUSED, {f[0], why});
    }
    case SET: {
      std::string why = set(f[0], f[1]);
      return why.empty() ? ok_empty() : make_frame(REFUSED, {why});
    }
    case GET: {
      int64_t ms = int64_t(std::clamp<__int128>(whole_or_refuse(f[1], "timeout (ms)"), 0, limits_.max_wait_ms));
      return block(c, f[0], {f[0]}, ms, true);
    }
    case WAIT: {
      auto keys = split_keys(f[1]);
      if (int64_t(keys.size()) > limits_.max_wait_keys)
        return make_frame(REFUSED, {"a wait on " + std::to_string(keys.size()) + " keys (at most " +
                                    std::to_string(limits_.max_wait_keys) + ")"});
      int64_t ms = int64_t(std::clamp<__int128>(whole_or_refuse(f[0], "timeout (ms)"), 0, limits_.max_wait_ms));
      return block(c, f[1], keys, ms, false);
    }
    case ADD: return add(f);
    case MULTI_SET: return multi_set(f);
    case MULTI_GET: {
      if (gather_reply_ && gather_version_ == version_ && gather_name_ == f[0]) return gather_reply_;
      gather_reply_ = multi_get(f[0]);     // the readers of a gather share one reply
      gather_name_ = std::string(f[0]);
      gather_version_ = version_;
      return gather_reply_;
    }
    default: return keyed(op, f);
  }
}

Reply Server::keyed(int op, const Fields& f) {
  auto keys = split_keys(f[0]);
  std::string key;
  if (op == CHECK) {
    bool all = true;
    for (auto k : keys) {
      key.assign(k);
      if (!data_.count(key)) {
        all = false;
        break;
      }
    }
    return make_frame(OK, {all ? "1" : "0"});
  }
  int64_t gone = 0;                 // DELETE
  for (auto k : keys) {
    key.assign(k);
    auto it = data_.find(key);
    if (it == data_.end()) continue;
    stored_ -= int64_t(it->first.size() + it->second.size());
    data_.erase(it);
    ++gone;
  }
  deletes_ += gone;
  ++version_;
  return make_frame(OK, {std::to_string(gone)});
}

Reply Server::add(const Fields& f) {
  __int128 amount = whole_or_refuse(f[1], "amount");
  auto it = data_.find(std::string(f[0]));
  __int128 held = 0;
  if (it != data_.end() && !whole(it->second, &held))
    throw Refused("an ADD to a key that does not hold a whole number of at most 19 digits");
  __int128 total = held + amount;
  const __int128 counter = __int128(1) << 63;
  if (total < -counter || total >= counter)
    throw Refused("an ADD past a 64-bit counter (" + decimal(held) + " + " + decimal(amount) + ")");
  std::string value = decimal(total);
  std::string why = set(f[0], value);
  return why.empty() ? make_frame(OK, {value}) : make_frame(REFUSED, {why});
}

Reply Server::multi_set(const Fields& f) {
  auto keys = split_keys(f[0]);
  std::string_view lengths = f[1], blob = f[2];
  if (lengths.size() % 4 || lengths.size() / 4 != keys.size()) return make_frame(REFUSED, {"a malformed request"});
  std::vector<std::string_view> values;
  size_t at = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto u = reinterpret_cast<const unsigned char*>(lengths.data() + 4 * i);
    int32_t n = int32_t(uint32_t(u[0]) | uint32_t(u[1]) << 8 | uint32_t(u[2]) << 16 | uint32_t(u[3]) << 24);
    if (n < 0 || size_t(n) > blob.size() - at) return make_frame(REFUSED, {"a malformed request"});
    values.push_back(blob.substr(at, size_t(n)));
    at += size_t(n);
  }
  if (at != blob.size()) return make_frame(REFUSED, {"a malformed request"});
  for (size_t i = 0; i < keys.size(); ++i) {
    std::string why = set(keys[i], values[i]);
    if (!why.empty()) return make_frame(REFUSED, {why});
  }
  return ok_empty();
}

Reply Server::multi_get(std::string_view joined) {
  auto keys = split_keys(joined);
  int64_t room = limits_.max_message - 64 - 4 * int64_t(keys.size());
  std::vector<int32_t> lengths;
  std::vector<const std::string*> values;
  lengths.reserve(keys.size());
  values.reserve(keys.size());
  std::string key;
  for (auto k : keys) {
    key.assign(k);
    auto it = data_.find(key);
    if (it == data_.end()) {
      lengths.push_back(ABSENT);
    } else if (int64_t(it->second.size()) <= room) {
      lengths.push_back(int32_t(it->second.size()));
      values.push_back(&it->second);
      room -= int64_t(it->second.size());
    } else {
      lengths.push_back(LATER);
    }
  }
  return values_frame(lengths, values);
}

std::string Server::set(std::string_view key_view, std::string_view value) {
  std::string key(key_view);
  if (!fault_key_.empty() && key == fault_key_) throw std::runtime_error("a planted fault");
  auto it = data_.find(key);
  int64_t grown = int64_t(key.size() + value.size()) - (it == data_.end() ? 0 : int64_t(key.size() + it->second.size()));
  if (stored_ + grown > limits_.max_stored)
    return "the store holds " + std::to_string(stored_) + " B already (at most " + std::to_string(limits_.max_stored) + ")";
  if (it == data_.end()) data_.emplace(key, std::string(value));
  else it->second.assign(value);
  stored_ += grown;
  ++version_;
  auto w = waiting_.find(key);
  if (w == waiting_.end()) return "";
  auto groups = std::move(w->second);
  waiting_.erase(w);
  for (const auto& g : groups) {
    g->missing.erase(key);
    if (!g->missing.empty()) continue;
    auto named = groups_.find(g->name);
    if (named != groups_.end() && named->second == g) groups_.erase(named);
    std::vector<Waiter*> members(g->members.begin(), g->members.end());
    batching_ = true;
    for (Waiter* m : members) wake(m, true);
    batching_ = false;
  }
  send_wakeups();
  return "";
}

Reply Server::block(Conn* c, std::string_view name, const Fields& keys, int64_t timeout_ms, bool get) {
  std::string key0 = get ? std::string(keys[0]) : std::string();
  std::shared_ptr<Group> g;
  auto named = groups_.find(std::string(name));
  if (named != groups_.end() && named->second->deletes == deletes_) g = named->second;
  if (!g) {
    std::unordered_set<std::string> missing;
    std::string key;
    for (auto k : keys) {
      key.assign(k);
      if (!data_.count(key)) missing.insert(key);
    }
    if (missing.empty()) return ready_reply(get, key0);
    g = std::make_shared<Group>();
    g->name = std::string(name);
    g->missing = std::move(missing);
    g->deletes = deletes_;
    groups_[g->name] = g;
    for (const auto& k : g->missing) waiting_[k].insert(g);
  }
  auto w = std::make_unique<Waiter>(Waiter{next_id_++, c, g, get, key0});
  g->members.insert(w.get());
  c->waiter = w.get();
  deadlines_.emplace(now_s() + double(timeout_ms) / 1e3, w->id);
  waiters_[w->id] = std::move(w);
  return nullptr;
}

Reply Server::ready_reply(bool get, const std::string& key) const {
  if (!get) return ok_empty();   // 4,096 waiters woken at once share one reply
  return make_frame(OK, {data_.at(key)});
}

void Server::forget(Waiter* w) {
  // answered, timed out or closed: out of the index (the group, once its last waiter left)
  w->conn->waiter = nullptr;
  std::shared_ptr<Group> g = w->group;
  g->members.erase(w);
  waiters_.erase(w->id);         // frees w
  if (!g->members.empty() || g->missing.empty()) return;
  auto named = groups_.find(g->name);
  if (named != groups_.end() && named->second == g) groups_.erase(named);
  for (const auto& k : g->missing) {
    auto it = waiting_.find(k);
    if (it == waiting_.end()) continue;
    it->second.erase(g);
    if (it->second.empty()) waiting_.erase(it);
  }
}

void Server::wake(Waiter* w, bool ok) {
  Conn* c = w->conn;
  bool get = w->get;
  std::string key = std::move(w->reply_key);
  forget(w);
  if (!c->open) return;
  bool ready = ok && (!get || data_.count(key));
  static const Reply timed_out = make_frame(TIMED_OUT, {});
  wakeups_.emplace_back(c, ready ? ready_reply(get, key) : timed_out);
  if (!batching_) send_wakeups();
}

}  // namespace cb::store
