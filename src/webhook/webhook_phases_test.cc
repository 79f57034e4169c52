// One table per phase of a CREATE review (webhook.h, namespace phases), each phase called alone.
#include <gtest/gtest.h>

#include "vendors/testing/mixed_config.h"
#include "webhook/webhook.h"

namespace hami::webhook::phases {
namespace {

Json Ctr(const std::string& name, const Json& limits, const Json& extra = Json::object()) {
  Json c{{"name", name}, {"image", "cuda"}};
  if (!limits.is_null()) c["resources"] = Json{{"limits", limits}};
  for (const auto& [k, v] : extra.items()) c[k] = v;
  return c;
}

Json Pod(const Json& containers, const Json& extra_spec = Json::object(),
         const Json& meta = Json{{"name", "p"}, {"namespace", "ml"}}) {
  Json spec{{"containers", containers}};
  for (const auto& [k, v] : extra_spec.items()) spec[k] = v;
  return Json{{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", meta}, {"spec", spec}};
}

const Json kGpu1 = {{"nvidia.com/gpu", "1"}};
const Json kNoLimits = nullptr;

TEST(WebhookPhases, StripOwnedKeys) {
  const OwnedKeys owned = SchedulerOwnedKeys(vendors::VendorSet::NvidiaOnly());
  struct Case {
    const char* name;
    Json meta;
    std::vector<std::string> stripped;
    std::vector<std::string> paths;
  };
  const Case cases[] = {
      {"nothing owned", {{"name", "p"}, {"annotations", {{"a", "b"}}}}, {}, {}},
      {"decision annotation",
       {{"annotations",
         {{"hami.io/vgpu-devices-allocated", "x"}, {"nvidia.com/use-gputype", "A100"}}}},
       {"hami.io/vgpu-devices-allocated"},
       {"/metadata/annotations/hami.io~1vgpu-devices-allocated"}},
      {"node label",
       {{"labels", {{"hami.io/vgpu-node", "n1"}}}},
       {"label hami.io/vgpu-node"},
       {"/metadata/labels/hami.io~1vgpu-node"}},
      {"no metadata maps", {{"annotations", "not a map"}}, {}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Json ops = Json::array();
    EXPECT_EQ(StripOwnedKeys(Pod(Json::array({Ctr("c", kGpu1)}), {}, c.meta), owned, &ops),
              c.stripped);
    std::vector<std::string> paths;
    for (const Json& op : ops) {
      EXPECT_EQ(op["op"], "remove");
      paths.push_back(op["path"]);
    }
    EXPECT_EQ(paths, c.paths);
  }
}

TEST(WebhookPhases, ScopeOf) {
  struct Case {
    const char* name;
    Json pod;
    bool force_default = true;
    Scope want;
  };
  const Json one = Json::array({Ctr("c", kGpu1)});
  const Case cases[] = {
      {"ours by default", Pod(one), true, Scope::kReview},
      {"our scheduler named", Pod(one, {{"schedulerName", "hami-scheduler"}}), true,
       Scope::kReview},
      {"default-scheduler taken over", Pod(one, {{"schedulerName", "default-scheduler"}}), true,
       Scope::kReview},
      {"default-scheduler left alone", Pod(one, {{"schedulerName", "default-scheduler"}}), false,
       Scope::kIgnored},
      {"another scheduler", Pod(one, {{"schedulerName", "volcano"}}), true, Scope::kIgnored},
      {"ignore label", Pod(one, {}, {{"name", "p"}, {"labels", {{"hami.io/webhook", "ignore"}}}}),
       true, Scope::kIgnored},
      {"other label value", Pod(one, {}, {{"name", "p"}, {"labels", {{"hami.io/webhook", "on"}}}}),
       true, Scope::kReview},
      {"empty containers", Pod(Json::array()), true, Scope::kNoContainers},
      {"containers not an array", Pod(Json::object()), true, Scope::kNoContainers},
      {"no spec", Json{{"metadata", {{"name", "p"}}}}, true, Scope::kNoContainers},
      {"no containers beats another scheduler", Pod(Json::array(), {{"schedulerName", "volcano"}}),
       true, Scope::kNoContainers},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    WebhookOptions opts;
    opts.force_overwrite_default_scheduler = c.force_default;
    EXPECT_EQ(ScopeOf(c.pod, opts), c.want);
  }
}

TEST(WebhookPhases, DecodePod) {
  struct Case {
    const char* name;
    Json pod;
    std::vector<std::string> paths;  // PodRequest order
    std::vector<int> nums;           // devices[0].nums per container, 0 = none
    const char* error = "";
  };
  const Case cases[] = {
      {"init then app containers",
       Pod(Json::array({Ctr("a", kGpu1), Ctr("b", kNoLimits)}),
           {{"initContainers", Json::array({Ctr("i", {{"nvidia.com/gpu", "2"}})})}}),
       {"/spec/initContainers/0", "/spec/containers/0", "/spec/containers/1"},
       {2, 1, 0}},
      {"no devices", Pod(Json::array({Ctr("a", {{"cpu", "1"}})})), {"/spec/containers/0"}, {0}},
      {"bad quantity",
       Pod(Json::array({Ctr("a", {{"nvidia.com/gpumem", "4.5"}})})),
       {},
       {},
       "hami: the pod's device request is invalid: "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    WebhookOptions opts;
    PodUnderReview out;
    Status s = DecodePod(c.pod, opts, &out);
    if (*c.error) {
      ASSERT_FALSE(s.ok());
      EXPECT_NE(std::string(s.message()).find(c.error), std::string::npos) << s;
      continue;
    }
    ASSERT_TRUE(s.ok()) << s;
    std::vector<std::string> paths;
    std::vector<int> nums;
    for (const auto& ctr : out.containers) {
      paths.push_back(ctr.path);
      ASSERT_NE(ctr.req, nullptr);
      nums.push_back(ctr.req->devices.empty() ? 0 : ctr.req->devices[0].nums);
    }
    EXPECT_EQ(paths, c.paths);
    EXPECT_EQ(nums, c.nums);
  }
}

TEST(WebhookPhases, MutateContainersRunsEveryVendorNvidiaIncluded) {
  auto mixed = vendors::VendorSet::Load(vendors::testing::kMixedConfig);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  auto no_nvidia = vendors::VendorSet::Load("nvidia:\n  enabled: false\nhygon: {}\n");
  ASSERT_TRUE(no_nvidia.ok()) << no_nvidia.status();
  using Limits = std::map<std::string, int64_t>;
  using Env = std::vector<std::pair<std::string, std::string>>;
  struct Case {
    const char* name;
    const vendors::VendorSet* set;
    Json container;
    Limits limits;
    Env env;
    const char* error = "";
  };
  const vendors::VendorSet* nv = &vendors::VendorSet::NvidiaOnly();
  const Case cases[] = {
      {"gpumem only: count added",
       nv,
       Ctr("c", {{"nvidia.com/gpumem", "1000"}}),
       {{"nvidia.com/gpu", 1}},
       {}},
      {"whole card: exclusive cores", nv, Ctr("c", kGpu1), {{"nvidia.com/gpucores", 100}}, {}},
      {"priority of an NVIDIA container",
       nv,
       Ctr("c",
           {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "30"}, {"nvidia.com/priority", "1"}}),
       {},
       {{"CUDA_TASK_PRIORITY", "1"}}},
      {"priority without a device: no env",
       nv,
       Ctr("c", {{"nvidia.com/priority", "1"}, {"cpu", "1"}}),
       {},
       {}},
      {"no resources", nv, Ctr("c", kNoLimits), {}, {}},
      {"percentage out of range names the container",
       nv,
       Ctr("c", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "150"}}),
       {},
       {},
       "hami: /spec/containers/0 \"c\": nvidia.com/gpumem-percentage: 150 is outside 0..100"},
      {"NVIDIA disabled: its limits are not ours",
       no_nvidia->get(),
       Ctr("c", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "150"}}),
       {},
       {}},
      {"another vendor's defaulting",
       mixed->get(),
       Ctr("c", {{"hygon.com/dcunum", "1"}}),
       {{"hygon.com/dcucores", 100}},
       {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    WebhookOptions opts;
    opts.vendors = c.set;
    const Json pod = Pod(Json::array({c.container}));
    PodUnderReview decoded;
    ASSERT_TRUE(DecodePod(pod, opts, &decoded).ok());
    auto got = MutateContainers(decoded, *c.set);
    if (*c.error) {
      ASSERT_FALSE(got.ok());
      EXPECT_NE(std::string(got.status().message()).find(c.error), std::string::npos)
          << got.status();
      continue;
    }
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), 1u);
    EXPECT_EQ((*got)[0].add_limits, c.limits);
    EXPECT_EQ((*got)[0].env, c.env);
  }
}

// mig_preference_test.go TestValidateMigProfilePreference: every entry must match a profile of
// the allowlist (any model), by name or slice class; a list with no entry is refused; a pod
// without the annotation, or with NVIDIA disabled, passes.
TEST(WebhookPhases, CheckMigPreference) {
  WebhookOptions opts;
  opts.mig_profile_allowlist = {
      {{"A100-SXM4-40GB"}, {"1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}},
      {{"H100-SXM5-80GB"}, {"1g.10gb", "3g.40gb", "4g.40gb", "7g.80gb"}},
  };
  struct Case {
    const char* name;
    const char* value;       // null: no annotation
    const char* error = "";  // "" = passes
  };
  const Case cases[] = {
      {"exact name", "4g.20gb"},
      {"slice class allowed on some model", "4g"},
      {"ordered list mixing models", " 4g.40gb , 3g "},
      {"no annotation", nullptr},
      {"profile allowed on no model", "5g.30gb",
       "hami: annotation nvidia.com/mig-profile-preference: entry \"5g.30gb\" matches no profile "
       "of the cluster's nvidia.migProfileAllowlist"},
      {"slice class allowed on no model", "3g.20gb,6g", "entry \"6g\" matches no profile"},
      {"empty list", " , ", "\" , \" names no profile"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Json meta{{"name", "p"}, {"namespace", "ml"}};
    if (c.value) meta["annotations"] = {{"nvidia.com/mig-profile-preference", c.value}};
    // A pod without devices too: upstream runs the check on every container.
    for (const Json& limits : {kGpu1, Json(nullptr)}) {
      PodUnderReview decoded;
      ASSERT_TRUE(DecodePod(Pod(Json::array({Ctr("c", limits)}), {}, meta), opts, &decoded).ok());
      Status s = CheckMigPreference(decoded, opts);
      if (!*c.error) {
        EXPECT_TRUE(s.ok()) << s;
        continue;
      }
      ASSERT_FALSE(s.ok());
      EXPECT_NE(std::string(s.message()).find(c.error), std::string::npos) << s;
    }
  }
  // The default allowlist is upstream's chart list: 3g.20gb (A100-40GB) is in it, 5g is not.
  WebhookOptions defaults;
  for (const auto& [value, ok] : {std::pair{"3g.20gb", true}, std::pair{"5g", false}}) {
    PodUnderReview decoded;
    const Json meta{{"name", "p"}, {"annotations", {{"nvidia.com/mig-profile-preference", value}}}};
    ASSERT_TRUE(DecodePod(Pod(Json::array({Ctr("c", kGpu1)}), {}, meta), defaults, &decoded).ok());
    EXPECT_EQ(CheckMigPreference(decoded, defaults).ok(), ok) << value;
  }
  // NVIDIA disabled: its annotation is nobody's to check.
  auto no_nvidia = vendors::VendorSet::Load("nvidia:\n  enabled: false\nhygon: {}\n");
  ASSERT_TRUE(no_nvidia.ok()) << no_nvidia.status();
  WebhookOptions off;
  off.vendors = no_nvidia->get();
  PodUnderReview decoded;
  const Json meta{{"name", "p"}, {"annotations", {{"nvidia.com/mig-profile-preference", "9g"}}}};
  ASSERT_TRUE(DecodePod(Pod(Json::array({Ctr("c", kNoLimits)}), {}, meta), off, &decoded).ok());
  EXPECT_TRUE(CheckMigPreference(decoded, off).ok());
}

TEST(WebhookPhases, CheckTrust) {
  struct Case {
    const char* name;
    Json pod;
    const char* error = "";  // "" = passes
  };
  const Json priv = {{"securityContext", {{"privileged", true}}}};
  const Json sys_admin = {{"securityContext", {{"capabilities", {{"add", {"CAP_SYS_ADMIN"}}}}}}};
  const Case cases[] = {
      {"clean", Pod(Json::array({Ctr("c", kGpu1)}))},
      {"privileged device container", Pod(Json::array({Ctr("c", kGpu1, priv)})),
       "containers container \"c\" is privileged"},
      {"SYS_ADMIN sidecar without devices",
       Pod(Json::array({Ctr("c", kGpu1), Ctr("s", kNoLimits, sys_admin)})),
       "container \"s\" adds CAP_SYS_ADMIN"},
      {"privileged init container",
       Pod(Json::array({Ctr("c", kGpu1)}),
           {{"initContainers", Json::array({Ctr("i", kNoLimits, priv)})}}),
       "initContainers container \"i\""},
      {"privileged: false is fine",
       Pod(Json::array({Ctr("c", kGpu1, {{"securityContext", {{"privileged", false}}}})}))},
      {"nodeName preset", Pod(Json::array({Ctr("c", kGpu1)}), {{"nodeName", "n1"}}),
       "spec.nodeName is preset (\"n1\")"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    WebhookOptions opts;
    PodUnderReview decoded;
    ASSERT_TRUE(DecodePod(c.pod, opts, &decoded).ok());
    Status s = CheckTrust(decoded, opts);
    if (!*c.error) {
      EXPECT_TRUE(s.ok()) << s;
      continue;
    }
    ASSERT_FALSE(s.ok());
    EXPECT_NE(std::string(s.message()).find(c.error), std::string::npos) << s;
  }
}

TEST(WebhookPhases, CheckQuota) {
  struct Case {
    const char* name;
    Json pod;
    std::string request_ns;
    bool with_quota = true;
    std::string charged_ns;  // "" = the check is not called
    const char* error = "";
  };
  const Json mem =
      Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}})});
  const Json big =
      Json::array({Ctr("c", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "20000"}})});
  const Case cases[] = {
      {"no quotas configured", Pod(mem), "ml", false, ""},
      {"request namespace wins", Pod(mem, {}, {{"namespace", "meta"}}), "ml", true, "ml"},
      {"metadata namespace otherwise", Pod(mem, {}, {{"namespace", "meta"}}), "", true, "meta"},
      {"no namespace at all", Pod(mem, {}, {{"name", "p"}}), "", true, "",
       "the pod's namespace is unknown"},
      {"over the quota", Pod(big), "ml", true, "ml", "hami: over: 40000 MiB"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    WebhookOptions opts;
    std::string charged;
    if (c.with_quota)
      opts.quota_check = [&](const std::string& ns,
                             const std::map<std::string, int64_t>& demand) -> Status {
        charged = ns;
        const auto it = demand.find("nvidia.com/gpumem");
        const int64_t mem_mib = it == demand.end() ? 0 : it->second;
        if (mem_mib > 20000) return ResourceExhausted("over: ", mem_mib, " MiB");
        return OkStatus();
      };
    PodUnderReview decoded;
    ASSERT_TRUE(DecodePod(c.pod, opts, &decoded).ok());
    Status s = CheckQuota(c.pod, decoded, c.request_ns, opts);
    EXPECT_EQ(charged, c.charged_ns);
    if (!*c.error) {
      EXPECT_TRUE(s.ok()) << s;
      continue;
    }
    ASSERT_FALSE(s.ok());
    EXPECT_NE(std::string(s.message()).find(c.error), std::string::npos) << s;
  }
}

