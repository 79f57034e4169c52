#pragma once
// Per-device rules of device vendors that the framework's generic checks cannot express (template
// rounding, whole-device-only, vNPU mode matching, each vendor's own selector annotations). The
// scheduler defines the interface and never sees a vendor: the adapter lives in src/vendors
// (vendors/scheduler_rules.h) and is passed in SchedulerOptions::vendor_rules.
//
// Contract: for a request whose vendor is Covered, the framework skips its generic per-device
// checks (it still drops cordoned devices) and asks Check for every device of that vendor; a chosen
// device takes what Take says. Devices of other vendors (NVIDIA) keep the generic path unchanged.
// An implementation is immutable after construction and called from concurrent scheduling cycles.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/model.h"
#include "scheduler/reasons.h"

namespace hami::scheduler {

class VendorRules {
 public:
  virtual ~VendorRules() = default;

  // True when devices whose DeviceInfo::vendor is `vendor` are judged by this object.
  virtual bool Covers(const std::string& vendor) const = 0;

  // What a vendor reads from the pod once per scheduling cycle (its selector annotations: use/nouse
  // type and uuid, modes), so that Check and Pick, called for every device of every node, do not
  // parse annotations again. The framework's CycleState calls Prepare when the cycle starts and
  // passes the result to Check and Pick.
  class PodState {
   public:
    virtual ~PodState() = default;
  };
  virtual std::unique_ptr<const PodState> Prepare(const core::PodRequest& pod) const = 0;

  struct Verdict {
    Reason reason = Reason::kCount;  // kCount = the device fits
    bool never = false;              // waiting cannot help on this device
  };
  // Whether `device` can take one unit of `request` (a container of the pod `pod` was prepared
  // from) under `usage`.
  virtual Verdict Check(const PodState& pod, const core::DeviceRequest& request,
                        const core::DeviceInfo& device, const core::DeviceUsage& usage) const = 0;

  // A vendor's rule over the pod's earlier grants on this node (upstream's customFilterRule; Moore
  // Threads puts every container of a pod on one GPU): whether device `device` (a position in
  // `devices`) may take `request` when the pod's earlier containers were granted the devices at
  // positions `earlier` on this node (every vendor's; the rule picks its own). The framework calls
  // it for devices that passed Check, only when `earlier` is not empty. Default: no such rule.
  virtual Verdict CheckWithPod(const core::DeviceRequest& request,
                               std::span<const core::DeviceInfo> devices, int device,
                               std::span<const int> earlier) const {
    return {};
  }

  struct Take {
    int64_t mem_mib = 0;
    int cores = 0;
  };
  // What `request` takes on `device` once chosen (memory resolved and rounded, e.g. to a template).
  virtual Take Grant(const core::DeviceRequest& request, const core::DeviceInfo& device) const = 0;

  // Group rules (Kunlun's NUMA halves): chooses request.nums of `candidates` (positions in
  // `devices` that passed Check under `usage`) into *out. False = no opinion, the policy's picker
  // chooses. True with fewer than request.nums in *out = no allowed group: the node is refused
  // (NumaNotFit).
  virtual bool Pick(const PodState& pod, const core::DeviceRequest& request,
                    std::span<const core::DeviceInfo> devices,
                    std::span<const core::DeviceUsage> usage, std::span<const int> candidates,
                    std::vector<int>* out) const {
    return false;
  }
  // ---- Pooled devices (remote GPUs: docs/vendors.md#remote-gpu) ----
  // Devices of a pooled vendor are registered on the node that serves them and granted to pods on
  // other nodes: a pod's requests of such a vendor are not fitted on the node the pod runs on; the
  // vendor chooses the serving node and its devices for the whole pod (ChoosePool), the framework
  // fits the rest of the pod on a node that serves no pool, and the grant is charged on the serving
  // node. Default: no vendor is pooled.
  virtual bool Pooled(const std::string& vendor) const { return false; }
  // One serving node as the cache holds it: its devices and their usage (parallel).
  struct PoolNode {
    std::string name;
    std::span<const core::DeviceInfo> devices;
    std::span<const core::DeviceUsage> usage;
  };
  struct PoolChoice {
    std::string node;  // "" = no serving node fits
    // Parallel to the requests: the devices granted to each container with a request.
    std::vector<std::vector<core::ContainerDevice>> containers;
    std::string reason;  // no node fits: upstream-style tally ("1/2 NodeInsufficientDevice")
  };
  // The serving node for a whole pod: `requests` holds each container's request of `vendor` in pod
  // order (nullopt for a container without one); `nodes` every node holding devices of `vendor`.
  virtual PoolChoice ChoosePool(const std::string& vendor,
                                std::span<const std::optional<core::DeviceRequest>> requests,
                                std::span<const PoolNode> nodes) const {
    PoolChoice none;
    none.reason = "pooled devices without a vendor to choose them";
    return none;
  }
  // The node serving a granted device of a pooled vendor ("" = not known from the grant).
  virtual std::string PoolNodeOf(const core::ContainerDevice& device) const { return {}; }

  // Topology cohesion of a grant (`granted` = positions in `devices`), 0..100, higher = better
  // connected; 0 for vendors without a topology score. The framework sums it over a pod's covered
  // requests into Placement::vendor_score, which breaks ties between equal policy scores.
  virtual int Score(const core::DeviceRequest& request, std::span<const core::DeviceInfo> devices,
                    std::span<const int> granted) const {
    return 0;
  }
};

}  // namespace hami::scheduler
