// Fuzz target: the webhook with DRA conversion on for every namespace. Every body gets a
// well-formed AdmissionReview; every patch applies to its pod; a converted pod keeps no HAMi
// NVIDIA resource in a container that got one of our claims, each of our claim entries names a
// template the store holds (none on a dry run), and every stored template passes the API server's
// ResourceClaimTemplate validation (k8s/testing/dra_api.h) unchanged by its strategy.
#include <cstdint>
#include <set>
#include <string>

#include "core/fuzz_check.h"
#include "k8s/testing/dra_api.h"
#include "webhook/webhook.h"

using namespace hami;
using namespace hami::webhook;

namespace {

const std::set<std::string> kHami = {"nvidia.com/gpu", "nvidia.com/gpumem",
                                     "nvidia.com/gpumem-percentage", "nvidia.com/gpucores",
                                     "nvidia.com/priority"};

bool Ours(const nlohmann::json& entry) {
  return entry.is_object() && entry.value("name", "").rfind("hami-gpu-", 0) == 0 &&
         entry.contains("resourceClaimTemplateName");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static MemoryDraTemplateStore* store = new MemoryDraTemplateStore();
  static Webhook* wh = [] {
    WebhookOptions o;
    o.dra.namespaces = {"*"};
    o.dra_templates = store;
    return new Webhook(o);
  }();
  const std::string body(reinterpret_cast<const char*>(data), size);
  auto resp = ParseAdmissionResponse(wh->Handle(body));
  FUZZ_CHECK(resp.ok(), "the reply is a well-formed AdmissionReview");
  auto req = ParseAdmissionReview(body);
  if (!req.ok() || !resp->patch) return 0;
  FUZZ_CHECK(resp->allowed, "patches only with allowed");
  nlohmann::json pod;
  try {
    pod = req->object.patch(*resp->patch);
  } catch (const std::exception& e) {
    FUZZ_CHECK(false, e.what());
  }
  const auto* claims =
      pod.contains("spec") && pod["spec"].is_object() && pod["spec"].contains("resourceClaims")
          ? &pod["spec"]["resourceClaims"]
          : nullptr;
  if (claims == nullptr || !claims->is_array()) return 0;
  const auto stored = store->Snapshot();
  std::string ns = req->namespace_;
  if (ns.empty()) ns = pod.at("metadata").at("namespace").get<std::string>();  // else no templates
  std::set<std::string> entries;
  for (const auto& e : *claims) {
    if (!Ours(e)) continue;
    entries.insert(e["name"].get<std::string>());
    const std::string key = ns + "/" + e["resourceClaimTemplateName"].get<std::string>();
    FUZZ_CHECK(req->dry_run || stored.count(key), "a claim entry names a stored template");
  }
  for (const char* list : {"initContainers", "containers"}) {
    if (!pod["spec"].contains(list) || !pod["spec"][list].is_array()) continue;
    for (const auto& c : pod["spec"][list]) {
      if (!c.is_object() || !c.contains("resources") || !c["resources"].is_object()) continue;
      const auto& r = c["resources"];
      bool ours = false;
      if (r.contains("claims") && r["claims"].is_array())
        for (const auto& ref : r["claims"])
          ours = ours || (ref.is_object() && entries.count(ref.value("name", "")));
      if (!ours) continue;
      for (const char* part : {"limits", "requests"})
        if (r.contains(part) && r[part].is_object())
          for (const auto& [name, v] : r[part].items())
            FUZZ_CHECK(!kHami.count(name), "no HAMi NVIDIA resource beside our claim");
    }
  }
  for (const auto& [key, tpl] : stored) {
    nlohmann::json admitted = tpl;
    const auto errors = k8s::testing::AdmitDraWrite("resourceclaimtemplates", admitted, nullptr,
                                                    false, k8s::testing::DraGates{});
    FUZZ_CHECK(errors.empty(), errors.empty() ? "" : errors.front().c_str());
    FUZZ_CHECK(admitted == tpl, "the strategy keeps the template as written");
  }
  return 0;
}
