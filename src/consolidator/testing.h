#pragma once
// Builders of the Kubernetes objects the consolidation tests feed the controller: nodes that
// register GPUs, pods placed on one of them with a usage profile and an owner, PDBs.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/node_codec.h"
#include "core/pod_codec.h"
#include "usage/recommend.h"

namespace hami::consolidator::testing {

using Json = nlohmann::json;

// A steady profile: `level_mib` in every hour, peak `peak_mib`, idle.
inline std::string Profile(int32_t level_mib, int32_t peak_mib) {
  usage::UsageProfile p;
  p.minutes = 600;
  p.mem_mib.fill(level_mib);
  p.duty.fill(0);
  p.mem_all = level_mib;
  p.duty_all = 0;
  p.mem_peak = peak_mib;
  usage::DutyHistogram h{};
  h[0] = 1000;
  p.duty_hist.fill(h);
  p.duty_hist_busiest = h;
  return usage::FormatUsageProfile(p);
}

// A node registering `uuids`, each of `mib` MiB.
inline Json Node(const std::string& name, const std::vector<std::string>& uuids,
                 int64_t mib = 81920) {
  std::vector<core::DeviceInfo> devs;
  for (size_t i = 0; i < uuids.size(); ++i) {
    core::DeviceInfo d;
    d.uuid = uuids[i];
    d.index = static_cast<int>(i);
    d.count = 10;
    d.devmem_mib = mib;
    d.type = "NVIDIA-H100";
    devs.push_back(d);
  }
  return {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", name},
        {"annotations", {{"hami.io/node-nvidia-register", core::EncodeNodeDevicesJson(devs)}}}}},
      {"spec", Json::object()}};
}

// A running pod of Deployment `deploy` (through its ReplicaSet `deploy-5d8f`) on GPU `uuid` of
// `node`, booking `limit_mib`, with a usage profile at `level_mib` (0: none).
inline Json Pod(const std::string& ns, const std::string& name, const std::string& node,
                const std::string& uuid, int32_t level_mib, const std::string& deploy = "web",
                int64_t limit_mib = 30000) {
  core::PodAllocation a;
  a.containers.push_back({core::ContainerDevice{uuid, core::kNvidiaVendor, limit_mib, 0}});
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", name},
                {"namespace", ns},
                {"labels", {{"app", deploy}, {"pod-template-hash", "5d8f"}}},
                {"annotations", {{"hami.io/vgpu-devices-allocated", *core::EncodePodDevices(a)}}},
                {"ownerReferences",
                 {{{"apiVersion", "apps/v1"},
                   {"kind", "ReplicaSet"},
                   {"name", deploy + "-5d8f"},
                   {"uid", "rs-" + deploy},
                   {"controller", true}}}}}},
              {"spec", {{"nodeName", node}, {"containers", {{{"name", "c"}, {"image", "srv"}}}}}},
              {"status", {{"phase", "Running"}, {"startTime", "2026-12-01T00:00:00Z"}}}};
  if (level_mib > 0)
    pod["metadata"]["annotations"]["hami.io/usage-profile"] = Profile(level_mib, level_mib + 10000);
  return pod;
}

inline Json Pdb(const std::string& ns, const std::string& name, const std::string& app,
                int64_t allowed) {
  return {{"apiVersion", "policy/v1"},
          {"kind", "PodDisruptionBudget"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"selector", {{"matchLabels", {{"app", app}}}}}, {"minAvailable", 1}}},
          {"status",
           {{"disruptionsAllowed", allowed},
            {"currentHealthy", 1 + allowed},
            {"desiredHealthy", 1},
            {"expectedPods", 1 + allowed}}}};
}

}  // namespace hami::consolidator::testing
