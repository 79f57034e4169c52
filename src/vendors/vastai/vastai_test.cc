// Upstream HAMi's Vastai and Biren tests (pkg/device/vastai/device_test.go,
// pkg/device/biren/device_test.go: the two backends are the same shape), case by case, through our
// Vendor interface; each table is named after the upstream test it comes from and runs for both.
#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "vendors/testing/defaults.h"
#include "vendors/testing/schedule.h"

namespace hami::vendors {
namespace {

using testing::ByWord;

struct Backend {
  const char* word;
  const char* resource;
  const char* register_key;
  const char* use_uuid;
  const char* nouse_uuid;
};
constexpr Backend kBackends[] = {
    {"Vastai", "vastaitech.com/va", "hami.io/node-va-register", "vastaitech.com/use-gpuuuid",
     "vastaitech.com/nouse-gpuuuid"},
    {"Biren", "birentech.com/gpu", "hami.io/node-biren-register", "birentech.com/use-gpuuuid",
     "birentech.com/nouse-gpuuuid"},
};

TEST(VastaiBirenUpstream, Test_MutateAdmission) {
  for (const Backend& b : kBackends) {
    SCOPED_TRACE(b.word);
    // "set to resource limits": admitted, nothing added (upstream returns true, no change).
    auto m = ByWord(b.word).Mutate({{"limits", {{b.resource, 1}}}}, {});
    ASSERT_TRUE(m.ok());
    EXPECT_TRUE(m->empty());
  }
}

TEST(VastaiBirenUpstream, Test_GetNodeDevices) {
  struct Case {
    const char* name;
    bool has_annotation;
    const char* value;
    bool ok;
    size_t devices;
  } cases[] = {
      {"no annotation", false, "", true, 0},
      {"exist device", true,
       R"([{"id":"7-0","count":1,"devmem":32768,"type":"TYPE","health":true,"devicepairscore":{}}])",
       true, 1},
      // upstream: no devices (and an error) for both; ours: an empty list, no devices
      {"no device", true, ":", true, 0},
      {"node annotations not decode successfully", true, "", true, 0},
      {"garbage is an error naming the annotation", true, "[{", false, 0},
  };
  for (const Backend& b : kBackends) {
    for (const Case& c : cases) {
      SCOPED_TRACE(StrCat(b.word, ": ", c.name));
      NodeView n;
      std::string value = c.value;
      if (auto at = value.find("TYPE"); at != std::string::npos) value.replace(at, 4, b.word);
      if (c.has_annotation) n.annotations[b.register_key] = value;
      auto devs = ByWord(b.word).DecodeNode(n);
      ASSERT_EQ(devs.ok(), c.ok) << devs.status();
      if (!c.ok) {
        EXPECT_NE(std::string(devs.status().message()).find(b.register_key), std::string::npos);
        continue;
      }
      ASSERT_EQ(devs->size(), c.devices);
      if (c.devices == 0) continue;
      const core::DeviceInfo& d = (*devs)[0];
      EXPECT_EQ(d.uuid, "7-0");
      EXPECT_EQ(d.count, 1);
      EXPECT_EQ(d.devmem_mib, 32768);
      EXPECT_EQ(d.devcore, 100);  // upstream sets 100 for the score
      EXPECT_EQ(d.type, b.word);
      EXPECT_EQ(d.vendor, b.word);
      EXPECT_EQ(d.index, 0);
      EXPECT_TRUE(d.health);
    }
  }
}

TEST(VastaiBirenUpstream, Test_CheckHealth) {
  for (const Backend& b : kBackends) {
    SCOPED_TRACE(b.word);
    const Vendor& v = ByWord(b.word);
    EXPECT_EQ(v.keys().handshake, std::string(b.word) == "Vastai" ? "hami.io/node-handshake-va"
                                                                  : "hami.io/node-handshake-biren");
    // "Requesting state expired": unhealthy once the request is old and nothing is allocatable.
    const int64_t now = 1736208000 + 3600;  // 2025-01-07 01:00:00 UTC
    EXPECT_EQ(CheckHandshake("Requesting_2025-01-07 00:00:00", now, 0).verdict,
              Handshake::kUnhealthy);
    // "Unknown state": healthy, and a new request is written.
    EXPECT_EQ(CheckHandshake("Unknown", now, 0).verdict, Handshake::kWriteRequest);
  }
}

TEST(VastaiBirenUpstream, Test_GenerateResourceRequests) {
  struct Case {
    const char* name;
    nlohmann::json resources;  // "R" is replaced by the backend's resource
    bool has;
  } cases[] = {
      {"don't set to limits and request",
       {{"limits", nlohmann::json::object()}, {"requests", nlohmann::json::object()}},
       false},
      {"set to limits and request", {{"limits", {{"R", 1}}}, {"requests", {{"R", 1}}}}, true},
      {"only set to limits", {{"limits", {{"R", 1}}}}, true},
      {"only set to request", {{"requests", {{"R", 1}}}}, true},
  };
  for (const Backend& b : kBackends) {
    for (const Case& c : cases) {
      SCOPED_TRACE(StrCat(b.word, ": ", c.name));
      nlohmann::json res = c.resources;
      for (auto& [part, m] : res.items())
        if (m.contains("R")) m = {{b.resource, m["R"]}};
      auto r = ByWord(b.word).ParseRequest(res, {});
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->has_value(), c.has);
      if (!c.has) continue;
      core::DeviceRequest want;
      want.vendor = b.word;
      want.nums = 1;
      want.mem_percentage = 100;
      want.coresreq = 0;
      EXPECT_EQ(**r, want);
    }
  }
}

TEST(VastaiBirenUpstream, Test_PatchAnnotations) {
  for (const Backend& b : kBackends) {
    SCOPED_TRACE(b.word);
    core::PodAllocation a;
    a.containers = {{{"test1", b.word, 2048, 1, 1}}};
    auto ann = ByWord(b.word).EncodeDecision(a, 0);
    ASSERT_TRUE(ann.ok()) << ann.status();
    const std::string want = StrCat("test1,", b.word, ",2048,1:;");
    EXPECT_EQ(*ann, (std::map<std::string, std::string>{
                        {StrCat("hami.io/", b.word, "-devices-to-allocate"), want},
                        {StrCat("hami.io/", b.word, "-devices-allocated"), want}}));
  }
}

TEST(VastaiBirenUpstream, TestDevices_Fit) {
  struct Case {
    const char* name;
    std::vector<core::DeviceUsage> usage;  // of dev-0, dev-1 (one slot each)
    bool use_dev0 = false, nouse_dev0 = false, healthy = true;
    const char* want;  // granted uuid or the refusal reason
  } cases[] = {
      {"fit success", {{}, {}}, false, false, true, "dev-1"},
      {"fit fail: user assign use uuid mismatch",
       {{1, 0, 0}, {}},
       true,
       false,
       true,
       "CardUuidMismatch"},
      {"fit fail: user assign no use uuid match",
       {{}, {1, 0, 0}},
       false,
       true,
       true,
       "CardUuidMismatch"},
      {"fit fail: card overused",
       {{1, 0, 0}, {1, 0, 0}},
       false,
       false,
       true,
       "CardTimeSlicingExhausted"},
      {"fit fail: card not healthy", {{}, {}}, false, false, false, "CardNotHealth"},
  };
  for (const Backend& b : kBackends) {
    const Vendor& v = ByWord(b.word);
    for (const Case& c : cases) {
      SCOPED_TRACE(StrCat(b.word, ": ", c.name));
      std::vector<core::DeviceInfo> devs(2);
      for (int i = 0; i < 2; ++i) {
        devs[i].uuid = StrCat("dev-", i);
        devs[i].index = i;
        devs[i].count = 1;
        devs[i].devmem_mib = 0;
        devs[i].type = devs[i].vendor = b.word;
        devs[i].health = c.healthy;
      }
      std::map<std::string, std::string> ann;
      if (c.use_dev0) ann[b.use_uuid] = "dev-0";
      if (c.nouse_dev0) ann[b.nouse_uuid] = "dev-0";
      auto sel = v.ParseSelectors(ann);
      ASSERT_TRUE(sel.ok());
      auto req = v.ParseRequest({{"limits", {{b.resource, 1}}}}, {});
      ASSERT_TRUE(req.ok() && *req);
      const FitResult fit = v.Fit(**req, devs, c.usage, *sel, NodeView{});
      if (std::string(c.want).rfind("dev-", 0) == 0) {
        ASSERT_EQ(fit.devices.size(), 1u) << fit.Summary(2);
        EXPECT_EQ(fit.devices[0].uuid, c.want);
        EXPECT_EQ(fit.devices[0].usedmem_mib, 0);
        EXPECT_EQ(fit.devices[0].usedcores, 0);
        continue;
      }
      EXPECT_FALSE(fit.ok());
      bool found = false;
      for (const auto& r : fit.refusals)
        found = found || scheduler::ReasonName(r.reason) == std::string(c.want);
      EXPECT_TRUE(found) << fit.Summary(2);
    }
  }
}

// One device of a backend: its slots and the tasks of other pods on it.
struct Dev {
  const char* uuid;
  int count;
  int used;
};

// The explained decision for a pod asking `nums` devices of `b` with `annotations`, on one node of
// `devs` (registered through the vendor's own codec; `used` tasks of other pods on each).
StatusOr<scheduler::Decision> ScheduleOn(const VendorSet& set, const Backend& b,
                                         const std::vector<Dev>& devs, int nums,
                                         const nlohmann::json& annotations) {
  std::vector<core::DeviceInfo> infos;
  std::vector<core::PodAllocation> busy;
  for (size_t i = 0; i < devs.size(); ++i) {
    core::DeviceInfo d;
    d.uuid = devs[i].uuid;
    d.index = static_cast<int>(i);
    d.count = devs[i].count;
    d.type = d.vendor = b.word;
    infos.push_back(d);
    for (int k = 0; k < devs[i].used; ++k)
      busy.push_back({"", {{{devs[i].uuid, b.word, 0, 0, static_cast<int>(i)}}}});
  }
  NodeView view;
  view.name = "node";
  HAMI_RETURN_IF_ERROR(set.ByCommonWord(b.word)->EncodeNode(infos, &view));
  return testing::ScheduleOnOneNode(set, view, busy,
                                    testing::PodJson({{{b.resource, nums}}}, annotations));
}

std::unique_ptr<VendorSet> VastaiAndBiren() {
  auto set = VendorSet::Load("vastai: {}\nbiren: {}\n");
  EXPECT_TRUE(set.ok()) << set.status();
  return set.ok() ? std::move(*set) : nullptr;
}

// TestDevices_Fit's mutex rows (upstream passes the policy to each backend's Fit; here it is the
// scheduler's `hami.io/gpu-scheduler-policy: mutex`, which covers every vendor's devices), plus the
// same nodes without mutex so the rows show what mutex changes.
TEST(VastaiBirenUpstream, TestDevices_FitMutex) {
  auto set = VastaiAndBiren();
  ASSERT_NE(set, nullptr);
  const nlohmann::json mutex = {{"hami.io/gpu-scheduler-policy", "mutex"}};
  const nlohmann::json none = nlohmann::json::object();
  struct Case {
    const char* name;
    std::vector<Dev> devs;
    nlohmann::json annotations;
    const char* want;  // granted uuid, or the reason of the node's failure
  } cases[] = {
      {"mutex policy rejects used device",
       {{"dev-0", 2, 1}},
       mutex,
       "1/1 ExclusiveDeviceAllocateConflict"},
      {"without mutex the used device is shared", {{"dev-0", 2, 1}}, none, "dev-0"},
      {"mutex takes the idle device", {{"dev-0", 2, 1}, {"dev-1", 2, 0}}, mutex, "dev-1"},
  };
  for (const Backend& b : kBackends) {
    for (const Case& c : cases) {
      SCOPED_TRACE(StrCat(b.word, ": ", c.name));
      auto d = ScheduleOn(*set, b, c.devs, 1, c.annotations);
      ASSERT_TRUE(d.ok()) << d.status();
      if (std::string(c.want).rfind("dev-", 0) == 0) {
        ASSERT_EQ(d->node, "node");
        ASSERT_EQ(d->allocation.containers.size(), 1u);
        ASSERT_EQ(d->allocation.containers[0].size(), 1u);
        EXPECT_EQ(d->allocation.containers[0][0].uuid, c.want);
        continue;
      }
      EXPECT_EQ(d->node, "");
      ASSERT_EQ(d->failures.size(), 1u);
      EXPECT_NE(d->failures[0].reason.find(c.want), std::string::npos) << d->failures[0].reason;
    }
  }
}

}  // namespace
}  // namespace hami::vendors
