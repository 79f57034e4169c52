// Fuzz target: the webhook answers every body with a well-formed AdmissionReview, and every patch it
// returns applies cleanly (RFC 6902) to the pod it was computed for.
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
    o.quota_check = [](const std::string&, int64_t mem, int64_t) -> Status {
      return mem > 100000 ? ResourceExhausted("exceeding resource quota") : OkStatus();
    };
    return new Webhook(o);
  }();
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
    FUZZ_CHECK(patched["spec"]["schedulerName"] == "hami-scheduler", "the pod is ours after the patch");
  }
  return 0;
}
