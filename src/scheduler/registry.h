#pragma once
// The policy registry: one row per policy (name -> factory). Adding a policy = one folder
// src/scheduler/policies/<name>/ and one row in registry.cc.
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"
#include "scheduler/framework.h"

namespace hami::scheduler {

// Cluster-wide defaults a policy may read (upstream: --node-scheduler-policy,
// --gpu-scheduler-policy).
struct PolicyConfig {
  std::string node_policy = "binpack";  // hami default
  std::string gpu_policy = "spread";    // hami default
};

using ProfileFactory = StatusOr<std::unique_ptr<Profile>> (*)(const PolicyConfig& config);

struct PolicyRow {
  const char* name;
  ProfileFactory factory;
  const char* doc;  // one line for --help
};

// All registered policies, in registry order.
std::span<const PolicyRow> Policies();

// Builds the named policy; INVALID_ARGUMENT naming the known policies when unknown.
StatusOr<std::unique_ptr<Profile>> MakeProfile(std::string_view name,
                                               const PolicyConfig& config = {});

}  // namespace hami::scheduler
