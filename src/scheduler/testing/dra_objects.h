#pragma once
// resource.k8s.io/v1 objects as the hami-cpp DRA plugin publishes them, for the tests of the
// reference allocator, the DRA placement and the extender's hook.
#include <nlohmann/json.hpp>
#include <string>

namespace hami::scheduler::testing {

// A shared GPU: 16 GiB, 100 cores, whole-device defaults (a claim that names nothing takes it
// whole), attributes type and productName, and uuid when given.
inline nlohmann::json DraGpu(const std::string& name, const std::string& product = "A100",
                             const std::string& uuid = "") {
  nlohmann::json gpu = {
      {"name", name},
      {"allowMultipleAllocations", true},
      {"attributes", {{"type", {{"string", "hami-gpu"}}}, {"productName", {{"string", product}}}}},
      {"capacity",
       {{"memory",
         {{"value", "16Gi"},
          {"requestPolicy",
           {{"default", "16Gi"}, {"validRange", {{"min", "1Mi"}, {"step", "1Mi"}}}}}}},
        {"cores",
         {{"value", "100"},
          {"requestPolicy",
           {{"default", "100"},
            {"validRange", {{"min", "0"}, {"max", "100"}, {"step", "1"}}}}}}}}}};
  if (!uuid.empty()) gpu["attributes"]["uuid"] = {{"string", uuid}};
  return gpu;
}

}  // namespace hami::scheduler::testing
