#pragma once
// One pod annotation set by the webhook, in its working copy and in the JSON patch
// (usage_apply.cc).
#include <string>

#include "nlohmann/json.hpp"

namespace hami::webhook {

// Sets metadata.annotations[key] = value in *pod and appends the JSON-patch op that does the same
// to the API server's copy (creating metadata or annotations where absent) to *ops.
void SetAnnotation(nlohmann::json* pod, const std::string& key, const std::string& value,
                   nlohmann::json* ops);

}  // namespace hami::webhook
