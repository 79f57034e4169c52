// DRA conversion (dra_convert.h): tables of pods in, JSON patch and templates out, refusals; and
// the webhook's opt-in, dry run and store around it.
#include "webhook/dra_convert.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "webhook/webhook.h"

namespace hami::webhook {
namespace {

constexpr char kClass[] = "hami-core-gpu.project-hami.io";

Json Ctr(const std::string& name, const Json& limits, const Json& extra = Json::object()) {
  Json c{{"name", name}, {"image", "cuda"}};
  if (!limits.is_null()) c["resources"] = Json{{"limits", limits}};
  for (const auto& [k, v] : extra.items()) c[k] = v;
  return c;
}

Json Pod(const std::vector<Json>& containers, const Json& annotations = Json::object(),
         const Json& extra_spec = Json::object()) {
  Json spec{{"containers", containers}};
  for (const auto& [k, v] : extra_spec.items()) spec[k] = v;
  Json meta{{"name", "p"}, {"namespace", "ml"}};
  if (!annotations.empty()) meta["annotations"] = annotations;
  return Json{{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", meta}, {"spec", spec}};
}

// The one request of a converted container's template.
Json Request(int count, const Json& capacity = nullptr, const Json& selectors = nullptr) {
  Json exactly{{"deviceClassName", kClass}, {"allocationMode", "ExactCount"}, {"count", count}};
  if (!capacity.is_null()) exactly["capacity"] = {{"requests", capacity}};
  if (!selectors.is_null()) exactly["selectors"] = selectors;
  return Json{{"devices", {{"requests", Json::array({{{"name", "gpu"}, {"exactly", exactly}}})}}}};
}

// Expected ops: a NVIDIA resource leaving a container, the container's first claim, and the pod's
// first claim entries (entry index, template placeholder "T<i>").
Json Remove(const std::string& ctr, const char* part, const char* resource) {
  return {{"op", "remove"}, {"path", StrCat(ctr, "/resources/", part, "/nvidia.com~1", resource)}};
}
Json AddClaim(const std::string& ctr, int entry) {
  return {{"op", "add"},
          {"path", ctr + "/resources/claims"},
          {"value", Json::array({{{"name", StrCat("hami-gpu-", entry)}}})}};
}
Json PodClaims(const std::vector<std::pair<int, const char*>>& entries) {
  Json v = Json::array();
  for (const auto& [i, tpl] : entries)
    v.push_back({{"name", StrCat("hami-gpu-", i)}, {"resourceClaimTemplateName", tpl}});
  return {{"op", "add"}, {"path", "/spec/resourceClaims"}, {"value", v}};
}

StatusOr<DraConversion> Convert(const Json& pod, const std::vector<int64_t>& sizes_mib = {}) {
  WebhookOptions o;
  phases::PodUnderReview decoded;
  if (Status s = phases::DecodePod(pod, o, &decoded); !s.ok()) return s;
  std::vector<DraContainer> containers;
  for (const auto& c : decoded.containers) containers.push_back({c.json, c.path, c.req});
  const vendors::Vendor* nv = o.vendors->ByCommonWord(core::kNvidiaVendor);
  return ConvertPodToDra(pod, containers, decoded.parsed.selectors, nv->resources(), "ml",
                         DraConversionOptions{.namespaces = {"ml"}}, sizes_mib);
}

TEST(DraConvert, Table) {
  struct Case {
    const char* name;
    Json pod;
    std::vector<Json> claim_specs;  // templates' spec.spec, in order
    // The ops, with the template names replaced by "T0", "T1" (the templates' order).
    std::vector<Json> ops;
  };
  const Json kGpu = {{"nvidia.com/gpu", "1"}};
  const Case cases[] = {
      {"whole card: no capacity named, the device's default is all of it",
       Pod({Ctr("a", kGpu)}),
       {Request(1)},
       {Remove("/spec/containers/0", "limits", "gpu"), AddClaim("/spec/containers/0", 0),
        PodClaims({{0, "T0"}})}},
      {"4000 MiB / 30 %: memory and cores capacity",
       Pod({Ctr("a", {{"nvidia.com/gpu", "1"},
                      {"nvidia.com/gpumem", "4000"},
                      {"nvidia.com/gpucores", "30"}})}),
       {Request(1, {{"memory", "4000Mi"}, {"cores", "30"}})},
       {Remove("/spec/containers/0", "limits", "gpu"),
        Remove("/spec/containers/0", "limits", "gpumem"),
        Remove("/spec/containers/0", "limits", "gpucores"), AddClaim("/spec/containers/0", 0),
        PodClaims({{0, "T0"}})}},
      {"gpumem alone: count defaulted, cores 0 (a share without SM limit, HAMi's meaning)",
       Pod({Ctr("a", {{"nvidia.com/gpumem", "2048"}})}),
       {Request(1, {{"memory", "2Gi"}, {"cores", "0"}})},  // the API server's canonical form
       {Remove("/spec/containers/0", "limits", "gpumem"), AddClaim("/spec/containers/0", 0),
        PodClaims({{0, "T0"}})}},
      {"gpumem-percentage 100 with cores: all memory, the cores named",
       Pod({Ctr("a", {{"nvidia.com/gpu", "1"},
                      {"nvidia.com/gpumem-percentage", "100"},
                      {"nvidia.com/gpucores", "50"}})}),
       {Request(1, {{"cores", "50"}})},
       {Remove("/spec/containers/0", "limits", "gpu"),
        Remove("/spec/containers/0", "limits", "gpumem-percentage"),
        Remove("/spec/containers/0", "limits", "gpucores"), AddClaim("/spec/containers/0", 0),
        PodClaims({{0, "T0"}})}},
      {"two GPUs: one request of count 2 (the allocator gives distinct devices), also from "
       "requests",
       Pod({Ctr("a", nullptr,
                {{"resources",
                  {{"limits", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "1000"}}},
                   {"requests", {{"nvidia.com/gpu", "2"}, {"cpu", "1"}}},
                   {"claims", {{{"name", "nic"}}}}}}})},
           Json::object(),
           {{"resourceClaims", {{{"name", "nic"}, {"resourceClaimName", "my-nic"}}}}}),
       {Request(2, {{"memory", "1000Mi"}, {"cores", "0"}})},
       {Remove("/spec/containers/0", "limits", "gpu"),
        Remove("/spec/containers/0", "limits", "gpumem"),
        Remove("/spec/containers/0", "requests", "gpu"),
        {{"op", "add"},
         {"path", "/spec/containers/0/resources/claims/-"},
         {"value", {{"name", "hami-gpu-0"}}}},
        {{"op", "add"},
         {"path", "/spec/resourceClaims/-"},
         {"value", {{"name", "hami-gpu-0"}, {"resourceClaimTemplateName", "T0"}}}}}},
      {"init and app containers: a claim each; the same request shares one template",
       Pod({Ctr("b", kGpu), Ctr("cpu", nullptr), Ctr("c", {{"nvidia.com/gpumem", "100"}})},
           Json::object(), {{"initContainers", Json::array({Ctr("i", kGpu)})}}),
       {Request(1), Request(1, {{"memory", "100Mi"}, {"cores", "0"}})},
       {Remove("/spec/initContainers/0", "limits", "gpu"), AddClaim("/spec/initContainers/0", 0),
        Remove("/spec/containers/0", "limits", "gpu"), AddClaim("/spec/containers/0", 1),
        Remove("/spec/containers/2", "limits", "gpumem"), AddClaim("/spec/containers/2", 3),
        PodClaims({{0, "T0"}, {1, "T0"}, {3, "T1"}})}},
      {"use/nouse annotations: CEL selectors on the driver's attributes",
       Pod({Ctr("a", kGpu)},
           {{"nvidia.com/use-gpuuuid", "GPU-1,GPU-2"}, {"nvidia.com/nouse-gputype", "T4"}}),
       {Request(1, nullptr,
                {{{"cel",
                   {{"expression",
                     "device.attributes[\"hami-core-gpu.project-hami.io\"].uuid in [\"GPU-1\", "
                     "\"GPU-2\"]"}}}},
                 {{"cel",
                   {{"expression",
                     "!([\"t4\"].exists(t, device.attributes[\"hami-core-gpu.project-hami.io\"]."
                     "productName.lowerAscii().contains(t)))"}}}}})},
       {Remove("/spec/containers/0", "limits", "gpu"), AddClaim("/spec/containers/0", 0),
        PodClaims({{0, "T0"}})}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto conv = Convert(c.pod);
    ASSERT_TRUE(conv.ok()) << conv.status();
    ASSERT_EQ(conv->templates.size(), c.claim_specs.size());
    std::string ops = Json(c.ops).dump();
    for (size_t i = 0; i < conv->templates.size(); ++i) {
      const DraTemplate& t = conv->templates[i];
      EXPECT_EQ(t.object["spec"]["spec"], c.claim_specs[i]) << t.object.dump();
      EXPECT_EQ(t.object["metadata"]["name"], t.name);
      EXPECT_EQ(t.object["metadata"]["namespace"], "ml");
      EXPECT_EQ(t.object["apiVersion"], "resource.k8s.io/v1");
      EXPECT_TRUE(absl::StartsWith(t.name, "hami-gpu-")) << t.name;
      EXPECT_EQ(t.name.size(), 25u) << t.name;
      for (size_t at; (at = ops.find(StrCat("\"T", i, "\""))) != std::string::npos;)
        ops.replace(at, 4, StrCat("\"", t.name, "\""));
    }
    EXPECT_EQ(conv->ops, Json::parse(ops)) << conv->ops.dump();
    // The patch applies to the pod, and no NVIDIA resource is left in it.
    const Json patched = c.pod.patch(conv->ops);
    EXPECT_EQ(patched["spec"].dump().find("nvidia.com/"), std::string::npos) << patched.dump();
  }
}

TEST(DraConvert, MemoryInTheApiServersCanonicalForm) {
  const std::pair<const char*, const char*> cases[] = {
      {"1", "1Mi"},       {"1000", "1000Mi"},    {"1024", "1Gi"},
      {"1536", "1536Mi"}, {"4096", "4Gi"},       {"81920", "80Gi"},
      {"1048576", "1Ti"}, {"1049600", "1025Gi"}, {"2147483647", "2147483647Mi"},
  };
  for (const auto& [gpumem, quantity] : cases) {
    auto conv = Convert(Pod({Ctr("a", {{"nvidia.com/gpumem", gpumem}})}));
    ASSERT_TRUE(conv.ok()) << conv.status();
    EXPECT_EQ(conv->templates[0].object["spec"]["spec"]["devices"]["requests"][0]["exactly"]
                                       ["capacity"]["requests"]["memory"],
              quantity)
        << gpumem;
  }
}

TEST(DraConvert, SameRequestSameTemplateOtherRequestOther) {
  auto a = Convert(Pod({Ctr("a", {{"nvidia.com/gpumem", "4000"}})}));
  auto b = Convert(Pod({Ctr("zz", {{"nvidia.com/gpumem", "4000"}})}));
  auto c = Convert(Pod({Ctr("a", {{"nvidia.com/gpumem", "4001"}})}));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->templates[0].name, b->templates[0].name);
  EXPECT_NE(a->templates[0].name, c->templates[0].name);
}

// One firstAvailable subrequest of a percentage share: devices of `size` MiB exactly, `memory`.
Json Sub(int64_t size, int count, const char* memory, const char* cores,
         Json selectors = Json::array()) {
  const std::string quantity = size % 1024 ? StrCat(size, "Mi") : StrCat(size / 1024, "Gi");
  selectors.push_back(
      {{"cel",
        {{"expression", StrCat("device.capacity[\"", kClass, "\"].memory.compareTo(quantity(\"",
                               quantity, "\")) == 0")}}}});
  return {{"name", StrCat("mib", size)},
          {"deviceClassName", kClass},
          {"allocationMode", "ExactCount"},
          {"count", count},
          {"selectors", selectors},
          {"capacity", {{"requests", {{"memory", memory}, {"cores", cores}}}}}};
}

TEST(DraConvert, PercentageBecomesOneSubrequestPerGpuSizeSmallestFirst) {
  struct Case {
    const char* name;
    Json limits;
    Json annotations;
    std::vector<int64_t> sizes;  // published, ascending
    Json subrequests;            // the request's firstAvailable
  };
  const Json kTypeSel =
      Json::array({{{"cel",
                     {{"expression",
                       "[\"a100\"].exists(t, device.attributes[\"hami-core-gpu.project-hami.io\"]."
                       "productName.lowerAscii().contains(t))"}}}}});
  const Case cases[] = {
      {"50 % on 16 and 40 GiB: 8 GiB on the 16 GiB card first, else 20 GiB",
       {{"nvidia.com/gpumem-percentage", "50"}},
       Json::object(),
       {16384, 40960},
       Json::array({Sub(16384, 1, "8Gi", "0"), Sub(40960, 1, "20Gi", "0")})},
      {"one size, cores kept",
       {{"nvidia.com/gpumem-percentage", "25"}, {"nvidia.com/gpucores", "30"}},
       Json::object(),
       {16384},
       Json::array({Sub(16384, 1, "4Gi", "30")})},
      {"rounded down as HAMi's scheduler: 33 % of 15360 MiB is 5068 MiB",
       {{"nvidia.com/gpumem-percentage", "33"}},
       Json::object(),
       {15360},
       Json::array({Sub(15360, 1, "5068Mi", "0")})},
      {"two GPUs of one size each; the type selector on every subrequest",
       {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem-percentage", "10"}},
       {{"nvidia.com/use-gputype", "A100"}},
       {40960, 81920},
       Json::array({Sub(40960, 2, "4Gi", "0", kTypeSel), Sub(81920, 2, "8Gi", "0", kTypeSel)})},
      {"a size of which the share is under 1 MiB is left out",
       {{"nvidia.com/gpumem-percentage", "1"}},
       Json::object(),
       {50, 1024},
       Json::array({Sub(1024, 1, "10Mi", "0")})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto conv = Convert(Pod({Ctr("a", c.limits)}, c.annotations), c.sizes);
    ASSERT_TRUE(conv.ok()) << conv.status();
    ASSERT_EQ(conv->templates.size(), 1u);
    const Json& request = conv->templates[0].object["spec"]["spec"]["devices"]["requests"][0];
    EXPECT_EQ(request, (Json{{"name", "gpu"}, {"firstAvailable", c.subrequests}}))
        << request.dump(1);
  }
  // A template names the sizes: another set of published sizes is another template.
  const Json pod = Pod({Ctr("a", {{"nvidia.com/gpumem-percentage", "50"}})});
  EXPECT_NE(Convert(pod, {16384})->templates[0].name,
            Convert(pod, {16384, 40960})->templates[0].name);
}

TEST(DraConvert, PercentageRefusals) {
  struct Case {
    const char* name;
    std::vector<int64_t> sizes;
    const char* message;
  };
  const Case cases[] = {
      {"nothing published", {}, "no ResourceSlice of driver hami-core-gpu.project-hami.io"},
      {"nine sizes: more than firstAvailable holds",
       {1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192, 9216},
       "publishes 9 sizes (at most 8)"},
      {"under 1 MiB of every card", {50, 99}, "is less than 1 MiB of every published GPU"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto conv = Convert(Pod({Ctr("a", {{"nvidia.com/gpumem-percentage", "1"}})}), c.sizes);
    ASSERT_FALSE(conv.ok());
    EXPECT_TRUE(absl::IsPermissionDenied(conv.status()));
    EXPECT_NE(conv.status().message().find(c.message), std::string::npos) << conv.status();
  }
  // Eight sizes are allowed.
  EXPECT_TRUE(Convert(Pod({Ctr("a", {{"nvidia.com/gpumem-percentage", "50"}})}),
                      {1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192})
                  .ok());
}

TEST(DraConvert, DeviceSizesAreTheDriversDistinctMemoryCapacities) {
  auto slice = [](const char* driver, const std::vector<Json>& memories) {
    Json devices = Json::array();
    for (const Json& m : memories) {
      Json d = {{"name", "gpu"}};
      if (!m.is_null()) d["capacity"] = {{"memory", {{"value", m}}}};
      devices.push_back(d);
    }
    return Json{{"spec", {{"driver", driver}, {"devices", devices}}}};
  };
  struct Case {
    const char* name;
    std::vector<Json> slices;
    std::vector<int64_t> want;
  };
  const Case cases[] = {
      {"bytes as published, and suffixes; duplicates once, ascending",
       {slice(kClass, {"42949672960", "17179869184"}), slice(kClass, {"16Gi", "40Gi"})},
       {16384, 40960}},
      {"another driver's devices are not ours", {slice("gpu.example.com", {"80Gi"})}, {}},
      {"a device without memory, or with a bad quantity, is skipped",
       {slice(kClass, {nullptr, "lots", "1Mi"})},
       {1}},
      {"under 1 MiB is no size", {slice(kClass, {"1000"})}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<int64_t> sizes;
    CollectDeviceSizes(Json{{"items", c.slices}}, kClass, &sizes);
    EXPECT_EQ(sizes, c.want);
  }
  std::vector<int64_t> many;
  std::vector<Json> mems;
  for (int i = 1; i <= 100; ++i) mems.push_back(StrCat(i, "Gi"));
  CollectDeviceSizes(Json{{"items", {slice(kClass, mems)}}}, kClass, &many);
  EXPECT_EQ(many.size(), kMaxDraDeviceSizes);
}

TEST(DraConvert, Refusals) {
  const Json kGpu = {{"nvidia.com/gpu", "1"}};
  struct Case {
    const char* name;
    Json pod;
    const char* message;  // a part of the denial
  };
  const Case cases[] = {
      {"a memory percentage below 100 with no GPU published",
       Pod({Ctr("a", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "50"}})}),
       "nvidia.com/gpumem-percentage 50 needs the GPUs' memory sizes, and no ResourceSlice of "
       "driver hami-core-gpu.project-hami.io publishes"},
      {"priority", Pod({Ctr("a", {{"nvidia.com/gpu", "1"}, {"nvidia.com/priority", "1"}})}),
       "nvidia.com/priority cannot be expressed"},
      {"numa-bind", Pod({Ctr("a", kGpu)}, {{"nvidia.com/numa-bind", "true"}}),
       "nvidia.com/numa-bind asks for NUMA binding"},
      {"vgpu-mode mig", Pod({Ctr("a", kGpu)}, {{"nvidia.com/vgpu-mode", "mig"}}),
       "nvidia.com/vgpu-mode asks for a mode other than hami-core"},
      {"too many GPUs", Pod({Ctr("a", {{"nvidia.com/gpu", "17"}})}), "asks for 17 GPUs"},
      {"our claim entry name taken",
       Pod({Ctr("a", kGpu)}, Json::object(),
           {{"resourceClaims", {{{"name", "hami-gpu-0"}, {"resourceClaimName", "x"}}}}}),
       "already has an entry named \"hami-gpu-0\""},
      {"a selector value that could end the CEL string",
       Pod({Ctr("a", kGpu)}, {{"nvidia.com/use-gputype", "A100\u00e9"}}), "is not printable ASCII"},
      {"too many selector values",
       Pod({Ctr("a", kGpu)}, {{"nvidia.com/use-gpuuuid",
                               [] {
                                 std::string s;
                                 for (int i = 0; i < 65; ++i) s += StrCat("GPU-", i, ",");
                                 return s;
                               }()}}),
       "lists 65 values; at most 64"},
      {"a selector above 10 KiB",
       Pod({Ctr("a", kGpu)}, {{"nvidia.com/nouse-gpuuuid", std::string(11000, 'x')}}),
       "bytes; at most 10240"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto conv = Convert(c.pod);
    ASSERT_FALSE(conv.ok());
    EXPECT_TRUE(absl::IsPermissionDenied(conv.status())) << conv.status();
    EXPECT_NE(conv.status().message().find(c.message), std::string::npos) << conv.status();
    EXPECT_TRUE(absl::StartsWith(conv.status().message(), "hami: ")) << conv.status();
  }
}

TEST(DraConvert, CelLiteralsCannotBeEscaped) {
  core::DeviceSelectors s;
  s.use_uuids = {"a\"] || true || [\"", "b\\"};
  auto cel = DraCelSelectors(s, kClass);
  ASSERT_TRUE(cel.ok()) << cel.status();
  ASSERT_EQ(cel->size(), 1u);
  EXPECT_EQ((*cel)[0],
            "device.attributes[\"hami-core-gpu.project-hami.io\"].uuid in [\"a\\\"] || true || "
            "[\\\"\", \"b\\\\\"]");
}

// ---- the webhook around the conversion ----

std::string Review(const Json& pod, bool dry_run = false, const std::string& ns = "ml") {
  Json r = {{"apiVersion", "admission.k8s.io/v1"},
            {"kind", "AdmissionReview"},
            {"request",
             {{"uid", "u1"},
              {"namespace", ns},
              {"operation", "CREATE"},
              {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
              {"object", pod},
              {"dryRun", dry_run}}}};
  return r.dump();
}

TEST(DraConvertWebhook, OptInDryRunAndStore) {
  struct Case {
    const char* name;
    DraConversionOptions dra;
    Json pod;
    bool dry_run;
    const char* ns;
    bool converted;    // the reply holds resourceClaims
    size_t templates;  // in the store afterwards
  };
  const Json kShare = {{"nvidia.com/gpumem", "4000"}, {"nvidia.com/gpucores", "30"}};
  Json labelled = Pod({Ctr("a", kShare)});
  labelled["metadata"]["labels"] = {{"gpu", "dra"}};
  const Case cases[] = {
      {"namespace selected", {.namespaces = {"ml"}}, Pod({Ctr("a", kShare)}), false, "ml", true, 1},
      {"every namespace", {.namespaces = {"*"}}, Pod({Ctr("a", kShare)}), false, "ml", true, 1},
      {"namespace not selected: the device-plugin path",
       {.namespaces = {"other"}},
       Pod({Ctr("a", kShare)}),
       false,
       "ml",
       false,
       0},
      {"dry run: the patch, nothing created",
       {.namespaces = {"ml"}},
       Pod({Ctr("a", kShare)}),
       true,
       "ml",
       true,
       0},
      {"labels selected", {.match_labels = {{"gpu", "dra"}}}, labelled, false, "ml", true, 1},
      {"labels not carried",
       {.match_labels = {{"gpu", "dra"}}},
       Pod({Ctr("a", kShare)}),
       false,
       "ml",
       false,
       0},
      {"off", {}, Pod({Ctr("a", kShare)}), false, "ml", false, 0},
      {"no GPU: untouched",
       {.namespaces = {"ml"}},
       Pod({Ctr("a", nullptr)}),
       false,
       "ml",
       false,
       0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    MemoryDraTemplateStore store;
    WebhookOptions o;
    o.dra = c.dra;
    o.dra_templates = &store;
    Webhook wh(o);
    auto resp = ParseAdmissionResponse(wh.Handle(Review(c.pod, c.dry_run, c.ns)));
    ASSERT_TRUE(resp.ok()) << resp.status();
    ASSERT_TRUE(resp->allowed) << resp->message;
    const Json patched = resp->patch ? c.pod.patch(*resp->patch) : c.pod;
    EXPECT_EQ(patched["spec"].contains("resourceClaims"), c.converted) << patched.dump();
    // A converted pod keeps its scheduler (kube-scheduler allocates claims); the other GPU pods
    // go to hami-scheduler.
    const bool gpu = c.pod.dump().find("nvidia.com/gpumem") != std::string::npos;
    EXPECT_EQ(patched["spec"].contains("schedulerName"), gpu && !c.converted) << patched.dump();
    const auto stored = store.Snapshot();
    EXPECT_EQ(stored.size(), c.templates);
    if (c.converted) {
      const std::string tpl = patched["spec"]["resourceClaims"][0]["resourceClaimTemplateName"];
      if (c.templates == 1) {
        EXPECT_TRUE(stored.count("ml/" + tpl)) << tpl;
      }
    }
  }
}

TEST(DraConvertWebhook, OverwriteEnvHidesGpusFromContainersWithoutAClaim) {
  struct Case {
    const char* name;
    bool overwrite_env;
    Json annotations;
    std::vector<bool> hidden;  // per container: NVIDIA_VISIBLE_DEVICES=none after the patch
  };
  const Case cases[] = {
      {"off", false, Json::object(), {false, false}},
      {"on: the sidecar only", true, Json::object(), {false, true}},
      {"off, the pod asks for it", false, {{"hami.io/overwrite-env", "true"}}, {false, true}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    MemoryDraTemplateStore store;
    WebhookOptions o;
    o.overwrite_env = c.overwrite_env;
    o.dra.namespaces = {"ml"};
    o.dra_templates = &store;
    Webhook wh(o);
    const Json pod =
        Pod({Ctr("a", {{"nvidia.com/gpu", "1"}}), Ctr("sidecar", nullptr)}, c.annotations);
    auto resp = ParseAdmissionResponse(wh.Handle(Review(pod)));
    ASSERT_TRUE(resp.ok() && resp->allowed && resp->patch);
    const Json patched = pod.patch(*resp->patch);
    ASSERT_TRUE(patched["spec"].contains("resourceClaims"));
    for (size_t i = 0; i < c.hidden.size(); ++i) {
      const Json& ctr = patched["spec"]["containers"][i];
      const bool hidden =
          ctr.contains("env") &&
          ctr["env"] == Json::array({{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "none"}}});
      EXPECT_EQ(hidden, c.hidden[i]) << i << " " << ctr.dump();
    }
  }
}

TEST(DraConvertWebhook, RefusalsDenyThePod) {
  struct FailingStore : DraTemplateStore {
    Status Ensure(const std::string&, const DraTemplate&) override {
      return absl::FailedPreconditionError("exists with another spec");
    }
  };
  FailingStore failing;
  MemoryDraTemplateStore store;
  struct Case {
    const char* name;
    DraTemplateStore* store;
    Json pod;
    const char* message;
  };
  const Case cases[] = {
      {"the store refuses", &failing, Pod({Ctr("a", {{"nvidia.com/gpu", "1"}})}),
       "hami: DRA conversion: exists with another spec"},
      {"the conversion refuses", &store,
       Pod({Ctr("a", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "30"}})}),
       "needs the GPUs' memory sizes"},
      {"a privileged container is still denied", &store,
       Pod({Ctr("a", {{"nvidia.com/gpu", "1"}}, {{"securityContext", {{"privileged", true}}}})}),
       "is privileged"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    WebhookOptions o;
    o.dra.namespaces = {"ml"};
    o.dra_templates = c.store;
    Webhook wh(o);
    auto resp = ParseAdmissionResponse(wh.Handle(Review(c.pod)));
    ASSERT_TRUE(resp.ok()) << resp.status();
    EXPECT_FALSE(resp->allowed);
    EXPECT_EQ(resp->code, 403);
    EXPECT_NE(resp->message.find(c.message), std::string::npos) << resp->message;
  }
  EXPECT_TRUE(store.Snapshot().empty());
}

}  // namespace
}  // namespace hami::webhook
