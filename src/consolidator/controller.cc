#include "consolidator/controller.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/log.h"
#include "consolidator/history.h"
#include "scheduler/gpu_reservation.h"

namespace hami::consolidator {
namespace {

std::string Meta(const Json& obj, const char* map, const char* key) {
  if (!obj.contains("metadata") || !obj["metadata"].contains(map)) return "";
  const Json& m = obj["metadata"][map];
  auto it = m.is_object() ? m.find(key) : m.end();
  return m.is_object() && it != m.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

Controller::Controller(k8s::Client& client, ControllerOptions options, const Clock& clock)
    : client_(client), options_(std::move(options)), clock_(clock), rule_(options_.usage) {}

void Controller::Event(const PodRef& pod, const std::string& type, const std::string& reason,
                       const std::string& message) {
  k8s::EventSpec e;
  e.involved_object = {{"kind", "Pod"},
                       {"apiVersion", "v1"},
                       {"namespace", pod.ns},
                       {"name", pod.name},
                       {"uid", pod.uid}};
  e.type = type;
  e.reason = reason;
  e.message = message;
  e.component = options_.component;
  e.host = options_.host;
  if (Status s = client_.CreateEvent(e); !s.ok())
    SPDLOG_WARN("consolidate: event {} on {}/{}: {}", reason, pod.ns, pod.name, s.ToString());
}

Status Controller::Evict(const PodRef& pod, std::string* outcome, bool* blocked) {
  *blocked = false;
  const Json eviction = {
      {"apiVersion", "policy/v1"},
      {"kind", "Eviction"},
      {"metadata", {{"name", pod.name}, {"namespace", pod.ns}}},
      // Never the pod's namesake: a StatefulSet re-creates a pod under the same name.
      {"deleteOptions", {{"preconditions", {{"uid", pod.uid}}}}}};
  StatusOr<Json> r = client_.Create(k8s::kPods, pod.ns, eviction, "eviction", pod.name);
  if (r.ok()) {
    *outcome = "evicted";
    return OkStatus();
  }
  *blocked = absl::IsResourceExhausted(r.status());
  *outcome = *blocked ? "blocked by its disruption budget" : "failed";
  return r.status();
}

Status Controller::PublishFreeGpus(const Objects& objects, const Snapshot& snap,
                                   const std::map<int, int>& evicted_from, RoundReport* report) {
  std::map<std::string, std::vector<std::string>> free;  // node -> uuids
  for (size_t g = 0; g < snap.gpus.size(); ++g) {
    const GpuRef& gpu = snap.gpus[g];
    auto e = evicted_from.find(static_cast<int>(g));
    const int left = gpu.pods - (e == evicted_from.end() ? 0 : e->second);
    free[gpu.node];  // every node with GPUs gets an entry (an empty one clears the keys)
    if (left <= 0) free[gpu.node].push_back(gpu.uuid);
  }
  Status first = OkStatus();
  for (const Json& node : objects.nodes) {
    const std::string name = node["metadata"].value("name", "");
    auto it = free.find(name);
    if (it == free.end()) continue;
    std::vector<std::string>& uuids = it->second;
    std::sort(uuids.begin(), uuids.end());
    report->free_gpus += static_cast<int>(uuids.size());
    std::string list;
    for (const std::string& u : uuids) list += (list.empty() ? "" : ",") + u;
    const std::string count = uuids.empty() ? "" : std::to_string(uuids.size());
    if (Meta(node, "annotations", kFreeGpus) == list && Meta(node, "labels", kFreeGpus) == count)
      continue;
    Json patch = {{"metadata",
                   {{"annotations", {{kFreeGpus, list.empty() ? Json() : Json(list)}}},
                    {"labels", {{kFreeGpus, count.empty() ? Json() : Json(count)}}}}}};
    StatusOr<Json> r = client_.Patch(k8s::kNodes, "", name, k8s::PatchType::kMerge, patch);
    if (!r.ok() && first.ok()) first = r.status();
  }
  return first;
}

Status Controller::WriteReservations(const std::string& node, int64_t now_s) {
  std::vector<scheduler::GpuReservation> live;
  for (const InFlight& f : history_.in_flight)
    if (f.to_node == node && f.reserve_until_s > now_s &&
        live.size() < scheduler::kMaxGpuReservations)
      live.push_back({f.uid, f.pod_key.substr(0, f.pod_key.find('/')), f.owner_uid, f.to_gpu,
                      f.mem_mib, f.cores, f.reserve_until_s});
  const std::string value = scheduler::EncodeGpuReservations(live);
  if (reservations_on_[node] == value) return OkStatus();
  Json patch = {{"metadata",
                 {{"annotations",
                   {{scheduler::kGpuReservationsKey, value.empty() ? Json() : Json(value)}}}}}};
  StatusOr<Json> r = client_.Patch(k8s::kNodes, "", node, k8s::PatchType::kMerge, patch);
  if (!r.ok()) return r.status();
  reservations_on_[node] = value;
  return OkStatus();
}

Status Controller::LoadHistory(int32_t now_minute) {
  StatusOr<Json> cm =
      client_.Get(k8s::kConfigMaps, options_.history_namespace, options_.history_name);
  if (absl::IsNotFound(cm.status())) return OkStatus();
  if (!cm.ok()) return cm.status();
  const std::string version = (*cm)["metadata"].value("resourceVersion", "");
  if (version == history_version_) return OkStatus();  // ours: memory is as new
  history_version_ = version;
  history_saved_.clear();
  const Json* data = cm->contains("data") ? &(*cm)["data"] : nullptr;
  const std::string text = data != nullptr && data->is_object() ? data->value(kHistoryKey, "") : "";
  StatusOr<History> h = DecodeHistory(text, now_minute);
  if (!h.ok()) {
    SPDLOG_WARN("consolidate: ConfigMap {}/{} ignored: {}", options_.history_namespace,
                options_.history_name, h.status().ToString());
    return OkStatus();
  }
  history_ = std::move(*h);
  history_saved_ = text;
  return OkStatus();
}

void Controller::SaveHistory() {
  const std::string text = EncodeHistory(history_);
  if (text == history_saved_) return;
  Json cm = {
      {"apiVersion", "v1"},
      {"kind", "ConfigMap"},
      {"metadata", {{"name", options_.history_name}, {"namespace", options_.history_namespace}}},
      {"data", {{kHistoryKey, text}}}};
  StatusOr<Json> r = Json();
  if (history_version_.empty()) {
    r = client_.Create(k8s::kConfigMaps, options_.history_namespace, cm);
  } else {
    cm["metadata"]["resourceVersion"] = history_version_;
    r = client_.Update(k8s::kConfigMaps, options_.history_namespace, cm);
  }
  if (!r.ok()) {  // another leader wrote it (409), or the API failed: the next round reads it
    SPDLOG_WARN("consolidate: saving the history in ConfigMap {}/{}: {}",
                options_.history_namespace, options_.history_name, r.status().ToString());
    return;
  }
  history_version_ = (*r)["metadata"].value("resourceVersion", "");
  history_saved_ = text;
}

StatusOr<RoundReport> Controller::RunOnce() {
  const int32_t now = static_cast<int32_t>(clock_.UnixSeconds() / 60);
  if (!options_.history_name.empty())
    if (Status s = LoadHistory(now); !s.ok()) return s;  // never act without the caps' history
  Objects objects;
  struct ToList {
    const k8s::Resource* r;
    std::vector<Json>* into;
  };
  for (const ToList& l : {ToList{&k8s::kNodes, &objects.nodes}, ToList{&k8s::kPods, &objects.pods},
                          ToList{&k8s::kPodDisruptionBudgets, &objects.pdbs},
                          ToList{&k8s::kNamespaces, &objects.namespaces}}) {
    StatusOr<Json> list = client_.List(*l.r, "");
    if (!list.ok()) return list.status();
    if (list->contains("items") && (*list)["items"].is_array())
      for (Json& item : (*list)["items"]) l.into->push_back(std::move(item));
  }
  Snapshot snap = BuildSnapshot(objects, &history_, rule_, options_.eligibility, now,
                                options_.move_timeout_min);
  const consolidate::Plan plan = consolidate::PlanMoves(snap.state, options_.plan);
  RoundReport report;
  report.plan_text = consolidate::FormatPlan(snap.state, plan);
  for (const HeldPod& h : snap.held)
    report.plan_text += "hold " + h.pod + ": " + HoldName(h.why) + "\n";
  report.saving_gpus = plan.saving_gpus;
  report.planned = static_cast<int>(plan.moves.size());
  ++counters_.rounds;
  auto back_off = [&](const std::string& workload) {
    const int n = ++history_.failures[workload];
    int64_t wait = options_.backoff_min;
    for (int i = 1; i < n && wait < options_.backoff_max_min; ++i) wait *= 2;
    history_.backoff_until[workload] =
        now + static_cast<int32_t>(std::min<int64_t>(wait, options_.backoff_max_min));
  };
  if (options_.dry_run) return report;
  // Reservations as the nodes carry them; those of moves that finished, expired or were given up
  // are withdrawn.
  const int64_t now_s = clock_.UnixSeconds();
  reservations_on_.clear();
  for (const Json& node : objects.nodes)
    if (std::string v = Meta(node, "annotations", scheduler::kGpuReservationsKey); !v.empty())
      reservations_on_[node["metadata"].value("name", "")] = v;
  {
    std::set<std::string> nodes;
    for (const auto& [node, value] : reservations_on_) nodes.insert(node);
    for (const InFlight& f : history_.in_flight)
      if (!f.to_node.empty()) nodes.insert(f.to_node);
    for (const std::string& node : nodes)
      if (Status s = WriteReservations(node, now_s); !s.ok())
        SPDLOG_WARN("consolidate: reservations on node {}: {}", node, s.ToString());
  }

  for (const InFlight& f : snap.timed_out) {
    ++counters_.timed_out;
    back_off(f.workload);
    SPDLOG_WARN("consolidate: no replacement of {} ran within {} min; {} backs off", f.pod_key,
                options_.move_timeout_min, f.workload);
  }
  std::set<int> failed_gpus;  // a move off it failed: the rest of its plan is not tried
  std::map<std::string, int64_t> pdb_left;  // disruptions each PDB still allows this round
  std::map<int, int> evicted_from;
  for (const consolidate::Move& m : plan.moves) {
    const PodRef& pod = snap.pods[static_cast<size_t>(m.pod)];
    const std::string& from = snap.gpus[static_cast<size_t>(m.from)].uuid;
    const std::string& to = snap.gpus[static_cast<size_t>(m.to)].uuid;
    const std::string what = StrCat(pod.ns, "/", pod.name, " ", from, " -> ", to);
    if (may_act_ && !may_act_()) {
      ++report.skipped;
      report.lines.push_back(StrCat(what, ": skipped (no longer leading)"));
      continue;
    }
    if (failed_gpus.count(m.from) != 0) {
      ++report.skipped;
      report.lines.push_back(StrCat(what, ": skipped (an earlier move off its GPU failed)"));
      continue;
    }
    auto abort_gpu = [&]() {
      if (failed_gpus.insert(m.from).second && m.reason == consolidate::Reason::kEmptyGpu)
        ++counters_.aborted_plans;
    };
    if (!pod.pdb.empty()) {
      auto [it, _] = pdb_left.emplace(pod.pdb, pod.pdb_allowed);
      if (it->second <= 0) {
        ++report.blocked;
        ++counters_.blocked;
        abort_gpu();
        report.lines.push_back(StrCat(what, ": skipped (", pod.pdb, " allows no more this round)"));
        continue;
      }
    }
    const std::string key = pod.ns + "/" + pod.name;
    const GpuRef& dest = snap.gpus[static_cast<size_t>(m.to)];
    InFlight flight;
    flight.pod_key = key;
    flight.uid = pod.uid;
    flight.workload = pod.workload;
    flight.from_gpu = from;
    flight.to_gpu = to;
    flight.minute = now;
    flight.deadline_minute = now + options_.move_timeout_min;
    // The destination is reserved for the workload's next pod before the pod goes.
    if (options_.reserve_min > 0) {
      flight.to_node = dest.node;
      flight.owner_uid = pod.owner_uid;
      flight.mem_mib = pod.mem_mib;
      flight.cores = pod.cores;
      flight.reserve_until_s = now_s + int64_t{options_.reserve_min} * 60;
      history_.in_flight.push_back(flight);
      if (Status r = WriteReservations(dest.node, now_s); !r.ok()) {
        history_.in_flight.pop_back();
        ++report.failed;
        ++counters_.failed;
        abort_gpu();
        report.lines.push_back(
            StrCat(what, ": failed (cannot reserve ", to, ": ", r.message(), ")"));
        continue;
      }
      history_.in_flight.pop_back();  // back below once the eviction went through
    }
    std::string outcome;
    bool blocked = false;
    const Status s = Evict(pod, &outcome, &blocked);
    const std::string why = std::string(consolidate::ReasonName(m.reason));
    if (!s.ok() && options_.reserve_min > 0) {
      if (Status r = WriteReservations(dest.node, now_s); !r.ok())  // withdrawn
        SPDLOG_WARN("consolidate: reservations on node {}: {}", dest.node, r.ToString());
    }
    if (s.ok()) {
      ++report.evicted;
      ++counters_.moves;
      counters_.relief_moves += m.reason == consolidate::Reason::kRelief;
      ++evicted_from[m.from];
      if (!pod.pdb.empty()) --pdb_left[pod.pdb];
      history_.moves[key].push_back(now);
      history_.in_flight.push_back(flight);
      history_.failures.erase(pod.workload);
      Event(pod, "Normal", "ConsolidationMove",
            StrCat("Evicted to move off GPU ", from, " on node ", pod.node, " (", why,
                   "); planned destination GPU ", to, " on node ", dest.node,
                   options_.reserve_min > 0
                       ? StrCat(", reserved for its replacement for ", options_.reserve_min, " min")
                       : std::string()));
    } else {
      abort_gpu();
      back_off(pod.workload);
      if (blocked) {
        ++report.blocked;
        ++counters_.blocked;
      } else {
        ++report.failed;
        ++counters_.failed;
      }
      Event(pod, "Warning", blocked ? "ConsolidationBlocked" : "ConsolidationFailed",
            StrCat("Move off GPU ", from, " (", why, ") not carried out: ", s.message()));
    }
    report.lines.push_back(StrCat(what, ": ", outcome));
  }
  if (Status s = PublishFreeGpus(objects, snap, evicted_from, &report); !s.ok())
    SPDLOG_WARN("consolidate: publishing free GPUs: {}", s.ToString());
  if (last_round_minute_ >= 0)
    counters_.free_gpu_minutes +=
        static_cast<double>(counters_.free_gpus) * static_cast<double>(now - last_round_minute_);
  counters_.free_gpus = report.free_gpus;
  last_round_minute_ = now;
  if (!options_.history_name.empty()) SaveHistory();
  return report;
}

std::string Controller::RenderMetrics() const {
  struct Row {
    const char* name;
    const char* type;
    double value;
    const char* help;
  };
  const auto n = [](int64_t v) { return static_cast<double>(v); };
  const Counters& c = counters_;
  const Row rows[] = {
      {"rounds_total", "counter", n(c.rounds), "Planning rounds run."},
      {"moves_total", "counter", n(c.moves), "Pods evicted to move them (relief and empty-gpu)."},
      {"relief_moves_total", "counter", n(c.relief_moves), "Of them, relief moves."},
      {"blocked_total", "counter", n(c.blocked), "Moves a PodDisruptionBudget refused."},
      {"failed_total", "counter", n(c.failed), "Moves the API server refused otherwise."},
      {"aborted_plans_total", "counter", n(c.aborted_plans),
       "GPUs whose emptying stopped at a refused move."},
      {"timed_out_total", "counter", n(c.timed_out),
       "Moves whose replacement did not run in time."},
      {"free_gpus", "gauge", n(c.free_gpus), "GPUs holding no pod after the last round."},
      {"free_gpu_hours_total", "counter", c.free_gpu_minutes / 60.0,
       "GPU-hours the free GPUs stayed free, summed over rounds."},
  };
  std::string out;
  for (const Row& r : rows) {
    const std::string name = std::string("hami_consolidate_") + r.name;
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, r.help, r.type, r.value);
  }
  return out;
}

}  // namespace hami::consolidator
