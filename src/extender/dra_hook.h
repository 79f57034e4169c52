#pragma once
// The extender's hook for pods with DRA claims of our driver (docs/dra.md#placement; flag
// `hami scheduler --dra-placement`, off by default). Stock kube-scheduler allocates DRA claims
// itself: its DynamicResources plugin filters the nodes where the claims fit and, on the node it
// binds to, writes the first devices that fit into each claim's status.allocation. What is ours:
// which node. /filter keeps the candidate nodes where the pod's pending claims fit by the same
// KEP-5075 first-fit model (scheduler/dra_allocator.h) over the published ResourceSlices and the
// allocated claims, and /prioritize scores each node by `default`'s scorer on the state first fit
// leaves there (scheduler/dra_placement.h: the scorer of `hami sim --policy dra-hami`), as a rank
// 0..10. What is not ours: the device on the node (kube-scheduler's allocator decides and writes
// it), the claim's lifecycle, and nodes kube-scheduler filtered out before us.
//
// A pod is ours when one of its claims that is not allocated yet has a request of a DeviceClass
// whose selectors name `device.driver == "<driver>"`; its claims are found by
// spec.resourceClaims[].resourceClaimName, or for a template by
// status.resourceClaimStatuses[].resourceClaimName. Every other pod is left to the extender's
// usual verbs (Filter returns nullopt) and gets 0 everywhere from /prioritize.
//
// The hook watches ResourceSlices (field selector spec.driver), ResourceClaims (all namespaces)
// and DeviceClasses with the k8s informers (paged lists, bounded watches; claims and slices kept
// without managedFields), and rebuilds its view when one of them has changed since the last
// request. It reserves nothing and writes nothing: the allocation it scores is the one
// kube-scheduler makes. Thread-safe.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "common/rng.h"
#include "extender/http_server.h"
#include "extender/wire.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "scheduler/dra_placement.h"
#include "vendors/vendor_set.h"

namespace hami::extender {

// HostPriority of the extender protocol v1 (prioritize reply: a list of them).
struct HostPriority {
  std::string host;   // Host
  int64_t score = 0;  // Score, 0..10 (MaxExtenderPriority)
  bool operator==(const HostPriority&) const = default;
};
Json ToJson(const std::vector<HostPriority>& list);

// /prioritize without --dra-placement: 0 for every candidate (400 for a request that does not
// parse).
HttpResponse ZeroPriorities(std::string_view body);

struct DraHookOptions {
  std::string driver = "hami-core-gpu.project-hami.io";
  const vendors::VendorSet* vendors = &vendors::VendorSet::NvidiaOnly();  // decodes the pod
  // The node's CPU and memory as the scheduler's cache counts them; unset or all 0 = not tracked
  // (the score then leaves CPU out).
  std::function<scheduler::dra::NodeResources(const std::string& node)> node_resources;
  // The pod of a uid (informer cache), for the CPU and memory of the pod a claim is allocated to
  // when the policies learn it; unset or null: the claim's devices only.
  std::function<std::shared_ptr<const Json>(const std::string& uid)> pod_by_uid;
  int64_t watch_timeout_seconds = 300;
  int64_t page_size = 500;
  uint64_t seed = 1;  // shareIDs of the simulated allocations (never written anywhere)
};

class DraHook {
 public:
  // Informers on `client` (not started).
  DraHook(k8s::Client& client, DraHookOptions opts);
  ~DraHook();
  void Start();
  void Stop();
  bool Synced() const;

  // The filter verdict for a pod of ours; nullopt for any other pod. Nodes where the claims do not
  // fit go to FailedNodes with the allocator's reason; an Error when the informers have not
  // synced or a claim of the pod is not in the cache yet (kube-scheduler retries).
  std::optional<ExtenderFilterResult> Filter(const ExtenderArgs& args);
  // Scores per candidate (0 for every node when the pod is not ours, or for a node where it does
  // not fit). Errors as Filter's.
  StatusOr<std::vector<HostPriority>> Prioritize(const ExtenderArgs& args);

  // Bodies: nullopt from HandleFilter = not ours, hand the body to Extender::HandleFilter.
  std::optional<std::string> HandleFilter(std::string_view body);
  // 200 with the HostPriorityList; 400 for a request that does not parse; 503 before sync.
  HttpResponse HandlePrioritize(std::string_view body);

 private:
  // What the informers held at one moment: the view and our DeviceClasses' names.
  struct Snapshot {
    scheduler::dra::DraView view;
    std::set<std::string> our_classes;
  };
  // The snapshot of the informers' current content (rebuilt when one has changed).
  StatusOr<std::shared_ptr<const Snapshot>> Current();
  // The learning policies observe each allocated claim of ours once, as the pod it is reserved
  // for (Reserve's moment for the pods the extender binds itself).
  void LearnAllocated(const Snapshot& snap, const std::vector<Json>& claims);
  static bool OfOurClasses(const Json& claim, const Snapshot& snap);
  // The pod's pending claims of our driver (each claim's requests); nullopt when the pod is not
  // ours; an error when one of its claims is not in the cache.
  StatusOr<std::optional<std::vector<std::vector<scheduler::dra::DeviceRequest>>>> PendingClaims(
      const Json& pod, const Snapshot& snap) const;
  // The verdicts of `candidates` for a pod of ours (nullopt: not ours, or outside the model).
  StatusOr<std::optional<std::vector<scheduler::dra::DraNodeVerdict>>> Evaluate(
      const ExtenderArgs& args, const std::vector<std::string>& candidates);

  DraHookOptions opts_;
  std::unique_ptr<k8s::Informer> slices_, claims_, classes_;
  std::unique_ptr<scheduler::dra::DraPlacer> placer_;
  Mutex mu_;
  std::string version_ ABSL_GUARDED_BY(mu_);  // the informers' resourceVersions of snap_
  std::shared_ptr<const Snapshot> snap_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hami::extender
