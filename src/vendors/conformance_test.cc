// The conformance suite every registered backend runs (parameterised over AllVendorsWithDefaults):
// feasibility independent of device order, grants never beyond capacity, every refusal parseable,
// declared score polarity respected, registration and decision annotations round-trip, webhook
// defaults do not change what the scheduler parses.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "common/rng.h"
#include "nlohmann/json.hpp"
#include "vendors/config.h"

namespace hami::vendors {
namespace {

const std::vector<std::unique_ptr<Vendor>>& All() {
  static const auto* all = new std::vector<std::unique_ptr<Vendor>>(AllVendorsWithDefaults());
  return *all;
}

// A node of 8 devices of the vendor, built through the vendor's own registration codec.
std::vector<core::DeviceInfo> Devices(const Vendor& v, NodeView* node) {
  std::vector<core::DeviceInfo> devs;
  for (int i = 0; i < 8; ++i) {
    core::DeviceInfo d;
    d.uuid = StrCat(v.common_word(), "-", i);
    d.index = i;
    d.count = 4;
    d.devmem_mib = 65536;
    d.devcore = 100;
    d.type = StrCat(v.common_word(), "-model");
    d.vendor = v.common_word();
    d.health = true;
    devs.push_back(d);
  }
  EXPECT_TRUE(v.EncodeNode(devs, node).ok());
  auto back = v.DecodeNode(*node);
  EXPECT_TRUE(back.ok()) << back.status();
  return back.ok() ? *back : std::vector<core::DeviceInfo>{};
}

// Container resources for a table of request shapes, in the vendor's own resource names.
std::vector<nlohmann::json> Requests(const Vendor& v) {
  const ResourceNames& n = v.resources();
  std::vector<nlohmann::json> out;
  for (int count : {1, 2, 3, 4, 8}) {
    out.push_back({{"limits", {{n.count, count}}}});
    if (!n.memory.empty()) {
      for (int mem : {1, 16, 96, 20000}) {
        nlohmann::json r = {{"limits", {{n.count, count}, {n.memory, mem}}}};
        out.push_back(r);
        if (!n.cores.empty()) {
          r["limits"][n.cores] = 8;
          out.push_back(r);
        }
      }
    }
  }
  return out;
}

class Conformance : public testing::TestWithParam<int> {
 protected:
  const Vendor& V() const { return *All()[GetParam()]; }
};

TEST_P(Conformance, RegistrationRoundTrips) {
  NodeView node;
  auto devs = Devices(V(), &node);
  ASSERT_EQ(devs.size(), 8u) << V().common_word();
  for (const auto& d : devs) EXPECT_EQ(d.vendor, V().common_word());
  NodeView again;
  ASSERT_TRUE(V().EncodeNode(devs, &again).ok());
  EXPECT_EQ(again.annotations, node.annotations);
  EXPECT_EQ(again.capacity, node.capacity);
  EXPECT_EQ(*V().DecodeNode(again), devs);
  // A node without this vendor has no devices, not an error.
  auto none = V().DecodeNode(NodeView{});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST_P(Conformance, FitIsOrderIndependentWithinCapacityAndExplained) {
  const Vendor& v = V();
  NodeView node;
  const auto devs = Devices(v, &node);
  ASSERT_FALSE(devs.empty());
  Rng rng(GetParam() + 1);
  int fits = 0, refusals = 0;
  for (const auto& res : Requests(v)) {
    auto req = v.ParseRequest(res, {});
    if (!req.ok() || !*req) continue;  // shapes the vendor rejects are covered by its own tests
    for (int trial = 0; trial < 6; ++trial) {
      std::vector<core::DeviceUsage> usage(devs.size());
      for (size_t i = 0; i < devs.size(); ++i) {
        const int used = static_cast<int>(rng.Uniform(devs[i].count + 1));
        usage[i].used = used;
        if (used > 0) {
          usage[i].usedmem_mib = static_cast<int64_t>(rng.Uniform(devs[i].devmem_mib + 1));
          usage[i].usedcores = static_cast<int>(rng.Uniform(devs[i].devcore + 1));
        }
      }
      const FitResult fit = v.Fit(**req, devs, usage, {}, node);
      // Same node, devices listed in another order.
      std::vector<int> perm(devs.size());
      for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int>(i);
      std::reverse(perm.begin(), perm.end());
      std::swap(perm[0], perm[3]);
      std::vector<core::DeviceInfo> pdevs;
      std::vector<core::DeviceUsage> pusage;
      for (int p : perm) {
        pdevs.push_back(devs[p]);
        pusage.push_back(usage[p]);
      }
      const FitResult pfit = v.Fit(**req, pdevs, pusage, {}, node);
      ASSERT_EQ(fit.ok(), pfit.ok()) << v.common_word() << " " << res.dump();
      std::set<std::string> a, b;
      for (const auto& d : fit.devices) a.insert(d.uuid);
      for (const auto& d : pfit.devices) b.insert(d.uuid);
      EXPECT_EQ(a, b) << v.common_word() << " " << res.dump();
      if (fit.ok()) {
        ++fits;
        EXPECT_EQ(static_cast<int>(fit.devices.size()), (*req)->nums);
        EXPECT_EQ(a.size(), fit.devices.size()) << "a device granted twice";
        for (const auto& g : fit.devices) {
          auto it = std::find_if(devs.begin(), devs.end(),
                                 [&](const auto& d) { return d.uuid == g.uuid; });
          ASSERT_NE(it, devs.end());
          const auto& u = usage[it - devs.begin()];
          EXPECT_EQ(g.vendor, v.common_word());
          EXPECT_LT(u.used, it->count) << g.uuid;
          EXPECT_LE(u.usedmem_mib + g.usedmem_mib, it->devmem_mib) << g.uuid << " " << res.dump();
          EXPECT_LE(u.usedcores + g.usedcores, it->devcore) << g.uuid << " " << res.dump();
          EXPECT_GE(g.usedmem_mib, (*req)->memreq_mib) << "grant below request";
        }
        std::vector<int> granted;
        for (const auto& g : fit.devices)
          for (size_t i = 0; i < devs.size(); ++i)
            if (devs[i].uuid == g.uuid) granted.push_back(static_cast<int>(i));
        const int score = v.ScoreNode(devs, granted, node);
        EXPECT_GE(score, 0);
        EXPECT_LE(score, 100);
        if (v.score_polarity() == ScorePolarity::kNeutral) {
          EXPECT_EQ(score, 0);
        }
      } else {
        ++refusals;
        ASSERT_FALSE(fit.refusals.empty()) << "a refusal without a reason: " << res.dump();
      }
      for (const auto& r : fit.refusals) {
        auto parsed = ParseRefusal(r.ToString());
        ASSERT_TRUE(parsed.ok()) << parsed.status();
        EXPECT_EQ(parsed->reason, r.reason);
        EXPECT_EQ(parsed->detail, r.detail);
      }
    }
  }
  EXPECT_GT(fits, 0) << v.common_word() << ": nothing ever fits";
  EXPECT_GT(refusals, 0) << v.common_word() << ": nothing is ever refused";
}

TEST_P(Conformance, EmptyNodeTakesOneDeviceRequest) {
  NodeView node;
  const auto devs = Devices(V(), &node);
  auto req = V().ParseRequest({{"limits", {{V().resources().count, 1}}}}, {});
  ASSERT_TRUE(req.ok() && *req) << V().common_word();
  std::vector<core::DeviceUsage> usage(devs.size());
  const FitResult fit = V().Fit(**req, devs, usage, {}, node);
  ASSERT_TRUE(fit.ok()) << fit.Summary(8);
  // Other vendors' devices are never taken.
  std::vector<core::DeviceInfo> foreign = devs;
  for (auto& d : foreign) d.vendor = "Other";
  const FitResult none = V().Fit(**req, foreign, usage, {}, node);
  EXPECT_FALSE(none.ok());
  EXPECT_EQ(none.refusals.front().reason, scheduler::Reason::kNodeInsufficientDevice);
}

TEST_P(Conformance, DecisionRoundTripsAndOnlyThisVendorsTypeIsWritten) {
  const Vendor& v = V();
  core::PodAllocation a;
  a.containers = {{}, {{StrCat(v.common_word(), "-0"), v.common_word(), 3000, 30, -1}}, {}};
  auto ann = v.EncodeDecision(a, 1700000000);
  ASSERT_TRUE(ann.ok()) << ann.status();
  ASSERT_TRUE(ann->count(v.keys().allocated)) << v.common_word();
  EXPECT_EQ(ann->at(v.keys().allocated),
            StrCat(";", v.common_word(), "-0,", v.common_word(), ",3000,30:;;"));
  if (!v.keys().to_allocate.empty()) {
    EXPECT_EQ(ann->at(v.keys().to_allocate), ann->at(v.keys().allocated));
  }
  auto back = v.DecodeDecision(*ann);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, a);
  core::PodAllocation wrong = a;
  wrong.containers[1][0].vendor = "SomeoneElse";
  EXPECT_FALSE(v.EncodeDecision(wrong, 0).ok());
}

TEST_P(Conformance, WebhookDefaultsDoNotChangeTheParsedRequest) {
  const Vendor& v = V();
  for (auto res : Requests(v)) {
    auto m = v.Mutate(res, {});
    ASSERT_TRUE(m.ok()) << m.status();
    auto before = v.ParseRequest(res, {});
    for (const auto& [k, val] : m->add_limits) res["limits"][k] = val;
    auto after = v.ParseRequest(res, {});
    ASSERT_EQ(before.ok(), after.ok());
    if (before.ok()) {
      EXPECT_EQ(*before, *after) << v.common_word() << " " << res.dump();
    }
    for (const auto& d : m->denials) EXPECT_FALSE(d.empty());
  }
  // A container without this vendor's resources is left alone.
  auto m = v.Mutate({{"limits", {{"cpu", "1"}}}}, {});
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->empty());
  auto none = v.ParseRequest({{"limits", {{"cpu", "1"}}}}, {});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST_P(Conformance, BadQuantitiesAreErrorsNamingTheResource) {
  const Vendor& v = V();
  auto r = v.ParseRequest({{"limits", {{v.resources().count, "1.5"}}}}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find(v.resources().count), std::string::npos)
      << r.status();
}

std::string Name(const testing::TestParamInfo<int>& info) {
  std::string n = All()[info.param]->common_word();
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(AllVendors, Conformance, testing::Range(0, static_cast<int>(All().size())),
                         Name);

}  // namespace
}  // namespace hami::vendors
