#pragma once
// Upstream HAMi's policies (docs/upstream-contract.md#filter-per-node, #node-score-and-choice,
// #topology-and-numa): node binpack/spread and GPU
// binpack/spread/mutex/numa/topology-aware and comma chains, with per-pod overrides
// (hami.io/node-scheduler-policy, hami.io/gpu-scheduler-policy, hami.io/device-scoring-weights).
// GPU ties break as upstream's (a single value: highest NUMA node, then the device registered
// last; a chain: highest device index). Unlike
// upstream, the pod's own request is counted in both the GPU and the node score.
#include <memory>

#include "scheduler/registry.h"

namespace hami::scheduler::policies {

// "hami": node and GPU policy from the config (defaults binpack / spread), pod annotations
// override.
StatusOr<std::unique_ptr<Profile>> MakeHami(const PolicyConfig& config);
// "hami-binpack" / "hami-spread": both node and GPU policy fixed to binpack / spread (pod
// annotations still override).
StatusOr<std::unique_ptr<Profile>> MakeHamiBinpack(const PolicyConfig& config);
StatusOr<std::unique_ptr<Profile>> MakeHamiSpread(const PolicyConfig& config);

}  // namespace hami::scheduler::policies
