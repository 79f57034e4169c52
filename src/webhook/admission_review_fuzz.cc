// Fuzz target: the webhook answers every body with a well-formed AdmissionReview, and every patch
// it returns applies cleanly (RFC 6902) to the pod it was computed for, makes the pod ours unless
// it only strips scheduler-owned keys or sets NVIDIA_VISIBLE_DEVICES=none (overwriteEnv), and no
// scheduler-owned annotation is left on a created pod.
#include <cstdint>
#include <string>

#include "core/fuzz_check.h"
#include "webhook/webhook.h"

using namespace hami;
using namespace hami::webhook;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Webhook* wh = [] {
    WebhookOptions o;
    o.gpu_core_policy = "force";
    o.overwrite_env = true;
    o.runtime_class_name = "nvidia";
    o.quota_check = [](const std::string&, const std::map<std::string, int64_t>& d) -> Status {
      const int64_t mem = d.count("nvidia.com/gpumem") ? d.at("nvidia.com/gpumem") : 0;
      return mem > 100000 ? ResourceExhausted("exceeding resource quota") : OkStatus();
    };
    o.scheduler_users = {"system:serviceaccount:hami-system:hami-scheduler"};
    return new Webhook(o);
  }();
  static const OwnedKeys owned = SchedulerOwnedKeys(vendors::VendorSet::NvidiaOnly());
  const std::string body(reinterpret_cast<const char*>(data), size);
  const std::string reply = wh->Handle(body);
  auto resp = ParseAdmissionResponse(reply);
  FUZZ_CHECK(resp.ok(), "the reply is a well-formed AdmissionReview");
  auto req = ParseAdmissionReview(body);
  if (!req.ok()) {
    FUZZ_CHECK(!resp->allowed, "an unreadable review is refused");
    return 0;
  }
  FUZZ_CHECK(resp->uid == req->uid, "response.uid = request.uid");
  if (resp->patch) {
    FUZZ_CHECK(resp->allowed, "patches only with allowed");
    nlohmann::json patched;
    try {
      patched = req->object.patch(*resp->patch);
    } catch (const std::exception& e) {
      FUZZ_CHECK(false, e.what());
    }
    // A pod that is not made ours may only lose scheduler-owned keys and, with overwriteEnv, have
    // its containers' NVIDIA_VISIBLE_DEVICES set to none.
    const nlohmann::json none_entry = {{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "none"}};
    bool only_strips = true;
    for (const auto& op : *resp->patch) {
      const std::string path = op.value("path", "");
      const bool env_path = path.rfind("/spec/", 0) == 0 &&
                            path.find("ontainers/") != std::string::npos &&
                            path.find("/env") != std::string::npos;
      const nlohmann::json value = op.value("value", nlohmann::json());
      const bool none_value = value == none_entry || value == nlohmann::json::array({none_entry});
      only_strips = only_strips && (op.value("op", "") == "remove" || (env_path && none_value));
    }
    FUZZ_CHECK(only_strips || patched["spec"]["schedulerName"] == "hami-scheduler",
               "the pod is ours after the patch");
    const auto* ann = patched.contains("metadata") && patched["metadata"].is_object() &&
                              patched["metadata"].contains("annotations") &&
                              patched["metadata"]["annotations"].is_object()
                          ? &patched["metadata"]["annotations"]
                          : nullptr;
    if (req->operation == "CREATE" && ann != nullptr)
      for (const auto& key : owned.annotations)
        FUZZ_CHECK(!ann->contains(key), "no scheduler-owned annotation survives CREATE");
  }
  return 0;
}
