// The reference KEP-5075 first-fit allocator (scheduler/dra_allocator.h).
#include "scheduler/dra_allocator.h"

#include <gtest/gtest.h>

#include "scheduler/testing/dra_objects.h"

namespace hami::scheduler::dra {
namespace {

using nlohmann::json;

constexpr char kDriver[] = "hami-core-gpu.project-hami.io";
constexpr int64_t kGi = int64_t{1} << 30;

// A shared GPU as the hami-cpp driver publishes it: 16 GiB, 100 cores, whole-device defaults.
json Gpu(const std::string& name, const std::string& product = "A100") {
  return testing::DraGpu(name, product);
}

json Slice(const std::string& node, json devices, int64_t generation = 1, int64_t count = 1,
           const std::string& suffix = "") {
  return {{"metadata", {{"name", node + "-gpu" + suffix}}},
          {"spec",
           {{"driver", kDriver},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", generation}, {"resourceSliceCount", count}}},
            {"devices", std::move(devices)}}}};
}

json Class() {
  return {{"metadata", {{"name", kDriver}}},
          {"spec",
           {{"selectors",
             {{{"cel",
                {{"expression", std::string("device.driver == '") + kDriver +
                                    "' && device.attributes['" + kDriver +
                                    "'].type == 'hami-gpu'"}}}}}}}}};
}

// A claim of one request per entry: {memory, cores, count} ("" = not asked).
json Claim(const std::vector<std::tuple<std::string, std::string, int>>& requests,
           const std::string& selector = "") {
  json reqs = json::array();
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& [mem, cores, count] = requests[i];
    json e = {{"deviceClassName", kDriver}, {"count", count}};
    if (!mem.empty()) e["capacity"]["requests"]["memory"] = mem;
    if (!cores.empty()) e["capacity"]["requests"]["cores"] = cores;
    if (!selector.empty()) e["selectors"] = {{{"cel", {{"expression", selector}}}}};
    reqs.push_back({{"name", "r" + std::to_string(i)}, {"exactly", e}});
  }
  return {{"metadata", {{"name", "c"}, {"namespace", "default"}}},
          {"spec", {{"devices", {{"requests", reqs}}}}}};
}

// "device:memory:cores" per result, shared; "device" for an exclusive one.
std::vector<std::string> Describe(const json& allocation) {
  std::vector<std::string> out;
  for (const auto& r : allocation["devices"]["results"]) {
    std::string s = r["device"].get<std::string>();
    if (r.contains("consumedCapacity"))
      s += ":" + r["consumedCapacity"]["memory"].get<std::string>() + ":" +
           r["consumedCapacity"]["cores"].get<std::string>();
    out.push_back(s);
  }
  return out;
}

std::string Mem(int64_t gib) {
  return std::to_string(gib * kGi);
}

TEST(DraAllocatorTest, FirstFitWithConsumableCapacity) {
  struct Case {
    std::string name;
    std::vector<json> slices;
    std::vector<json> allocated;  // claims with status.allocation
    json claim;
    std::string selector_note;
    std::vector<std::string> want;  // empty = does not fit
  };
  auto allocated_on = [](const std::string& device, int64_t gib, int cores) {
    json c = Claim({{"", "", 1}});
    c["status"]["allocation"]["devices"]["results"] = {
        {{"request", "r0"},
         {"driver", kDriver},
         {"pool", "node-1"},
         {"device", device},
         {"shareID", "11111111-2222-4333-8444-555555555555"},
         {"consumedCapacity",
          {{"memory", std::to_string(gib * kGi)}, {"cores", std::to_string(cores)}}}}};
    return c;
  };
  const json two = json::array({Gpu("gpu-0"), Gpu("gpu-1")});
  const std::vector<Case> cases = {
      {"4Gi/30 on an empty node: first GPU",
       {Slice("node-1", two)},
       {},
       Claim({{"4Gi", "30", 1}}),
       "",
       {"gpu-0:" + Mem(4) + ":30"}},
      {"first fit, no binpack: gpu-0 still fits",
       {Slice("node-1", two)},
       {allocated_on("gpu-1", 8, 50)},
       Claim({{"4Gi", "30", 1}}),
       "",
       {"gpu-0:" + Mem(4) + ":30"}},
      {"gpu-0 full on memory: the next one",
       {Slice("node-1", two)},
       {allocated_on("gpu-0", 14, 10)},
       Claim({{"4Gi", "30", 1}}),
       "",
       {"gpu-1:" + Mem(4) + ":30"}},
      {"gpu-0 full on cores: the next one",
       {Slice("node-1", two)},
       {allocated_on("gpu-0", 1, 80)},
       Claim({{"4Gi", "30", 1}}),
       "",
       {"gpu-1:" + Mem(4) + ":30"}},
      {"no capacity named: the whole device (defaults)",
       {Slice("node-1", two)},
       {},
       Claim({{"", "", 1}}),
       "",
       {"gpu-0:" + Mem(16) + ":100"}},
      {"memory only: cores default to the whole card",
       {Slice("node-1", two)},
       {},
       Claim({{"4Gi", "", 1}}),
       "",
       {"gpu-0:" + Mem(4) + ":100"}},
      {"rounded up to the 1Mi step",
       {Slice("node-1", two)},
       {},
       Claim({{"1500Ki", "1", 1}}),
       "",
       {"gpu-0:" + std::to_string(2 << 20) + ":1"}},
      {"above the device: nowhere", {Slice("node-1", two)}, {}, Claim({{"17Gi", "1", 1}}), "", {}},
      {"cores above the policy max",
       {Slice("node-1", two)},
       {},
       Claim({{"1Gi", "101", 1}}),
       "",
       {}},
      {"count 2: distinct devices",
       {Slice("node-1", two)},
       {},
       Claim({{"4Gi", "30", 2}}),
       "",
       {"gpu-0:" + Mem(4) + ":30", "gpu-1:" + Mem(4) + ":30"}},
      {"two requests of one claim share a device",
       {Slice("node-1", two)},
       {},
       Claim({{"4Gi", "30", 1}, {"4Gi", "30", 1}}),
       "",
       {"gpu-0:" + Mem(4) + ":30", "gpu-0:" + Mem(4) + ":30"}},
      {"two requests summed against the device",
       {Slice("node-1", two)},
       {},
       Claim({{"10Gi", "30", 1}, {"10Gi", "30", 1}}),
       "",
       {"gpu-0:" + Mem(10) + ":30", "gpu-1:" + Mem(10) + ":30"}},
      {"count 3 on two GPUs", {Slice("node-1", two)}, {}, Claim({{"1Gi", "1", 3}}), "", {}},
      {"four 4Gi claims fill one GPU: the fifth goes on",
       {Slice("node-1", two)},
       {allocated_on("gpu-0", 4, 30), allocated_on("gpu-0", 4, 30), allocated_on("gpu-0", 4, 30),
        allocated_on("gpu-0", 4, 10)},
       Claim({{"4Gi", "30", 1}}),
       "",
       {"gpu-1:" + Mem(4) + ":30"}},
      {"selector on productName",
       {Slice("node-1", json::array({Gpu("gpu-0", "T4"), Gpu("gpu-1", "A100")}))},
       {},
       Claim({{"4Gi", "30", 1}},
             "device.attributes['" + std::string(kDriver) + "'].productName in ['A100', 'H100']"),
       "",
       {"gpu-1:" + Mem(4) + ":30"}},
      {"negated selector",
       {Slice("node-1", json::array({Gpu("gpu-0", "T4"), Gpu("gpu-1", "A100")}))},
       {},
       Claim({{"4Gi", "30", 1}},
             "!(device.attributes['" + std::string(kDriver) + "'].productName in ['T4'])"),
       "",
       {"gpu-1:" + Mem(4) + ":30"}},
      {"exclusive device: capacity filters, nothing consumed",
       {Slice("node-1", json::array({{{"name", "gpu-0"},
                                      {"attributes", {{"type", {{"string", "hami-gpu"}}}}},
                                      {"capacity", {{"memory", {{"value", "16Gi"}}}}}}}))},
       {},
       Claim({{"4Gi", "", 1}}),
       "",
       {"gpu-0"}},
      {"higher generation wins",
       {Slice("node-1", json::array({Gpu("old-0")}), 1, 1, "-a"),
        Slice("node-1", json::array({Gpu("new-0")}), 2, 1, "-b")},
       {},
       Claim({{"1Gi", "1", 1}}),
       "",
       {"new-0:" + Mem(1) + ":1"}},
      {"incomplete pool is not used",
       {Slice("node-1", json::array({Gpu("gpu-0")}), 1, 2)},
       {},
       Claim({{"1Gi", "1", 1}}),
       "",
       {}},
      {"another node's pool is not used",
       {Slice("node-2", two)},
       {},
       Claim({{"1Gi", "1", 1}}),
       "",
       {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Rng rng(1);
    auto a = AllocateClaimJson(c.slices, {Class()}, c.allocated, c.claim, "node-1", rng);
    if (c.want.empty()) {
      EXPECT_TRUE(absl::IsNotFound(a.status())) << a.status();
      continue;
    }
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(Describe(*a), c.want) << a->dump();
    for (const auto& r : (*a)["devices"]["results"])
      EXPECT_EQ(r.contains("shareID"), r.contains("consumedCapacity"));
    EXPECT_EQ((*a)["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0],
              "node-1");
  }
}

TEST(DraAllocatorTest, ConsumptionByPolicy) {
  struct Case {
    std::string name;
    RequestPolicy policy;
    std::optional<int64_t> asked;  // nullopt = not named
    std::optional<int64_t> want;   // nullopt = does not fit
  };
  RequestPolicy values;
  values.default_value = 25;
  values.valid_values = {25, 50, 100};
  RequestPolicy range;
  range.default_value = 100;
  range.valid_range = RequestPolicy::Range{10, 90, 20};
  const std::vector<Case> cases = {
      {"values: rounded up", values, 30, 50},
      {"values: exact", values, 50, 50},
      {"values: above the largest", values, 101, std::nullopt},
      {"values: default when not named", values, std::nullopt, 25},
      {"range: below min to min", range, 1, 10},
      {"range: up to the step", range, 11, 30},
      {"range: on a step", range, 50, 50},
      {"range: above max", range, 91, std::nullopt},
      {"range: default", range, std::nullopt, 100},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Device d;
    d.allow_multiple_allocations = true;
    d.capacity["cores"] = {100, c.policy};
    DeviceRequest r;
    if (c.asked) r.capacity["cores"] = *c.asked;
    auto got = Consumption(d, r);
    ASSERT_EQ(got.has_value(), c.want.has_value());
    if (got) {
      EXPECT_EQ(got->at("cores"), *c.want);
    }
  }
  // No policy: a named amount as asked, an unnamed capacity whole.
  Device plain;
  plain.allow_multiple_allocations = true;
  plain.capacity["memory"] = {16, std::nullopt};
  plain.capacity["cores"] = {100, std::nullopt};
  DeviceRequest r;
  r.capacity["memory"] = 3;
  EXPECT_EQ(*Consumption(plain, r),
            (std::map<std::string, int64_t>{{"cores", 100}, {"memory", 3}}));
}

TEST(DraAllocatorTest, SelectorsOutsideTheSubsetAreRefused) {
  struct Case {
    std::string cel;
    bool ok;
  };
  const std::vector<Case> cases = {
      {"device.driver == 'x.io'", true},
      {"device.attributes['x.io'].index == 3 && device.attributes['x.io'].ok == true", true},
      {"device.attributes[\"x.io\"].type != \"mig\"", true},
      {"device.capacity['x.io'].memory.compareTo(quantity('4Gi')) >= 0", true},
      {"device.capacity[\"x.io\"].memory.compareTo(quantity(\"16Gi\")) == 0", true},
      {"device.capacity['x.io'].memory.compareTo(quantity('1.5')) == 0", false},
      {"device.capacity['x.io'].memory.compareTo(quantity('4Gi')) == 1", false},
      {"device.capacity['x.io'].memory.compareTo(4) == 0", false},
      {"device.attributes['x.io'].type.startsWith('h')", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.cel);
    EXPECT_EQ(ParseSelector(c.cel).ok(), c.ok);
  }
}

// device.capacity[...].compareTo(quantity(...)): each operator on the published value (16 GiB),
// the capacity found by its bare name in the driver's domain or by its qualified name, and a
// device without it never matches.
TEST(DraAllocatorTest, CapacityComparisons) {
  Device gpu;
  gpu.capacity["memory"].value = 16 * kGi;
  gpu.capacity["other.io/slots"].value = 4;
  struct Case {
    std::string cel;
    bool match;
  };
  const std::string cap = std::string("device.capacity['") + kDriver + "'].memory";
  const std::vector<Case> cases = {
      {cap + ".compareTo(quantity('16Gi')) == 0", true},
      {cap + ".compareTo(quantity('17179869184')) == 0", true},
      {cap + ".compareTo(quantity('40Gi')) == 0", false},
      {cap + ".compareTo(quantity('40Gi')) != 0", true},
      {cap + ".compareTo(quantity('16Gi')) < 0", false},
      {cap + ".compareTo(quantity('17Gi')) < 0", true},
      {cap + ".compareTo(quantity('16Gi')) <= 0", true},
      {cap + ".compareTo(quantity('15Gi')) > 0", true},
      {cap + ".compareTo(quantity('16Gi')) >= 0", true},
      {cap + ".compareTo(quantity('16Gi')) > 0", false},
      {"device.capacity['other.io'].slots.compareTo(quantity('4')) == 0", true},
      {"device.capacity['other.io'].cores.compareTo(quantity('0')) >= 0", false},
      {"!(" + cap + ".compareTo(quantity('16Gi')) == 0)", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.cel);
    auto sel = ParseSelector(c.cel);
    ASSERT_TRUE(sel.ok()) << sel.status();
    EXPECT_EQ((*sel)(kDriver, gpu), c.match);
  }
}

// firstAvailable (the prioritized list), as the webhook writes a gpumem-percentage: the first
// subrequest that fits is taken, results name "<request>/<subrequest>", a later request that
// cannot be met sends the search back to the next subrequest, and nothing fits = NotFound.
TEST(DraAllocatorTest, FirstAvailableTakesTheFirstSubrequestThatFits) {
  // n1: a 16 GiB GPU and a 40 GiB GPU.
  json big = Gpu("gpu-1");
  big["capacity"]["memory"]["value"] = "40Gi";
  big["capacity"]["memory"]["requestPolicy"]["default"] = "40Gi";
  const std::vector<json> slices = {Slice("n1", {Gpu("gpu-0"), big})};
  // The selectors of the cards of one memory size, as the webhook writes them.
  auto of_size = [](const std::string& size) {
    return json{{{"cel",
                  {{"expression", std::string("device.capacity['") + kDriver +
                                      "'].memory.compareTo(quantity('" + size + "')) == 0"}}}}};
  };
  auto sub = [&](const std::string& name, const std::string& size, const std::string& share,
                 int count = 1) {
    return json{{"name", name},
                {"deviceClassName", kDriver},
                {"count", count},
                {"selectors", of_size(size)},
                {"capacity", {{"requests", {{"memory", share}, {"cores", "50"}}}}}};
  };
  auto claim = [](std::vector<json> requests) {
    return json{{"metadata", {{"name", "c"}, {"namespace", "default"}}},
                {"spec", {{"devices", {{"requests", std::move(requests)}}}}}};
  };
  const json half = {
      {"name", "gpu"},
      {"firstAvailable", {sub("mib16384", "16Gi", "8Gi"), sub("mib40960", "40Gi", "20Gi")}}};
  struct Case {
    std::string name;
    json claim;
    std::vector<json> allocated;    // claims allocated before, on n1
    std::vector<std::string> want;  // "request@device:memory:cores"; empty = does not fit
  };
  Rng rng(1);
  auto allocated = [&](const json& c) {
    json a = c;
    auto got = AllocateClaimJson(slices, {Class()}, {}, c, "n1", rng);
    EXPECT_TRUE(got.ok()) << got.status();
    a["status"]["allocation"] = *got;
    return a;
  };
  const json whole_small =
      claim({{{"name", "w"},
              {"exactly",
               {{"deviceClassName", kDriver}, {"count", 1}, {"selectors", of_size("16Gi")}}}}});
  const std::vector<Case> cases = {
      {"the smaller card while it has room", claim({half}), {}, {"gpu/mib16384@gpu-0:8Gi:50"}},
      {"the next choice once the small card is taken whole",
       claim({half}),
       {allocated(whole_small)},
       {"gpu/mib40960@gpu-1:20Gi:50"}},
      {"count 2: one card of each size, so neither choice can be met: does not fit",
       claim({{{"name", "gpu"},
               {"firstAvailable",
                {sub("mib16384", "16Gi", "8Gi", 2), sub("mib40960", "40Gi", "20Gi", 2)}}}}),
       {},
       {}},
      {"backtracking: the first request's first choice would leave the second request nothing",
       claim({half,
              {{"name", "small"},
               {"exactly",
                {{"deviceClassName", kDriver},
                 {"count", 1},
                 {"selectors", of_size("16Gi")},
                 {"capacity", {{"requests", {{"memory", "10Gi"}, {"cores", "10"}}}}}}}}}),
       {},
       {"gpu/mib40960@gpu-1:20Gi:50", "small@gpu-0:10Gi:10"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto got = AllocateClaimJson(slices, {Class()}, c.allocated, c.claim, "n1", rng);
    if (c.want.empty()) {
      ASSERT_FALSE(got.ok());
      EXPECT_TRUE(absl::IsNotFound(got.status())) << got.status();
      continue;
    }
    ASSERT_TRUE(got.ok()) << got.status();
    std::vector<std::string> desc;
    for (const auto& r : (*got)["devices"]["results"]) {
      const int64_t mem = std::stoll(r["consumedCapacity"]["memory"].get<std::string>());
      desc.push_back(r["request"].get<std::string>() + "@" + r["device"].get<std::string>() + ":" +
                     std::to_string(mem / kGi) +
                     "Gi:" + r["consumedCapacity"]["cores"].get<std::string>());
    }
    EXPECT_EQ(desc, c.want);
  }
  // A request with neither form is refused as the API server would.
  auto neither = RequestsFromClaim(claim({{{"name", "x"}}}));
  EXPECT_TRUE(absl::IsInvalidArgument(neither.status())) << neither.status();
}

// Claims come from any user and slices from any driver: a field of the wrong type is an error,
// never an exception (the first one was found by scheduler_dra_claim_fuzz: a count that is an
// object).
TEST(DraAllocatorTest, MistypedObjectsAreErrors) {
  auto request = [](json exactly) {
    return json{{"spec", {{"devices", {{"requests", {{{"name", "r"}, {"exactly", exactly}}}}}}}}};
  };
  const std::vector<std::pair<std::string, json>> claims = {
      {"count an object", request({{"deviceClassName", kDriver}, {"count", {{"a", 1}}}})},
      {"count a string", request({{"deviceClassName", kDriver}, {"count", "2"}})},
      {"count 0", request({{"deviceClassName", kDriver}, {"count", 0}})},
      {"exactly a string", request("gpu")},
      {"capacity.requests a list",
       request({{"deviceClassName", kDriver}, {"capacity", {{"requests", {"4Gi"}}}}})},
      {"firstAvailable entry a number",
       json{{"spec", {{"devices", {{"requests", {{{"name", "r"}, {"firstAvailable", {1}}}}}}}}}}},
  };
  for (const auto& [name, claim] : claims) {
    SCOPED_TRACE(name);
    auto got = RequestsFromClaim(claim);
    EXPECT_TRUE(absl::IsInvalidArgument(got.status())) << got.status();
  }
  json slice = Slice("n1", {Gpu("gpu-0")});
  std::vector<std::pair<std::string, json>> slices;
  json s1 = slice;
  s1["spec"]["pool"]["generation"] = "1";
  slices.emplace_back("generation a string", s1);
  json s2 = slice;
  s2["spec"]["devices"][0]["allowMultipleAllocations"] = "yes";
  slices.emplace_back("allowMultipleAllocations a string", s2);
  json s3 = slice;
  s3["spec"]["devices"] = {{"a", 1}};
  slices.emplace_back("devices an object", s3);
  json s4 = slice;
  s4["spec"]["allNodes"] = 1;
  slices.emplace_back("allNodes a number", s4);
  for (const auto& [name, s] : slices) {
    SCOPED_TRACE(name);
    auto got = PoolsFromSlices({s});
    EXPECT_TRUE(absl::IsInvalidArgument(got.status())) << got.status();
  }
  json no_metadata = slice;
  no_metadata.erase("metadata");
  EXPECT_TRUE(PoolsFromSlices({no_metadata, slice}).ok());
}

}  // namespace
}  // namespace hami::scheduler::dra
