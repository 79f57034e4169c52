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

// One device of `word` as its registration carries it (`card`: the AIC of a die, "" for a card).
struct Dev {
  const char* uuid;
  int count;
  int used;  // tasks of other pods on it
  const char* card = "";
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
    d.card = devs[i].card;
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
    bool vastai_only;  // die mode is Vastai's
    const char* want;  // granted uuid, or the reason of the node's failure
  } cases[] = {
      {"mutex policy rejects used device",
       {{"dev-0", 2, 1}},
       mutex,
       false,
       "1/1 ExclusiveDeviceAllocateConflict"},
      {"without mutex the used device is shared", {{"dev-0", 2, 1}}, none, false, "dev-0"},
      {"mutex takes the idle device", {{"dev-0", 2, 1}, {"dev-1", 2, 0}}, mutex, false, "dev-1"},
      {"mutex die mode rejects idle die on occupied card, picks die on free card",
       {{"dev-0", 2, 1, "1"}, {"dev-1", 1, 0, "1"}, {"dev-2", 1, 0, "2"}},
       mutex,
       true,
       "dev-2"},
      {"mutex die mode rejects all idle dies on an occupied card",
       {{"dev-0", 2, 1, "1"}, {"dev-1", 1, 0, "1"}},
       mutex,
       true,
       "2/2 ExclusiveDeviceAllocateConflict"},
      {"without mutex an idle die of a used card is taken",
       {{"dev-0", 1, 1, "1"}, {"dev-1", 1, 0, "1"}},
       none,
       true,
       "dev-1"},
  };
  for (const Backend& b : kBackends) {
    for (const Case& c : cases) {
      if (c.vastai_only && std::string(b.word) != "Vastai") continue;
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

// Upstream's die registration (customInfo DeviceStrategy "die", AIC = the card), as the Vastai
// device plugin writes it: each die keeps its card; garbage is an error naming the annotation.
TEST(VastaiUpstream, Test_GetNodeDevicesDieMode) {
  const Vendor& v = ByWord("Vastai");
  struct Case {
    const char* name;
    const char* value;
    std::vector<std::string> cards;  // per device
    const char* error;               // substring; empty = ok
  } cases[] = {
      {"two dies of one card",
       R"([{"id":"d0","count":1,"type":"Vastai","health":true,"custominfo":{"DeviceStrategy":"die","AIC":"1"}},)"
       R"({"id":"d1","index":1,"count":1,"type":"Vastai","health":true,"customInfo":{"DeviceStrategy":"die","AIC":"1"}}])",
       {"1", "1"},
       ""},
      {"card strategy: no card",
       R"([{"id":"d0","custominfo":{"DeviceStrategy":"card","AIC":"1"}}])",
       {""},
       ""},
      {"no custominfo", R"([{"id":"d0"}])", {""}, ""},
      {"legacy CSV: no custominfo", "d0,1,0,100,Vastai,0,true:", {""}, ""},
      {"null custominfo", R"([{"id":"d0","custominfo":null}])", {""}, ""},
      {"custominfo not an object",
       R"([{"id":"d0","custominfo":"die"}])",
       {},
       "hami.io/node-va-register: node devices[0] (d0): custominfo: expected a JSON object"},
      {"strategy not a string",
       R"([{"id":"d0","custominfo":{"DeviceStrategy":1}}])",
       {},
       "custominfo.DeviceStrategy: expected a string"},
      {"a die without its card",
       R"([{"id":"d0","custominfo":{"DeviceStrategy":"die"}}])",
       {},
       "custominfo.AIC: a die needs the id of its card"},
      {"a die with a numeric card",
       R"([{"id":"d0","custominfo":{"DeviceStrategy":"die","AIC":1}}])",
       {},
       "custominfo.AIC"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    NodeView n;
    n.annotations["hami.io/node-va-register"] = c.value;
    auto devs = v.DecodeNode(n);
    if (*c.error) {
      ASSERT_FALSE(devs.ok());
      EXPECT_NE(std::string(devs.status().message()).find(c.error), std::string::npos)
          << devs.status();
      continue;
    }
    ASSERT_TRUE(devs.ok()) << devs.status();
    ASSERT_EQ(devs->size(), c.cards.size());
    for (size_t i = 0; i < c.cards.size(); ++i) EXPECT_EQ((*devs)[i].card, c.cards[i]);
    // The registration round-trips, dies included.
    NodeView again;
    ASSERT_TRUE(v.EncodeNode(*devs, &again).ok());
    EXPECT_EQ(*v.DecodeNode(again), *devs);
  }
}

// TestComputeBestCombination, through Fit on dies (Fit collects the fitting dies from the last
// registered one, as upstream's does before it combines): the cards with the most free dies first.
TEST(VastaiUpstream, TestComputeBestCombination) {
  const Vendor& v = ByWord("Vastai");
  struct Case {
    const char* name;
    int nums;
    std::vector<const char*> cards;  // card of dev1, dev2, ... (indices 1..)
    std::vector<std::string> want;   // empty: refused
  } cases[] = {
      {"single AIC group, sufficient to meet demand", 2, {"1", "1", "1"}, {"dev3", "dev2"}},
      {"multiple AIC groups, select by count after sorting",
       3,
       {"1", "1", "1", "2", "2", "3"},
       {"dev3", "dev2", "dev1"}},
      // upstream's table lists the card-2 dies in ascending order and takes dev4; Fit walks from
      // the last die, so the same rule takes dev5
      {"multiple AIC groups, need to take across groups",
       4,
       {"1", "1", "1", "2", "2", "3"},
       {"dev3", "dev2", "dev1", "dev5"}},
      {"request number exceeds available devices", 5, {"1", "1", "2"}, {}},
      {"one die: the last registered", 1, {"1", "2", "2"}, {"dev3"}},
      {"equal cards: the one whose dies come last", 2, {"1", "1", "2", "2"}, {"dev4", "dev3"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<core::DeviceInfo> devs;
    for (size_t i = 0; i < c.cards.size(); ++i) {
      core::DeviceInfo d;
      d.uuid = StrCat("dev", i + 1);
      d.index = static_cast<int>(i + 1);
      d.count = 1;
      d.type = d.vendor = "Vastai";
      d.card = c.cards[i];
      devs.push_back(d);
    }
    core::DeviceRequest r;
    r.vendor = "Vastai";
    r.nums = c.nums;
    r.mem_percentage = 100;
    const std::vector<core::DeviceUsage> usage(devs.size());
    const FitResult fit = v.Fit(r, devs, usage, {}, NodeView{});
    std::vector<std::string> got;
    for (const auto& g : fit.devices) got.push_back(g.uuid);
    EXPECT_EQ(got, c.want) << fit.Summary(static_cast<int>(devs.size()));
  }
}

// ScoreNode in die mode: the share of a grant's dies on its most used card; 0 for whole cards.
TEST(VastaiUpstream, ScoreNodeDieMode) {
  const Vendor& v = ByWord("Vastai");
  std::vector<core::DeviceInfo> devs(4);
  const char* cards[] = {"1", "1", "2", ""};
  for (int i = 0; i < 4; ++i) {
    devs[i].uuid = StrCat("d", i);
    devs[i].vendor = "Vastai";
    devs[i].card = cards[i];
  }
  EXPECT_EQ(v.ScoreNode(devs, std::vector<int>{0, 1}, {}), 100);
  EXPECT_EQ(v.ScoreNode(devs, std::vector<int>{0, 2}, {}), 50);
  EXPECT_EQ(v.ScoreNode(devs, std::vector<int>{0, 1, 2}, {}), 66);
  EXPECT_EQ(v.ScoreNode(devs, std::vector<int>{0, 3}, {}), 0);
  EXPECT_EQ(v.ScoreNode(devs, std::vector<int>{}, {}), 0);
}

// Through the scheduler: a two-die request takes both dies of one card when a card has them free,
// not one die of each (first fit by index would).
TEST(VastaiUpstream, DiesOfOneCardTogether) {
  auto set = VastaiAndBiren();
  ASSERT_NE(set, nullptr);
  auto d = ScheduleOn(*set, kBackends[0],
                      {{"a0", 1, 0, "A"}, {"a1", 1, 1, "A"}, {"b0", 1, 0, "B"}, {"b1", 1, 0, "B"}},
                      2, nlohmann::json::object());
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->allocation.containers.size(), 1u);
  std::vector<std::string> got;
  for (const auto& g : d->allocation.containers[0]) got.push_back(g.uuid);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"b0", "b1"}));
}

}  // namespace
}  // namespace hami::vendors
