#include "extender/dra_hook.h"

#include <algorithm>
#include <map>

#include "extender/controller.h"
#include "extender/extender.h"
#include "extender/state.h"
#include "spdlog/spdlog.h"

namespace hami::extender {
namespace {

namespace sd = scheduler::dra;

// Whether a DeviceClass selects devices of `driver`: one of its CEL selectors names the driver.
bool ClassOfDriver(const Json& device_class, const std::string& driver) {
  const Json* sels = FieldAt(device_class, {"spec", "selectors"});
  if (sels == nullptr || !sels->is_array()) return false;
  const std::string want = StrCat("device.driver == \"", driver, "\"");
  for (const Json& s : *sels)
    if (StringAt(s, {"cel", "expression"}).find(want) != std::string::npos) return true;
  return false;
}

// The claim object names of the pod: resourceClaimName, or the template's generated claim from
// status.resourceClaimStatuses ("" when not generated yet).
std::vector<std::pair<std::string, std::string>> ClaimNames(const Json& pod) {
  std::vector<std::pair<std::string, std::string>> out;  // (pod claim entry, object name)
  const Json* entries = FieldAt(pod, {"spec", "resourceClaims"});
  if (entries == nullptr || !entries->is_array()) return out;
  std::map<std::string, std::string> generated;
  if (const Json* st = FieldAt(pod, {"status", "resourceClaimStatuses"}); st && st->is_array())
    for (const Json& s : *st) generated[StringAt(s, {"name"})] = StringAt(s, {"resourceClaimName"});
  for (const Json& e : *entries) {
    const std::string entry = StringAt(e, {"name"});
    std::string object = StringAt(e, {"resourceClaimName"});
    if (object.empty() && FieldAt(e, {"resourceClaimTemplateName"}) != nullptr)
      object = generated.count(entry) ? generated[entry] : "";
    out.emplace_back(entry, object);
  }
  return out;
}

}  // namespace

Json ToJson(const std::vector<HostPriority>& list) {
  Json out = Json::array();
  for (const auto& h : list) out.push_back({{"Host", h.host}, {"Score", h.score}});
  return out;
}

DraHook::DraHook(k8s::Client& client, DraHookOptions opts) : opts_(std::move(opts)) {
  auto make = [&](const k8s::Resource& r, std::string field_selector) {
    k8s::InformerOptions o;
    o.resource = r;
    o.field_selector = std::move(field_selector);
    o.watch_timeout_seconds = opts_.watch_timeout_seconds;
    o.page_size = opts_.page_size;
    o.transform = TrimObjectMetadata;  // what the view never reads
    return std::make_unique<k8s::Informer>(client, o);
  };
  slices_ = make(k8s::kResourceSlices, StrCat("spec.driver=", opts_.driver));
  claims_ = make(k8s::kResourceClaims, "");
  classes_ = make(k8s::kDeviceClasses, "");
  auto placer = sd::DraPlacer::Create();
  if (placer.ok()) {
    placer_ = std::move(*placer);
  } else {
    spdlog::error("DRA placement: no profile: {}", std::string(placer.status().message()));
  }
}

DraHook::~DraHook() {
  Stop();
}

void DraHook::Start() {
  classes_->Start();
  slices_->Start();
  claims_->Start();
}

void DraHook::Stop() {
  claims_->Stop();
  slices_->Stop();
  classes_->Stop();
}

bool DraHook::Synced() const {
  return slices_->HasSynced() && claims_->HasSynced() && classes_->HasSynced();
}

StatusOr<std::shared_ptr<const DraHook::Snapshot>> DraHook::Current() {
  if (!Synced())
    return Unavailable(
        "hami-scheduler has not listed the ResourceSlices, ResourceClaims and "
        "DeviceClasses yet; kube-scheduler will retry");
  const std::string version =
      StrCat(slices_->LastResourceVersion(), "/", claims_->LastResourceVersion(), "/",
             classes_->LastResourceVersion());
  {
    MutexLock l(mu_);
    if (snap_ != nullptr && version == version_) return snap_;
  }
  const std::vector<Json> classes = classes_->List();
  const std::vector<Json> claims = claims_->List();
  HAMI_ASSIGN_OR_RETURN(sd::DraView view,
                        sd::DraView::Build(opts_.driver, slices_->List(), classes, claims));
  auto snap = std::make_shared<Snapshot>(Snapshot{std::move(view), {}});
  for (const Json& c : classes)
    if (ClassOfDriver(c, opts_.driver)) snap->our_classes.insert(StringAt(c, {"metadata", "name"}));
  LearnAllocated(*snap, claims);
  MutexLock l(mu_);
  version_ = version;
  snap_ = snap;
  return snap;
}

void DraHook::LearnAllocated(const Snapshot& snap, const std::vector<Json>& claims) {
  if (placer_ == nullptr) return;
  for (const Json& claim : claims) {
    if (FieldAt(claim, {"status", "allocation"}) == nullptr || !OfOurClasses(claim, snap)) continue;
    auto requests = sd::RequestsFromClaim(claim);
    if (!requests.ok()) continue;
    // The pod it was allocated for (its CPU and memory when the lookup finds it), else the claim.
    core::PodRequest pod;
    if (const Json* reserved = FieldAt(claim, {"status", "reservedFor"});
        reserved != nullptr && reserved->is_array() && !reserved->empty())
      pod.uid = StringAt((*reserved)[0], {"uid"});
    if (pod.uid.empty()) pod.uid = StringAt(claim, {"metadata", "uid"});
    if (pod.uid.empty()) continue;
    if (opts_.pod_by_uid)
      if (std::shared_ptr<const Json> live = opts_.pod_by_uid(pod.uid)) {
        ExtenderArgs args;
        args.pod = *live;
        if (auto decoded = DecodeFilterPod(args, *opts_.vendors); decoded.ok()) pod = *decoded;
      }
    placer_->Learn(sd::DraPodRequest(std::move(pod), {*requests}), {});
  }
}

bool DraHook::OfOurClasses(const Json& claim, const Snapshot& snap) {
  const Json* reqs = FieldAt(claim, {"spec", "devices", "requests"});
  if (reqs == nullptr || !reqs->is_array()) return false;
  for (const Json& r : *reqs) {
    if (snap.our_classes.count(StringAt(r, {"exactly", "deviceClassName"})) > 0) return true;
    if (const Json* subs = FieldAt(r, {"firstAvailable"}); subs != nullptr && subs->is_array())
      for (const Json& sub : *subs)
        if (snap.our_classes.count(StringAt(sub, {"deviceClassName"})) > 0) return true;
  }
  return false;
}

StatusOr<std::optional<std::vector<std::vector<sd::DeviceRequest>>>> DraHook::PendingClaims(
    const Json& pod, const Snapshot& snap) const {
  const std::string ns = StringAt(pod, {"metadata", "namespace"});
  std::vector<std::vector<sd::DeviceRequest>> pending;
  bool ours = false;
  for (const auto& [entry, object] : ClaimNames(pod)) {
    if (object.empty())
      return Unavailable("pod claim ", entry,
                         " has no ResourceClaim yet; kube-scheduler will retry");
    std::shared_ptr<const Json> claim = claims_->Find(StrCat(ns, "/", object));
    if (claim == nullptr)
      return Unavailable("ResourceClaim ", ns, "/", object,
                         " is not in hami-scheduler's cache yet; kube-scheduler will retry");
    if (!OfOurClasses(*claim, snap)) continue;
    if (FieldAt(*claim, {"status", "allocation"}) != nullptr) continue;  // placed already
    HAMI_ASSIGN_OR_RETURN(std::vector<sd::DeviceRequest> requests, sd::RequestsFromClaim(*claim));
    pending.push_back(std::move(requests));
    ours = true;
  }
  if (!ours) return std::optional<std::vector<std::vector<sd::DeviceRequest>>>();
  return std::optional(std::move(pending));
}

StatusOr<std::optional<std::vector<sd::DraNodeVerdict>>> DraHook::Evaluate(
    const ExtenderArgs& args, const std::vector<std::string>& candidates) {
  using Out = std::optional<std::vector<sd::DraNodeVerdict>>;
  const Json* claims = FieldAt(args.pod, {"spec", "resourceClaims"});
  if (claims == nullptr || !claims->is_array() || claims->empty()) return Out();
  // A pod that also asks HAMi devices gets the extender's usual decision for them (the device
  // plugin needs it); its claims are then kube-scheduler's alone.
  auto decoded = DecodeFilterPod(args, *opts_.vendors);
  if (!decoded.ok() || decoded->HasDevices()) return Out();
  if (placer_ == nullptr) return Internal("DRA placement has no profile (see the start-up log)");
  HAMI_ASSIGN_OR_RETURN(std::shared_ptr<const Snapshot> snap, Current());
  auto pending = PendingClaims(args.pod, *snap);
  // A claim the model does not cover (constraints, CEL beyond its subset) is
  // kube-scheduler's alone: we neither drop nor rank nodes for it.
  if (absl::IsUnimplemented(pending.status())) return Out();
  if (!pending.ok()) return pending.status();
  if (!*pending) return Out();
  const core::PodRequest request = sd::DraPodRequest(*std::move(decoded), **pending);
  std::vector<std::pair<std::string, sd::NodeResources>> nodes;
  nodes.reserve(candidates.size());
  for (const std::string& n : candidates)
    nodes.emplace_back(n, opts_.node_resources ? opts_.node_resources(n) : sd::NodeResources{});
  Rng rng(opts_.seed);
  auto verdicts = placer_->Evaluate(snap->view, request, **pending, nodes, rng);
  if (absl::IsUnimplemented(verdicts.status())) return Out();
  if (!verdicts.ok()) return verdicts.status();
  return Out(*std::move(verdicts));
}

std::optional<ExtenderFilterResult> DraHook::Filter(const ExtenderArgs& args) {
  std::vector<std::string> storage;
  const std::vector<std::string>& candidates = CandidateNodes(args, &storage);
  auto verdicts = Evaluate(args, candidates);
  ExtenderFilterResult out;
  if (!verdicts.ok()) {
    // Not ours when the pod has no claims of our driver; anything else is our error to report.
    out.error = StrCat("DRA placement: ", verdicts.status().message());
    return out;
  }
  if (!*verdicts) return std::nullopt;
  std::vector<std::string> fit;
  for (const auto& v : **verdicts) {
    if (v.fits)
      fit.push_back(v.node);
    else
      out.failed_nodes[v.node] = StrCat("DRA claims do not fit: ", v.why);
  }
  if (args.nodes) {
    std::vector<Json> kept;
    for (const Json& n : *args.nodes)
      if (std::find(fit.begin(), fit.end(), StringAt(n, {"metadata", "name"})) != fit.end())
        kept.push_back(n);
    out.nodes = std::move(kept);
  }
  out.node_names = std::move(fit);
  return out;
}

StatusOr<std::vector<HostPriority>> DraHook::Prioritize(const ExtenderArgs& args) {
  std::vector<std::string> storage;
  const std::vector<std::string>& candidates = CandidateNodes(args, &storage);
  std::vector<HostPriority> out;
  out.reserve(candidates.size());
  for (const auto& n : candidates) out.push_back({n, 0});
  HAMI_ASSIGN_OR_RETURN(auto verdicts, Evaluate(args, candidates));
  if (!verdicts) return out;
  const std::map<std::string, int> scores = sd::RankScores(*verdicts);
  for (auto& h : out)
    if (auto it = scores.find(h.host); it != scores.end()) h.score = it->second;
  return out;
}

std::optional<std::string> DraHook::HandleFilter(std::string_view body) {
  auto args = ParseExtenderArgs(body);
  if (!args.ok()) return std::nullopt;  // the extender answers it with its own error
  auto out = Filter(*args);
  if (!out) return std::nullopt;
  return SerializeFilterResult(*out);
}

HttpResponse ZeroPriorities(std::string_view body) {
  auto args = ParseExtenderArgs(body);
  if (!args.ok()) return {400, "text/plain", std::string(args.status().message())};
  const std::vector<std::string> names = args->CandidateNames();
  std::vector<HostPriority> out;
  out.reserve(names.size());
  for (const auto& n : names) out.push_back({n, 0});
  return {200, "application/json", ToJson(out).dump()};
}

HttpResponse DraHook::HandlePrioritize(std::string_view body) {
  auto args = ParseExtenderArgs(body);
  if (!args.ok()) return {400, "text/plain", std::string(args.status().message())};
  auto out = Prioritize(*args);
  if (!out.ok()) {
    const int code = absl::IsUnavailable(out.status()) ? 503 : 500;
    return {code, "text/plain", StrCat("DRA placement: ", out.status().message())};
  }
  return {200, "application/json", ToJson(*out).dump()};
}

}  // namespace hami::extender