TEST(WebhookPhases, BuildPatch) {
  auto add = [](const std::string& path, const Json& value) {
    return Json{{"op", "add"}, {"path", path}, {"value", value}};
  };
  const Json sched = add("/spec/schedulerName", "hami-scheduler");
  struct Case {
    const char* name;
    Json pod;
    std::vector<ContainerChanges> changes;
    std::function<void(WebhookOptions&)> configure;
    Json want;
  };
  const Case cases[] = {
      {"no devices: nothing",
       Pod(Json::array({Ctr("c", {{"cpu", "1"}})})),
       {{}},
       {},
       Json::array()},
      {"no devices, overwriteEnv",
       Pod(Json::array({Ctr("c", {{"cpu", "1"}})})),
       {{}},
       [](WebhookOptions& o) { o.overwrite_env = true; },
       Json::array({add("/spec/containers/0/env",
                        Json::array({{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "none"}}}))})},
      {"limits added one by one, env, scheduler",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpumem", "1000"}})})),
       {{{{"nvidia.com/gpu", 1}}, {{"CUDA_TASK_PRIORITY", "0"}}}},
       {},
       Json::array({add("/spec/containers/0/resources/limits/nvidia.com~1gpu", "1"),
                    add("/spec/containers/0/env",
                        Json::array({{{"name", "CUDA_TASK_PRIORITY"}, {"value", "0"}}})),
                    sched})},
      {"a container without resources gets the whole object",
       Pod(Json::array({Ctr("c", kGpu1), Ctr("d", kNoLimits)})),
       {{}, {{{"x.com/n", 1}}, {}}},
       {},
       Json::array({add("/spec/containers/1/resources", {{"limits", {{"x.com/n", "1"}}}}), sched})},
      {"core policy for NVIDIA containers, runtime class, region group, scheduler replaced",
       Pod(Json::array({Ctr("c", kGpu1)}), {{"schedulerName", "default-scheduler"}}),
       {{}},
       [](WebhookOptions& o) {
         o.gpu_core_policy = "force";
         o.runtime_class_name = "nvidia";
         o.region_group = 4242;
       },
       Json::array(
           {add("/spec/containers/0/env",
                Json::array({{{"name", "GPU_CORE_UTILIZATION_POLICY"}, {"value", "force"}}})),
            add("/spec/securityContext", {{"supplementalGroups", {4242}}}),
            add("/spec/runtimeClassName", "nvidia"),
            Json{
                {"op", "replace"}, {"path", "/spec/schedulerName"}, {"value", "hami-scheduler"}}})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    WebhookOptions opts;
    if (c.configure) c.configure(opts);
    PodUnderReview decoded;
    ASSERT_TRUE(DecodePod(c.pod, opts, &decoded).ok());
    ASSERT_EQ(decoded.containers.size(), c.changes.size());
    Json ops = Json::array();
    BuildPatch(decoded, c.changes, opts, &ops);
    EXPECT_EQ(ops, c.want) << ops.dump();
  }
}

}  // namespace
}  // namespace hami::webhook::phases
