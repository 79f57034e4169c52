#pragma once
// metav1.LabelSelector evaluation, shared by the extender (PodDisruptionBudgets in preemption) and
// the device plugin (node config entries chosen by `nodelabelselector`).
#include <nlohmann/json.hpp>

#include "common/status.h"

namespace hami::k8s {

// matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist) against `labels`
// (metadata.labels; null = none). {} matches everything. A selector that is not well formed
// (unknown operator, values of the wrong shape) is an error: callers decide what it means.
StatusOr<bool> LabelSelectorMatches(const nlohmann::json& selector, const nlohmann::json& labels);

}  // namespace hami::k8s
