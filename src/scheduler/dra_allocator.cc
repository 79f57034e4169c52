#include "scheduler/dra_allocator.h"

#include <algorithm>
#include <cstdio>
#include <regex>
#include <set>

#include "core/quantity.h"

namespace hami::scheduler::dra {
namespace {

using Json = nlohmann::json;

constexpr int kMaxSteps = 100000;  // backtracking budget per claim and node

// What the model does not cover (CEL beyond the subset, constraints).
template <typename... Args>
Status Unimplemented(const Args&... args) {
  return absl::UnimplementedError(StrCat(args...));
}

// Rounds `amount` up as the policy says; nullopt = above what the policy allows.
std::optional<int64_t> RoundByPolicy(const RequestPolicy& p, int64_t amount) {
  if (!p.valid_values.empty()) {
    for (int64_t v : p.valid_values)
      if (v >= amount) return v;
    return std::nullopt;
  }
  if (p.valid_range) {
    const RequestPolicy::Range& r = *p.valid_range;
    int64_t v = std::max(amount, r.min);
    if (r.step && *r.step > 0) v = r.min + (v - r.min + *r.step - 1) / *r.step * *r.step;
    if (r.max && v > *r.max) return std::nullopt;
    return v;
  }
  return amount;
}

bool Matches(const std::vector<Selector>& selectors, const std::string& driver, const Device& d) {
  return std::all_of(selectors.begin(), selectors.end(),
                     [&](const Selector& s) { return s(driver, d); });
}

std::string NewUuid(Rng& rng) {
  const uint64_t a = rng.Next(), b = rng.Next();
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                static_cast<unsigned>(0x8000 | ((b >> 48) & 0x3fff)),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

// One candidate device on the node.
struct Candidate {
  const Pool* pool;
  const Device* device;
  const std::string* key;
};

// One way to meet a request: the request itself, or one of its firstAvailable subrequests.
struct Alternative {
  const DeviceRequest* request;
  std::string result_name;  // "<request>" or "<request>/<subrequest>"
  std::vector<const Candidate*> matching;
};

// The depth-first search over (request, its alternative, n-th device of it).
class Search {
 public:
  Search(const std::vector<std::vector<Alternative>>& alternatives, const AllocatedState& state)
      : alts_(alternatives), choice_(alternatives.size(), 0), state_(state) {}

  bool Run() { return Enter(0); }
  const std::vector<std::pair<size_t, const Candidate*>>& picks() const { return picks_; }
  const std::vector<std::map<std::string, int64_t>>& costs() const { return costs_; }
  // The alternative request r was met by.
  const Alternative& Chosen(size_t r) const { return alts_[r][choice_[r]]; }
  bool out_of_steps() const { return steps_ > kMaxSteps; }

 private:
  const DeviceRequest& Req(size_t r) const { return *Chosen(r).request; }
  size_t Need(size_t r) const {
    return Req(r).all ? Chosen(r).matching.size() : static_cast<size_t>(Req(r).count);
  }
  // Request r: its alternatives in order (one unless firstAvailable), the first that can be met
  // together with the requests after it.
  bool Enter(size_t r) {
    if (r == alts_.size()) return true;
    for (size_t a = 0; a < alts_[r].size(); ++a) {
      const Alternative& alt = alts_[r][a];
      if (alt.request->all && alt.matching.empty()) continue;  // All of nothing is not met
      choice_[r] = a;
      if (Step(r, 0, 0)) return true;
      if (steps_ > kMaxSteps) return false;
    }
    return false;
  }
  // Request r, its n-th device, searching its candidates from `from` (All takes them in order).
  bool Step(size_t r, size_t n, size_t from) {
    if (n == Need(r)) return Enter(r + 1);
    if (++steps_ > kMaxSteps) return false;
    const auto& cands = Chosen(r).matching;
    for (size_t i = from; i < cands.size(); ++i) {
      const Candidate* c = cands[i];
      std::map<std::string, int64_t> cost;
      if (!Fits(r, *c, &cost)) {
        if (Req(r).all) return false;  // All needs every matching device
        continue;
      }
      picks_.push_back({r, c});
      costs_.push_back(std::move(cost));
      if (Step(r, n + 1, i + 1)) return true;
      picks_.pop_back();
      costs_.pop_back();
      if (Req(r).all || steps_ > kMaxSteps) return false;
    }
    return false;
  }
  bool Fits(size_t r, const Candidate& c, std::map<std::string, int64_t>* cost) const {
    const Device& d = *c.device;
    if (!d.allow_multiple_allocations) {
      if (state_.InUse(*c.key)) return false;
      for (const auto& p : picks_)
        if (*p.second->key == *c.key) return false;
      return true;
    }
    for (const auto& p : picks_)
      if (p.first == r && *p.second->key == *c.key) return false;  // distinct within a request
    auto need = Consumption(d, Req(r));
    if (!need) return false;
    for (const auto& [name, amount] : *need) {
      int64_t used = state_.Consumed(*c.key, name);
      for (size_t i = 0; i < picks_.size(); ++i)
        if (*picks_[i].second->key == *c.key) used += costs_[i].at(name);
      if (used + amount > d.capacity.at(name).value) return false;
    }
    *cost = std::move(*need);
    return true;
  }

  const std::vector<std::vector<Alternative>>& alts_;
  std::vector<size_t> choice_;
  const AllocatedState& state_;
  std::vector<std::pair<size_t, const Candidate*>> picks_;
  std::vector<std::map<std::string, int64_t>> costs_;
  int steps_ = 0;
};

}  // namespace

// ---------------- state ----------------

std::string AllocatedState::Key(const std::string& driver, const std::string& pool,
                                const std::string& device) {
  return StrCat(driver, "/", pool, "/", device);
}

void AllocatedState::Add(const std::vector<Result>& results) {
  for (const Result& r : results) {
    const std::string k = Key(r.driver, r.pool, r.device);
    if (!r.share_id) {
      ++exclusive_[k];
      continue;
    }
    for (const auto& [name, v] : r.consumed) consumed_[k][name] += v;
  }
}

void AllocatedState::Remove(const std::vector<Result>& results) {
  for (const Result& r : results) {
    const std::string k = Key(r.driver, r.pool, r.device);
    if (!r.share_id) {
      if (--exclusive_[k] <= 0) exclusive_.erase(k);
      continue;
    }
    for (const auto& [name, v] : r.consumed) consumed_[k][name] -= v;
  }
}

bool AllocatedState::InUse(const std::string& key) const {
  if (exclusive_.count(key)) return true;
  auto it = consumed_.find(key);
  if (it == consumed_.end()) return false;
  // A shared allocation also makes a device busy for an exclusive use (dedicated after shared).
  return std::any_of(it->second.begin(), it->second.end(),
                     [](const auto& kv) { return kv.second > 0; });
}

int64_t AllocatedState::Consumed(const std::string& key, const std::string& capacity) const {
  auto it = consumed_.find(key);
  if (it == consumed_.end()) return 0;
  auto c = it->second.find(capacity);
  return c == it->second.end() ? 0 : c->second;
}

// ---------------- allocation ----------------

std::optional<std::map<std::string, int64_t>> Consumption(const Device& device,
                                                          const DeviceRequest& request) {
  for (const auto& [name, amount] : request.capacity) {
    auto it = device.capacity.find(name);
    if (it == device.capacity.end() || it->second.value < amount) return std::nullopt;
  }
  std::map<std::string, int64_t> out;
  for (const auto& [name, cap] : device.capacity) {
    auto asked = request.capacity.find(name);
    int64_t v = cap.value;
    if (asked != request.capacity.end()) {
      v = asked->second;
      if (cap.policy) {
        auto rounded = RoundByPolicy(*cap.policy, v);
        if (!rounded) return std::nullopt;
        v = *rounded;
      }
    } else if (cap.policy && cap.policy->default_value) {
      v = *cap.policy->default_value;
    }
    out[name] = v;
  }
  return out;
}

Allocator::Allocator(std::vector<Pool> pools, std::map<std::string, DeviceClass> classes)
    : pools_(std::move(pools)), classes_(std::move(classes)) {
  std::stable_sort(pools_.begin(), pools_.end(), [](const Pool& a, const Pool& b) {
    return std::tie(a.driver, a.name) < std::tie(b.driver, b.name);
  });
  for (size_t i = 0; i < pools_.size(); ++i) {
    keys_.emplace_back();
    for (const Device& d : pools_[i].devices)
      keys_.back().push_back(AllocatedState::Key(pools_[i].driver, pools_[i].name, d.name));
    if (pools_[i].all_nodes) {
      all_nodes_.push_back(i);
    } else {
      by_node_[pools_[i].node_name].push_back(i);
    }
  }
}

std::vector<const Pool*> Allocator::NodePools(const std::string& node) const {
  std::vector<size_t> pool_ids = all_nodes_;
  if (auto it = by_node_.find(node); it != by_node_.end())
    pool_ids.insert(pool_ids.end(), it->second.begin(), it->second.end());
  std::sort(pool_ids.begin(), pool_ids.end());
  std::vector<const Pool*> out;
  for (size_t id : pool_ids)
    if (!pools_[id].incomplete) out.push_back(&pools_[id]);
  return out;
}

StatusOr<std::vector<Result>> Allocator::Allocate(const std::vector<DeviceRequest>& requests,
                                                  const std::string& node,
                                                  const AllocatedState& state,
                                                  Rng& share_ids) const {
  std::vector<size_t> pool_ids = all_nodes_;
  if (auto it = by_node_.find(node); it != by_node_.end())
    pool_ids.insert(pool_ids.end(), it->second.begin(), it->second.end());
  std::sort(pool_ids.begin(), pool_ids.end());  // driver, then pool name
  std::vector<Candidate> cands;
  int incomplete = 0;
  for (size_t id : pool_ids) {
    const Pool& p = pools_[id];
    if (p.incomplete) {
      ++incomplete;
      continue;
    }
    for (size_t j = 0; j < p.devices.size(); ++j)
      cands.push_back({&p, &p.devices[j], &keys_[id][j]});
  }
  // The devices each request (or each of its subrequests) may take: the class's and the
  // request's selectors, and capacity requests filter every device (a CEL check capacity >=
  // amount).
  auto match = [&](const DeviceRequest& req, std::vector<const Candidate*>* out) -> Status {
    auto cls = classes_.find(req.device_class);
    if (cls == classes_.end())
      return InvalidArgument("request ", req.name, ": device class \"", req.device_class,
                             "\" not found");
    for (const Candidate& c : cands) {
      if (!Matches(cls->second.selectors, c.pool->driver, *c.device) ||
          !Matches(req.selectors, c.pool->driver, *c.device))
        continue;
      bool big_enough = true;
      for (const auto& [name, amount] : req.capacity) {
        auto it = c.device->capacity.find(name);
        big_enough &= it != c.device->capacity.end() && it->second.value >= amount;
      }
      if (big_enough) out->push_back(&c);
    }
    return OkStatus();
  };
  std::vector<std::vector<Alternative>> alts(requests.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    const DeviceRequest& req = requests[r];
    if (req.first_available.empty()) {
      alts[r].push_back({&req, req.name, {}});
    } else {
      for (const DeviceRequest& sub : req.first_available)
        alts[r].push_back({&sub, StrCat(req.name, "/", sub.name), {}});
    }
    for (Alternative& a : alts[r]) HAMI_RETURN_IF_ERROR(match(*a.request, &a.matching));
    if (req.first_available.empty() && req.all && alts[r][0].matching.empty())
      return NotFound("request ", req.name, ": no device matches on node ", node);
  }
  Search search(alts, state);
  if (!search.Run()) {
    return NotFound("cannot allocate all claims on node ", node,
                    search.out_of_steps() ? " (search budget exhausted)" : "",
                    incomplete > 0 ? StrCat(" (", incomplete, " pool(s) incomplete)") : "");
  }
  std::vector<Result> out;
  for (size_t i = 0; i < search.picks().size(); ++i) {
    const auto& [r, c] = search.picks()[i];
    Result res{
        search.Chosen(r).result_name, c->pool->driver, c->pool->name, c->device->name, {}, {}};
    if (c->device->allow_multiple_allocations) {
      res.share_id = NewUuid(share_ids);
      res.consumed = search.costs()[i];
    }
    out.push_back(std::move(res));
  }
  return out;
}

// ---------------- wire form ----------------

namespace {

StatusOr<int64_t> Units(const Json& q, core::Rounding rounding, const std::string& what) {
  auto parsed = core::ParseQuantityJson(q);
  if (!parsed.ok()) return InvalidArgument(what, ": ", parsed.status().message());
  return core::QuantityToUnits(*parsed, rounding);
}

std::string StrField(const Json& o, const char* f) {
  auto it = o.find(f);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

// The objects come from the API server, claims from any user: a field of another type than the
// API's is an error, never an exception.
StatusOr<int64_t> IntField(const Json& o, const char* f, int64_t def, const std::string& what) {
  auto it = o.find(f);
  if (it == o.end() || it->is_null()) return def;
  if (!it->is_number_integer()) return InvalidArgument(what, ": ", f, " is not an integer");
  return it->get<int64_t>();
}

StatusOr<bool> BoolField(const Json& o, const char* f, bool def, const std::string& what) {
  auto it = o.find(f);
  if (it == o.end() || it->is_null()) return def;
  if (!it->is_boolean()) return InvalidArgument(what, ": ", f, " is not a boolean");
  return it->get<bool>();
}

// metadata.name, "" when missing.
std::string NameOf(const Json& o) {
  auto m = o.find("metadata");
  return m != o.end() ? StrField(*m, "name") : "";
}

StatusOr<Device> DeviceFromJson(const Json& d) {
  Device out;
  out.name = StrField(d, "name");
  HAMI_ASSIGN_OR_RETURN(
      out.allow_multiple_allocations,
      BoolField(d, "allowMultipleAllocations", false, StrCat("device ", out.name)));
  if (auto a = d.find("attributes"); a != d.end() && a->is_object()) {
    for (const auto& [k, v] : a->items()) {
      if (v.contains("int") && v["int"].is_number_integer()) {
        out.attributes[k] = v["int"].get<int64_t>();
      } else if (v.contains("bool") && v["bool"].is_boolean()) {
        out.attributes[k] = v["bool"].get<bool>();
      } else if (v.contains("string") && v["string"].is_string()) {
        out.attributes[k] = v["string"].get<std::string>();
      } else if (v.contains("version") && v["version"].is_string()) {
        out.attributes[k] = v["version"].get<std::string>();
      }
    }
  }
  if (auto c = d.find("capacity"); c != d.end() && c->is_object()) {
    for (const auto& [k, v] : c->items()) {
      const std::string what = StrCat("device ", out.name, " capacity ", k);
      Capacity cap;
      HAMI_ASSIGN_OR_RETURN(cap.value, Units(v.is_object() ? v.value("value", Json()) : Json(),
                                             core::Rounding::kDown, what));
      if (auto p = v.find("requestPolicy"); p != v.end() && p->is_object()) {
        RequestPolicy rp;
        if (p->contains("default")) {
          HAMI_ASSIGN_OR_RETURN(int64_t def, Units((*p)["default"], core::Rounding::kUp, what));
          rp.default_value = def;
        }
        if (auto vv = p->find("validValues"); vv != p->end() && vv->is_array()) {
          for (const Json& x : *vv) {
            HAMI_ASSIGN_OR_RETURN(int64_t u, Units(x, core::Rounding::kUp, what));
            rp.valid_values.push_back(u);
          }
        }
        if (auto r = p->find("validRange"); r != p->end() && r->is_object()) {
          RequestPolicy::Range range;
          HAMI_ASSIGN_OR_RETURN(range.min,
                                Units(r->value("min", Json()), core::Rounding::kUp, what));
          if (r->contains("max")) {
            HAMI_ASSIGN_OR_RETURN(int64_t m, Units((*r)["max"], core::Rounding::kDown, what));
            range.max = m;
          }
          if (r->contains("step")) {
            HAMI_ASSIGN_OR_RETURN(int64_t s, Units((*r)["step"], core::Rounding::kUp, what));
            range.step = s;
          }
          rp.valid_range = range;
        }
        cap.policy = std::move(rp);
      }
      out.capacity[k] = std::move(cap);
    }
  }
  return out;
}

// Looks up device.attributes["<domain>"].<id> (or device.capacity[...]): a bare published name is
// in the driver's domain.
template <typename T>
const T* FindQualified(const std::map<std::string, T>& published, const std::string& driver,
                       const std::string& domain, const std::string& id) {
  if (domain == driver) {
    if (auto it = published.find(id); it != published.end()) return &it->second;
  }
  auto it = published.find(StrCat(domain, "/", id));
  return it == published.end() ? nullptr : &it->second;
}

StatusOr<Attribute> ParseLiteral(const std::string& text) {
  static const std::regex kStr(R"re(\s*(?:"([^"]*)"|'([^']*)')\s*)re");
  static const std::regex kInt(R"(\s*(-?[0-9]+)\s*)");
  std::smatch m;
  if (std::regex_match(text, m, kStr)) return Attribute(m[1].matched ? m[1].str() : m[2].str());
  if (std::regex_match(text, m, kInt)) return Attribute(int64_t{std::stoll(m[1].str())});
  if (text.find("true") != std::string::npos &&
      text.find_first_not_of(" true") == std::string::npos)
    return Attribute(true);
  if (text.find("false") != std::string::npos &&
      text.find_first_not_of(" false") == std::string::npos)
    return Attribute(false);
  return Unimplemented("CEL literal not understood: ", text);
}

StatusOr<Selector> ParseTerm(const std::string& term) {
  static const std::regex kNot(R"(\s*!\s*\((.*)\)\s*)");
  std::smatch m;
  if (std::regex_match(term, m, kNot)) {
    HAMI_ASSIGN_OR_RETURN(Selector inner, ParseTerm(m[1].str()));
    return Selector([inner](const std::string& drv, const Device& d) { return !inner(drv, d); });
  }
  static const std::regex kDriver(R"re(\s*device\.driver\s*(==|!=)\s*(.+))re");
  if (std::regex_match(term, m, kDriver)) {
    HAMI_ASSIGN_OR_RETURN(Attribute lit, ParseLiteral(m[2].str()));
    if (!std::holds_alternative<std::string>(lit))
      return Unimplemented("device.driver compared with a non-string");
    const bool eq = m[1].str() == "==";
    const std::string want = std::get<std::string>(lit);
    return Selector(
        [eq, want](const std::string& drv, const Device&) { return (drv == want) == eq; });
  }
  static const std::regex kCapacity(
      R"re(\s*device\.capacity\[\s*(?:"([^"]+)"|'([^']+)')\s*\]\.([A-Za-z_][A-Za-z0-9_]*)\.compareTo\(\s*quantity\(\s*(?:"([^"]*)"|'([^']*)')\s*\)\s*\)\s*(==|!=|<=|>=|<|>)\s*0\s*)re");
  if (std::regex_match(term, m, kCapacity)) {
    const std::string domain = m[1].matched ? m[1].str() : m[2].str();
    const std::string id = m[3].str();
    const std::string text = m[4].matched ? m[4].str() : m[5].str();
    const std::string op = m[6].str();
    auto q = core::ParseQuantity(text);
    if (!q.ok()) return Unimplemented("CEL quantity not understood: ", text);
    const int64_t want = core::QuantityToUnits(*q, core::Rounding::kDown);
    if (want != core::QuantityToUnits(*q, core::Rounding::kUp))
      return Unimplemented("CEL quantity with a fraction of a unit: ", text);
    return Selector([=](const std::string& drv, const Device& d) {
      const Capacity* c = FindQualified(d.capacity, drv, domain, id);
      // CEL: a missing capacity is an evaluation error, and the device does not match.
      if (c == nullptr) return false;
      const int64_t v = c->value;
      if (op == "==") return v == want;
      if (op == "!=") return v != want;
      if (op == "<") return v < want;
      if (op == "<=") return v <= want;
      if (op == ">") return v > want;
      return v >= want;
    });
  }
  static const std::regex kAttr(
      R"re(\s*device\.attributes\[\s*(?:"([^"]+)"|'([^']+)')\s*\]\.([A-Za-z_][A-Za-z0-9_]*)\s*(==|!=|in)\s*(.+))re");
  if (!std::regex_match(term, m, kAttr))
    return Unimplemented("CEL expression not understood: ", term);
  const std::string domain = m[1].matched ? m[1].str() : m[2].str();
  const std::string id = m[3].str();
  const std::string op = m[4].str();
  std::vector<Attribute> values;
  if (op == "in") {
    static const std::regex kList(R"(\s*\[(.*)\]\s*)");
    std::smatch lm;
    const std::string rest = m[5].str();
    if (!std::regex_match(rest, lm, kList)) return Unimplemented("CEL list not understood: ", rest);
    const std::string body = lm[1].str();
    size_t start = 0;
    while (start < body.size()) {
      size_t comma = body.find(',', start);
      if (comma == std::string::npos) comma = body.size();
      const std::string item = body.substr(start, comma - start);
      if (item.find_first_not_of(' ') != std::string::npos) {
        HAMI_ASSIGN_OR_RETURN(Attribute v, ParseLiteral(item));
        values.push_back(std::move(v));
      }
      start = comma + 1;
    }
  } else {
    HAMI_ASSIGN_OR_RETURN(Attribute v, ParseLiteral(m[5].str()));
    values.push_back(std::move(v));
  }
  const bool negate = op == "!=";
  return Selector([=](const std::string& drv, const Device& d) {
    const Attribute* a = FindQualified(d.attributes, drv, domain, id);
    // CEL: a missing attribute is an evaluation error, and the device does not match.
    if (a == nullptr) return false;
    const bool hit = std::find(values.begin(), values.end(), *a) != values.end();
    return hit != negate;
  });
}

}  // namespace

StatusOr<Selector> ParseSelector(const std::string& cel) {
  std::vector<Selector> terms;
  size_t start = 0;
  while (true) {
    const size_t amp = cel.find("&&", start);
    HAMI_ASSIGN_OR_RETURN(
        Selector t,
        ParseTerm(cel.substr(start, amp == std::string::npos ? std::string::npos : amp - start)));
    terms.push_back(std::move(t));
    if (amp == std::string::npos) break;
    start = amp + 2;
  }
  return Selector([terms](const std::string& drv, const Device& d) {
    return std::all_of(terms.begin(), terms.end(), [&](const Selector& s) { return s(drv, d); });
  });
}

namespace {
Status AppendSelectors(const Json& owner, std::vector<Selector>* out) {
  auto sel = owner.find("selectors");
  if (sel == owner.end() || !sel->is_array()) return OkStatus();
  for (const Json& s : *sel) {
    const std::string expr = s.contains("cel") ? StrField(s["cel"], "expression") : "";
    HAMI_ASSIGN_OR_RETURN(Selector parsed, ParseSelector(expr));
    out->push_back(std::move(parsed));
  }
  return OkStatus();
}
}  // namespace

StatusOr<DeviceClass> ClassFromJson(const Json& device_class) {
  DeviceClass c;
  if (device_class.contains("spec") && device_class["spec"].is_object())
    HAMI_RETURN_IF_ERROR(AppendSelectors(device_class["spec"], &c.selectors));
  return c;
}

StatusOr<std::vector<Pool>> PoolsFromSlices(const std::vector<Json>& slices) {
  struct Acc {
    int64_t generation = -1;
    int64_t count = 0;
    std::vector<const Json*> slices;
  };
  std::map<std::pair<std::string, std::string>, Acc> acc;
  for (const Json& s : slices) {
    if (!s.contains("spec") || !s["spec"].is_object() || !s["spec"].contains("pool"))
      return InvalidArgument("ResourceSlice without spec.pool");
    const Json& spec = s["spec"];
    const Json& pool = spec["pool"];
    Acc& a = acc[{StrField(spec, "driver"), StrField(pool, "name")}];
    const std::string what = StrCat("ResourceSlice ", NameOf(s), " pool");
    HAMI_ASSIGN_OR_RETURN(const int64_t gen, IntField(pool, "generation", 0, what));
    if (gen < a.generation) continue;  // consumers use only the highest generation
    if (gen > a.generation) a = Acc{gen, 0, {}};
    HAMI_ASSIGN_OR_RETURN(a.count, IntField(pool, "resourceSliceCount", 1, what));
    a.slices.push_back(&s);
  }
  std::vector<Pool> out;
  for (auto& [key, a] : acc) {
    std::sort(a.slices.begin(), a.slices.end(),
              [](const Json* x, const Json* y) { return NameOf(*x) < NameOf(*y); });
    Pool p;
    p.driver = key.first;
    p.name = key.second;
    const Json& spec0 = (*a.slices.front())["spec"];
    p.node_name = StrField(spec0, "nodeName");
    HAMI_ASSIGN_OR_RETURN(p.all_nodes,
                          BoolField(spec0, "allNodes", false, StrCat("pool ", p.name)));
    p.incomplete = static_cast<int64_t>(a.slices.size()) < a.count;
    for (const Json* s : a.slices) {
      const Json* devices = nullptr;
      if (auto it = (*s)["spec"].find("devices"); it != (*s)["spec"].end()) devices = &*it;
      if (devices == nullptr || devices->is_null()) continue;
      if (!devices->is_array())
        return InvalidArgument("ResourceSlice ", NameOf(*s), ": spec.devices is not a list");
      for (const Json& d : *devices) {
        if (!d.is_object())
          return InvalidArgument("ResourceSlice ", NameOf(*s), ": a device is not an object");
        HAMI_ASSIGN_OR_RETURN(Device dev, DeviceFromJson(d));
        p.devices.push_back(std::move(dev));
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

StatusOr<std::vector<DeviceRequest>> RequestsFromClaim(const Json& claim) {
  std::vector<DeviceRequest> out;
  const Json* reqs = nullptr;
  if (claim.contains("spec") && claim["spec"].contains("devices") &&
      claim["spec"]["devices"].contains("requests"))
    reqs = &claim["spec"]["devices"]["requests"];
  if (reqs == nullptr || !reqs->is_array()) return out;
  if (claim["spec"]["devices"].contains("constraints"))
    return Unimplemented("claim constraints are not modelled");
  // One request's fields ("exactly", or one subrequest of "firstAvailable").
  auto parse = [](const std::string& name, const Json& e) -> StatusOr<DeviceRequest> {
    if (!e.is_object()) return InvalidArgument("request ", name, " is not an object");
    DeviceRequest d;
    d.name = name;
    d.device_class = StrField(e, "deviceClassName");
    d.all = StrField(e, "allocationMode") == "All";
    HAMI_ASSIGN_OR_RETURN(d.count, IntField(e, "count", 1, StrCat("request ", name)));
    if (d.count < 1) return InvalidArgument("request ", name, ": count ", d.count, " is below 1");
    if (e.contains("capacity") && e["capacity"].is_object() && e["capacity"].contains("requests")) {
      if (!e["capacity"]["requests"].is_object())
        return InvalidArgument("request ", name, ": capacity.requests is not an object");
      for (const auto& [k, q] : e["capacity"]["requests"].items()) {
        HAMI_ASSIGN_OR_RETURN(d.capacity[k], Units(q, core::Rounding::kUp,
                                                   StrCat("request ", d.name, " capacity ", k)));
      }
    }
    HAMI_RETURN_IF_ERROR(AppendSelectors(e, &d.selectors));
    return d;
  };
  for (const Json& r : *reqs) {
    const std::string name = StrField(r, "name");
    if (r.contains("exactly")) {
      HAMI_ASSIGN_OR_RETURN(DeviceRequest d, parse(name, r["exactly"]));
      out.push_back(std::move(d));
      continue;
    }
    auto subs = r.find("firstAvailable");
    if (subs == r.end() || !subs->is_array() || subs->empty())
      return InvalidArgument("request ", name, " has neither exactly nor firstAvailable");
    DeviceRequest d;
    d.name = name;
    for (const Json& sub : *subs) {
      if (!sub.is_object())
        return InvalidArgument("request ", name, ": a firstAvailable entry is not an object");
      HAMI_ASSIGN_OR_RETURN(DeviceRequest one, parse(StrField(sub, "name"), sub));
      d.first_available.push_back(std::move(one));
    }
    out.push_back(std::move(d));
  }
  return out;
}

StatusOr<std::vector<Result>> ResultsOfClaim(const Json& c) {
  std::vector<Result> rs;
  const Json* results = nullptr;
  if (c.is_object() && c.contains("status") && c["status"].is_object() &&
      c["status"].contains("allocation") && c["status"]["allocation"].is_object() &&
      c["status"]["allocation"].contains("devices") &&
      c["status"]["allocation"]["devices"].is_object() &&
      c["status"]["allocation"]["devices"].contains("results"))
    results = &c["status"]["allocation"]["devices"]["results"];
  if (results == nullptr || !results->is_array()) return rs;
  for (const Json& r : *results) {
    if (!r.is_object()) return InvalidArgument("claim allocation result is not an object");
    Result res{StrField(r, "request"),
               StrField(r, "driver"),
               StrField(r, "pool"),
               StrField(r, "device"),
               {},
               {}};
    if (r.contains("shareID")) res.share_id = StrField(r, "shareID");
    if (r.contains("consumedCapacity") && r["consumedCapacity"].is_object()) {
      for (const auto& [k, q] : r["consumedCapacity"].items()) {
        HAMI_ASSIGN_OR_RETURN(res.consumed[k], Units(q, core::Rounding::kUp, "consumedCapacity"));
      }
    }
    rs.push_back(std::move(res));
  }
  return rs;
}

StatusOr<AllocatedState> StateFromClaims(const std::vector<Json>& claims) {
  AllocatedState state;
  for (const Json& c : claims) {
    HAMI_ASSIGN_OR_RETURN(std::vector<Result> rs, ResultsOfClaim(c));
    state.Add(rs);
  }
  return state;
}

StatusOr<Json> AllocateClaimJson(const std::vector<Json>& slices, const std::vector<Json>& classes,
                                 const std::vector<Json>& allocated_claims, const Json& claim,
                                 const std::string& node, Rng& share_ids) {
  HAMI_ASSIGN_OR_RETURN(std::vector<Pool> pools, PoolsFromSlices(slices));
  std::map<std::string, DeviceClass> by_name;
  for (const Json& c : classes) {
    HAMI_ASSIGN_OR_RETURN(by_name[NameOf(c)], ClassFromJson(c));
  }
  HAMI_ASSIGN_OR_RETURN(std::vector<DeviceRequest> requests, RequestsFromClaim(claim));
  HAMI_ASSIGN_OR_RETURN(AllocatedState state, StateFromClaims(allocated_claims));
  Allocator alloc(std::move(pools), std::move(by_name));
  HAMI_ASSIGN_OR_RETURN(std::vector<Result> results,
                        alloc.Allocate(requests, node, state, share_ids));
  Json jr = Json::array();
  for (const Result& r : results) {
    Json e = {{"request", r.request}, {"driver", r.driver}, {"pool", r.pool}, {"device", r.device}};
    if (r.share_id) e["shareID"] = *r.share_id;
    if (r.share_id) {
      e["consumedCapacity"] = Json::object();
      for (const auto& [k, v] : r.consumed) e["consumedCapacity"][k] = std::to_string(v);
    }
    jr.push_back(std::move(e));
  }
  return Json{{"devices", {{"results", jr}}},
              {"nodeSelector",
               {{"nodeSelectorTerms",
                 {{{"matchFields",
                    {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {node}}}}}}}}}}};
}

}  // namespace hami::scheduler::dra
