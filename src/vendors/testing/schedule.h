#pragma once
// Scheduling through the real scheduler with a VendorSet as its vendor rules, for vendor tests
// whose rule lives in the scheduler (policies such as mutex, rules across a pod's containers).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "scheduler/scheduler.h"
#include "vendors/vendor_set.h"

namespace hami::vendors::testing {

// A Pod object with one container per entry of `limits` (named c0, c1, ...).
inline nlohmann::json PodJson(const std::vector<nlohmann::json>& limits,
                              const nlohmann::json& annotations = nlohmann::json::object()) {
  nlohmann::json containers = nlohmann::json::array();
  for (size_t i = 0; i < limits.size(); ++i)
    containers.push_back({{"name", StrCat("c", i)}, {"resources", {{"limits", limits[i]}}}});
  return {{"metadata",
           {{"name", "p"}, {"namespace", "ns"}, {"uid", "u1"}, {"annotations", annotations}}},
          {"spec", {{"containers", containers}}}};
}

// The explained decision for `pod` on the one node `view` registers (through `set`), with `busy`
// (other pods' decisions) placed on it first.
inline StatusOr<scheduler::Decision> ScheduleOnOneNode(const VendorSet& set, const NodeView& view,
                                                       const std::vector<core::PodAllocation>& busy,
                                                       const nlohmann::json& pod) {
  scheduler::SchedulerOptions so;
  so.vendor_rules = &set;
  HAMI_ASSIGN_OR_RETURN(auto sched, scheduler::Scheduler::Create(so));
  VendorSet::NodeDevices decoded = set.DecodeNode(view, 0);
  if (!decoded.errors.empty()) return InvalidArgument(decoded.errors);
  core::NodeInfo node;
  node.name = view.name;
  node.devices = std::move(decoded.devices);
  for (size_t i = 0; i < busy.size(); ++i) {
    core::PodAllocation a = busy[i];
    a.node = view.name;
    HAMI_RETURN_IF_ERROR(sched->AddPod(StrCat("busy-", i), a));
  }
  sched->UpsertNode(std::move(node));
  HAMI_ASSIGN_OR_RETURN(core::PodRequest req, set.ParsePod(pod));
  scheduler::ScheduleOptions opt;
  opt.explain = true;
  return sched->Schedule(req, nullptr, opt);
}

}  // namespace hami::vendors::testing
