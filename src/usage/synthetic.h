#pragma once
// A seeded synthetic usage trace with the shape of a GenAI serving fleet (docs/utilization.md): the
// project's tests and example use it instead of a production trace (which the repository must not
// ship). One workload of `pods` replicas over `minutes`: diurnal, fleet-correlated duty (mostly
// idle, a few busier replicas), resident memory 17-32 GiB with model-loading spikes up to about
// 47 GiB; some replicas leave after the warm-up and others arrive later, a few short-lived.
#include <cstdint>

#include "usage/trace.h"

namespace hami::usage {

struct SyntheticOptions {
  uint64_t seed = 1;
  int pods = 60;       // replicas alive from minute 0
  int late_pods = 12;  // replicas arriving later
  int32_t minutes = 1441;
};

UsageTrace SyntheticTrace(const SyntheticOptions& options);

}  // namespace hami::usage
