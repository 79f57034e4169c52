#include "consolidator/history.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace hami::consolidator {
namespace {

constexpr int kVersion = 1;
constexpr size_t kMaxString = 320;  // "<namespace>/<Kind>/<name>" and UUIDs fit
constexpr size_t kMaxMinutesPerPod = 32;

bool Str(const Json& v, std::string* out) {
  if (!v.is_string() || v.get_ref<const std::string&>().size() > kMaxString) return false;
  *out = v.get<std::string>();
  return true;
}

template <typename T>
bool Int(const Json& v, int64_t lo, int64_t hi, T* out) {
  if (!v.is_number_integer()) return false;
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) return false;
  *out = static_cast<T>(x);
  return true;
}

}  // namespace

std::string EncodeHistory(const History& h) {
  Json moves = Json::object(), backoff = Json::object(), failures = Json::object();
  for (const auto& [pod, minutes] : h.moves) moves[pod] = minutes;
  for (const auto& [w, until] : h.backoff_until) backoff[w] = until;
  for (const auto& [w, n] : h.failures) failures[w] = n;
  Json flights = Json::array();
  for (const InFlight& f : h.in_flight)
    flights.push_back({{"pod", f.pod_key},
                       {"uid", f.uid},
                       {"workload", f.workload},
                       {"from", f.from_gpu},
                       {"to", f.to_gpu},
                       {"minute", f.minute},
                       {"deadline", f.deadline_minute},
                       {"toNode", f.to_node},
                       {"owner", f.owner_uid},
                       {"mib", f.mem_mib},
                       {"cores", f.cores},
                       {"reserveUntil", f.reserve_until_s}});
  return Json{{"version", kVersion},
              {"moves", moves},
              {"inFlight", flights},
              {"backoffUntil", backoff},
              {"failures", failures}}
      .dump();
}

StatusOr<History> DecodeHistory(const std::string& text, int32_t now_minute) {
  if (text.size() > kMaxHistoryBytes)
    return InvalidArgument("history of ", text.size(), " bytes (at most ", kMaxHistoryBytes, ")");
  const Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || doc.value("version", 0) != kVersion)
    return InvalidArgument("history: not a version ", kVersion, " object");
  auto map_of = [&](const char* key) -> const Json* {
    auto it = doc.find(key);
    return it != doc.end() && it->is_object() && it->size() <= kMaxHistoryEntries ? &*it : nullptr;
  };
  const Json* moves = map_of("moves");
  const Json* backoff = map_of("backoffUntil");
  const Json* failures = map_of("failures");
  auto flights = doc.find("inFlight");
  if (moves == nullptr || backoff == nullptr || failures == nullptr || flights == doc.end() ||
      !flights->is_array() || flights->size() > kMaxInFlight)
    return InvalidArgument(
        "history: moves, inFlight, backoffUntil or failures missing or too large");
  // A minute a leader could have written: within the last day, at most an hour ahead (clocks).
  const int64_t lo = int64_t{now_minute} - consolidate::kMinutesPerDay, hi = now_minute + 60;
  History h;
  for (const auto& [pod, minutes] : moves->items()) {
    if (pod.size() > kMaxString || !minutes.is_array()) continue;
    std::vector<int32_t> kept;
    for (const Json& m : minutes) {
      int32_t v = 0;
      if (kept.size() < kMaxMinutesPerPod && Int(m, lo + 1, hi, &v)) kept.push_back(v);
    }
    std::sort(kept.begin(), kept.end());
    if (!kept.empty()) h.moves[pod] = std::move(kept);
  }
  for (const auto& [w, until] : backoff->items()) {
    int32_t v = 0;
    if (w.size() <= kMaxString && Int(until, now_minute + 1, int64_t{now_minute} + 1440, &v))
      h.backoff_until[w] = v;
  }
  for (const auto& [w, n] : failures->items()) {
    int v = 0;
    if (w.size() <= kMaxString && Int(n, 1, 64, &v)) h.failures[w] = v;
  }
  for (const Json& j : *flights) {
    if (!j.is_object()) continue;
    InFlight f;
    auto field = [&](const char* k) -> const Json& {
      static const Json kNull;
      auto it = j.find(k);
      return it == j.end() ? kNull : *it;
    };
    const bool ok =
        Str(field("pod"), &f.pod_key) && Str(field("uid"), &f.uid) &&
        Str(field("workload"), &f.workload) && Str(field("from"), &f.from_gpu) &&
        Str(field("to"), &f.to_gpu) && Int(field("minute"), lo + 1, hi, &f.minute) &&
        Int(field("deadline"), f.minute, int64_t{f.minute} + 1440, &f.deadline_minute) &&
        Str(field("toNode"), &f.to_node) && Str(field("owner"), &f.owner_uid) &&
        Int(field("mib"), 0, int64_t{1} << 30, &f.mem_mib) &&
        Int(field("cores"), 0, 100, &f.cores) &&
        Int(field("reserveUntil"), 0, (int64_t{now_minute} + 1440) * 60, &f.reserve_until_s);
    if (ok && !f.pod_key.empty() && !f.uid.empty()) h.in_flight.push_back(std::move(f));
  }
  return h;
}

}  // namespace hami::consolidator
