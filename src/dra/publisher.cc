#include "dra/publisher.h"

#include <set>

#include "dra/device_status.h"
#include "spdlog/spdlog.h"

namespace hami::dra {

namespace {

using Json = nlohmann::json;

// The slice's spec without the pool generation: what a change is measured on.
Json SpecSansGeneration(const Json& slice) {
  Json spec = slice.value("spec", Json::object());
  if (spec.contains("pool") && spec["pool"].is_object()) spec["pool"].erase("generation");
  return spec;
}

}  // namespace

StatusOr<Json> K8sClaimSource::GetClaim(const std::string& ns, const std::string& name) {
  return client_->Get(k8s::kResourceClaims, ns, name);
}

StatusOr<Json> K8sClaimSource::GetPod(const std::string& ns, const std::string& name) {
  return client_->Get(k8s::kPods, ns, name);
}

Status K8sClaimSource::WriteDeviceStatus(const ClaimRef& ref, const std::string& driver,
                                         const std::string& pool, const Json& entries) {
  k8s::MutateOptions o;
  o.subresource = "status";
  o.max_attempts = 3;
  auto written = client_->Mutate(
      k8s::kResourceClaims, ref.namespace_, ref.name,
      [&](Json& claim) -> Status {
        if (claim["metadata"].value("uid", "") != ref.uid)
          return FailedPrecondition("the claim now has uid ", claim["metadata"].value("uid", ""),
                                    ", not ", ref.uid);
        Json& status = claim["status"];
        if (!status.is_object()) status = Json::object();
        const Json current = status.value("devices", Json());
        Json merged = MergeDeviceStatus(current, driver, pool, entries);
        if (merged != current && !(merged.empty() && current.is_null()))
          status["devices"] = std::move(merged);
        return OkStatus();
      },
      o);
  return Annotate(written.status(),
                  StrCat("resourceclaims/status ", ref.namespace_, "/", ref.name));
}

bool KeptMultipleAllocations(const Json& wanted, const Json& stored) {
  const Json& w = wanted["spec"]["devices"];
  const Json* s = stored.contains("spec") ? &stored["spec"] : nullptr;
  if (s == nullptr || !s->contains("devices") || !(*s)["devices"].is_array()) return false;
  for (const auto& wd : w) {
    if (!wd.value("allowMultipleAllocations", false)) continue;
    bool kept = false;
    for (const auto& sd : (*s)["devices"])
      if (sd.value("name", "") == wd["name"] && sd.value("allowMultipleAllocations", false))
        kept = true;
    if (!kept) return false;
  }
  return true;
}

SlicePublisher::SlicePublisher(k8s::Client* client, SliceOptions options,
                               std::vector<gpu::GpuInfo> gpus,
                               std::map<std::string, GpuExtras> extras, const HealthBoard* health)
    : client_(client),
      options_(std::move(options)),
      gpus_(std::move(gpus)),
      extras_(std::move(extras)),
      health_(health) {}

std::vector<gpu::GpuInfo> SlicePublisher::HealthyGpus() const {
  if (health_ == nullptr) return gpus_;
  uint64_t version = 0;
  std::set<std::string> unhealthy;
  for (const auto& e : health_->Snapshot(&version))
    if (!e.healthy) unhealthy.insert(e.device);
  std::vector<gpu::GpuInfo> out;
  for (const auto& g : gpus_)
    if (!unhealthy.count(DeviceName(g, options_.vendor))) out.push_back(g);
  return out;
}

StatusOr<Json> SlicePublisher::Write(const std::vector<gpu::GpuInfo>& gpus, const Json* existing,
                                     int64_t generation) {
  SliceOptions o = options_;
  o.generation = generation;
  HAMI_ASSIGN_OR_RETURN(Json slice, BuildResourceSlice(gpus, extras_, o));
  if (existing == nullptr) return client_->Create(k8s::kResourceSlices, "", slice);
  slice["metadata"]["resourceVersion"] = (*existing)["metadata"].value("resourceVersion", "");
  return client_->Update(k8s::kResourceSlices, "", slice);
}

StatusOr<SlicePublisher::Outcome> SlicePublisher::Reconcile() {
  auto node = client_->Get(k8s::kNodes, "", options_.node_name);
  if (!node.ok()) return Annotate(node.status(), StrCat("node ", options_.node_name));
  options_.node_uid = (*node)["metadata"].value("uid", "");
  const std::string name = SliceName(options_.node_name, options_.driver);
  auto existing = client_->Get(k8s::kResourceSlices, "", name);
  if (!existing.ok() && !absl::IsNotFound(existing.status()))
    return Annotate(existing.status(), StrCat("resourceslice ", name));
  const Json* prev = existing.ok() ? &*existing : nullptr;
  const std::vector<gpu::GpuInfo> gpus = HealthyGpus();
  int64_t generation = 1;
  if (prev != nullptr) {
    const Json& pool = (*prev)["spec"]["pool"];
    generation = pool.is_object() ? pool.value("generation", int64_t{0}) : 0;
    HAMI_ASSIGN_OR_RETURN(Json want, BuildResourceSlice(gpus, extras_, options_));
    const bool owner_ok =
        (*prev)["metadata"].value("ownerReferences", Json()) == want["metadata"]["ownerReferences"];
    if (owner_ok && SpecSansGeneration(*prev) == SpecSansGeneration(want))
      return Outcome{Action::kNone, generation, options_.shared};
    ++generation;
  }
  auto stored = Write(gpus, prev, generation);
  if (!stored.ok()) return Annotate(stored.status(), StrCat("resourceslice ", name));
  Outcome out{prev == nullptr ? Action::kCreated : Action::kUpdated, generation, options_.shared};
  if (options_.shared) {
    HAMI_ASSIGN_OR_RETURN(Json want, BuildResourceSlice(gpus, extras_, options_));
    if (!KeptMultipleAllocations(want, *stored)) {
      spdlog::error(
          "dra: the API server dropped allowMultipleAllocations from resourceslice {}: consumable "
          "capacity (feature gate DRAConsumableCapacity, off before Kubernetes 1.36) is off. "
          "Publishing exclusive devices: each claim gets a whole GPU. Turn the gate on in "
          "kube-apiserver, kube-scheduler and the kubelet to share GPUs.",
          name);
      options_.shared = false;
      ++generation;
      auto again = Write(gpus, &*stored, generation);
      if (!again.ok()) return Annotate(again.status(), StrCat("resourceslice ", name));
      out = {Action::kUpdated, generation, false};
    }
  }
  return out;
}

}  // namespace hami::dra
