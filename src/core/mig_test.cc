// Dynamic MIG rules and codecs (core/mig.h). Cases named Upstream* come from upstream HAMi's
// pkg/device/nvidia/mig_{topology,capability,allocations}_test.go and must keep holding.
#include "core/mig.h"

#include <gtest/gtest.h>

#include "core/annotations.h"
#include "core/node_codec.h"

namespace hami::core {
namespace {

bool Contains(const Status& s, const char* part) {
  return std::string(s.message()).find(part) != std::string::npos;
}

// Upstream's A100-40GB test profiles (mig_capability_test.go: a100MigProfiles).
DeviceInfo A100() {
  DeviceInfo d;
  d.uuid = "GPU-a";
  d.count = 7;
  d.devmem_mib = 40960;
  d.devcore = 100;
  d.mode = kModeMig;
  d.mig_profiles = {
      {"1g.5gb", 5120, 14, 1, {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}},
      {"2g.10gb", 10240, 28, 2, {{0, 2}, {2, 2}, {4, 2}}},
      {"3g.20gb", 20480, 42, 3, {{0, 4}, {4, 4}}},
  };
  return d;
}

// With 4g.20gb added (mig_preference_test.go: a100MigProfilesWith4g).
DeviceInfo A100With4g() {
  DeviceInfo d = A100();
  d.mig_profiles.push_back({"4g.20gb", 20480, 52, 4, {{0, 4}}});
  return d;
}

uint32_t Mask(std::initializer_list<MigPlacement> ps) {
  uint32_t m = 0;
  for (const auto& p : ps) m |= MigSliceMask(p);
  return m;
}

std::string Choose(const DeviceInfo& d, int64_t mem, int cores, uint32_t occupied,
                   MigPlacement* at = nullptr) {
  const MigVerdict v = ChooseMigInstance(d, mem, cores, occupied, d.devmem_mib, d.devcore);
  if (!v.choice) return v.never ? "never" : "none";
  if (at) *at = v.choice->placement;
  return d.mig_profiles[v.choice->profile].name;
}

TEST(MigTest, SliceMask) {
  EXPECT_EQ(MigSliceMask({0, 1}), 0x1u);
  EXPECT_EQ(MigSliceMask({4, 4}), 0xf0u);
  EXPECT_EQ(MigSliceMask({0, 32}), 0xffffffffu);
  EXPECT_EQ(MigSliceMask({31, 1}), 0x80000000u);
  EXPECT_EQ(MigSliceMask({31, 2}), 0u);
  EXPECT_EQ(MigSliceMask({-1, 1}), 0u);
  EXPECT_EQ(MigSliceMask({0, 0}), 0u);
  EXPECT_EQ(MigSliceMask({40, 1}), 0u);
}

// mig_capability_test.go TestAddResourceUsageUsesReportedProfileAndPlacement: 10000 MiB on an
// empty A100 is the reported 2g.10gb at slot 0.
TEST(MigTest, UpstreamAddResourceUsageUsesReportedProfileAndPlacement) {
  MigPlacement at;
  EXPECT_EQ(Choose(A100(), 10000, 0, 0, &at), "2g.10gb");
  EXPECT_EQ(at, (MigPlacement{0, 2}));
}

// mig_capability_test.go TestCustomFilterUsesReportedPlacementCapacity.
TEST(MigTest, UpstreamCustomFilterUsesReportedPlacementCapacity) {
  const uint32_t three_2g = Mask({{0, 2}, {2, 2}, {4, 2}});
  EXPECT_EQ(Choose(A100(), 10000, 0, three_2g), "none");
  EXPECT_EQ(Choose(A100(), 5000, 0, three_2g), "1g.5gb");
}

// mig_topology_test.go TestSelectMigPlacementUsesBalancedPacking: 1g and 3g from the top, the
// others from slot 0.
TEST(MigTest, UpstreamSelectMigPlacementUsesBalancedPacking) {
  const DeviceInfo d = A100();
  struct Case {
    int64_t mem;
    const char* profile;
    int start;
  };
  uint32_t occupied = 0;
  for (const Case& c : {Case{20000, "3g.20gb", 4}, Case{10000, "2g.10gb", 0},
                        Case{5000, "1g.5gb", 3}, Case{5000, "1g.5gb", 2}}) {
    MigPlacement at;
    EXPECT_EQ(Choose(d, c.mem, 0, occupied, &at), c.profile) << c.mem;
    EXPECT_EQ(at.start, c.start) << c.profile;
    occupied |= MigSliceMask(at);
  }
}

// mig_topology_test.go TestCanPlaceMigProfilesA100 (one request at a time, as the scheduler places
// them): what is left after the active placements.
TEST(MigTest, UpstreamCanPlaceMigProfilesA100) {
  const DeviceInfo d = A100();
  EXPECT_EQ(Choose(d, 5000, 0, Mask({{0, 4}, {4, 4}})), "none");
  EXPECT_EQ(Choose(d, 10000, 0, Mask({{0, 2}, {2, 2}, {4, 2}})), "none");
  // 3g + 2g + 1g + 1g fill an empty card in that order.
  uint32_t occupied = 0;
  for (int64_t mem : {20000, 10000, 5000, 5000}) {
    MigPlacement at;
    ASSERT_NE(Choose(d, mem, 0, occupied, &at), "none") << mem;
    occupied |= MigSliceMask(at);
  }
}

// mig_preference_test.go TestSelectMigCandidateHonorsPreference (without a preference): equal
// memory goes to fewer slices; a blocked profile yields to the next.
TEST(MigTest, UpstreamSelectMigCandidateDefaultOrder) {
  const DeviceInfo d = A100With4g();
  EXPECT_EQ(Choose(d, 20000, 0, 0), "3g.20gb");
  MigPlacement at;
  EXPECT_EQ(Choose(d, 20000, 0, Mask({{4, 4}}), &at), "3g.20gb");
  EXPECT_EQ(at, (MigPlacement{0, 4}));
  // Both 3g spans taken: nothing of 20 GB is left (4g.20gb needs slots 0-3 as well).
  EXPECT_EQ(Choose(d, 20000, 0, Mask({{0, 1}, {4, 4}})), "none");
}

// mig_preference_test.go TestSelectMigCandidateHonorsPreference, every case: a preferred profile
// (by slice class) goes first, a preference cannot shrink the request below its memory, and a
// preferred profile without a free placement yields to the default order.
TEST(MigTest, UpstreamSelectMigCandidateHonorsPreference) {
  const DeviceInfo d = A100With4g();
  struct Case {
    const char* name;
    std::vector<std::string> preferred;
    uint32_t occupied;
    const char* want;
    MigPlacement at;
  };
  const Case cases[] = {
      {"default 20GB profile", {}, 0, "3g.20gb", {4, 4}},
      {"preferred slice class", {"4g"}, 0, "4g.20gb", {0, 4}},
      {"undersized preference", {"1g", "2g"}, 0, "3g.20gb", {4, 4}},
      {"blocked preference", {"4g"}, Mask({{0, 2}}), "3g.20gb", {4, 4}},
  };
  for (const Case& c : cases) {
    const MigVerdict v =
        ChooseMigInstance(d, 20000, 0, c.occupied, d.devmem_mib, d.devcore, c.preferred);
    ASSERT_TRUE(v.choice.has_value()) << c.name;
    EXPECT_EQ(d.mig_profiles[v.choice->profile].name, c.want) << c.name;
    EXPECT_EQ(v.choice->placement, c.at) << c.name;
  }
}

// mig_preference_test.go TestMigProfileCandidatesPutsPreferredFirst and
// TestFitHonorsMigProfilePreference: the profile each preference leads to when every profile has
// room (5 GB fits them all), and an exact name or a profile of another model.
TEST(MigTest, UpstreamPreferenceOrder) {
  const DeviceInfo d = A100With4g();
  struct Case {
    const char* name;
    std::vector<std::string> preferred;
    int64_t mem;
    const char* want;
  };
  const Case cases[] = {
      {"default is smallest first", {}, 5000, "1g.5gb"},
      {"slice class", {"4g"}, 5000, "4g.20gb"},
      {"exact names keep the listed order", {"3g.20gb", "1g.5gb"}, 5000, "3g.20gb"},
      {"entries outside the card's profiles are ignored", {"9g.99gb", "4g.40gb"}, 5000, "1g.5gb"},
      {"exact profile preference", {"4g.20gb"}, 20000, "4g.20gb"},
      {"another model's profile is ignored on this card", {"4g.40gb"}, 20000, "3g.20gb"},
  };
  for (const Case& c : cases) {
    const MigVerdict v = ChooseMigInstance(d, c.mem, 0, 0, d.devmem_mib, d.devcore, c.preferred);
    EXPECT_EQ(v.choice ? d.mig_profiles[v.choice->profile].name : "none", c.want) << c.name;
  }
}

// mig_preference_test.go TestParseMigProfilePreference and TestMigProfileSliceKey.
TEST(MigTest, UpstreamParseMigProfilePreference) {
  using V = std::vector<std::string>;
  EXPECT_EQ(ParseMigProfilePreference("4g.20gb"), V{"4g.20gb"});
  EXPECT_EQ(ParseMigProfilePreference(" 4g , 3g.20gb ,, 4g "), (V{"4g", "3g.20gb"}));
  EXPECT_EQ(ParseMigProfilePreference(""), V{});
  EXPECT_EQ(ParseMigProfilePreference(" , "), V{});
  struct Case {
    const char* profile;
    const char* entry;
    bool want;
  };
  for (const Case& c : {Case{"4g.20gb", "4g", true}, Case{"1g.10gb+me", "1g", true},
                        Case{"4g", "4g", true}, Case{".5gb", ".5gb", true}, Case{".5gb", "", false},
                        Case{"4g.20gb", "4g.20gb", true}, Case{"4g.20gb", "4", false},
                        Case{"14g.20gb", "4g", false}, Case{"4g.20gb", "4g.40gb", false}})
    EXPECT_EQ(MigProfileMatches(c.profile, c.entry), c.want) << c.profile << " / " << c.entry;
}

// Ours: the profile also covers the cores asked for; nothing covers the request = never.
TEST(MigTest, CoresAndNever) {
  const DeviceInfo d = A100With4g();
  struct Case {
    const char* name;
    int64_t mem;
    int cores;
    uint32_t occupied;
    int64_t free_mem;
    const char* want;
  };
  const Case cases[] = {
      {"cores pick a bigger profile", 5000, 30, 0, 40960, "3g.20gb"},
      {"cores past every profile", 5000, 60, 0, 40960, "never"},
      {"memory past every profile", 30000, 0, 0, 40960, "never"},
      {"free memory short of the profile", 5000, 0, 0, 4096, "none"},
      {"exactly the profile's memory", 5120, 14, 0, 40960, "1g.5gb"},
  };
  for (const Case& c : cases) {
    const MigVerdict v = ChooseMigInstance(d, c.mem, c.cores, c.occupied, c.free_mem, 100);
    const std::string got =
        v.choice ? d.mig_profiles[v.choice->profile].name : (v.never ? "never" : "none");
    EXPECT_EQ(got, c.want) << c.name;
  }
}

TEST(MigTest, RegistrationValidation) {
  struct Case {
    const char* name;
    const char* json;
    const char* error;  // nullptr = valid
  };
  const Case cases[] = {
      {"upstream example",
       R"([{"id":"GPU-a","devmem":40960,"devcore":100,"health":true,"mode":"mig","migProfiles":[{"name":"1g.10gb","memoryMB":9856,"core":15,"sliceCount":1,"placements":[{"start":0,"size":1},{"start":6,"size":1}]}]}])",
       nullptr},
      {"unknown mode", R"([{"id":"GPU-a","mode":"vgpu"}])", "is not hami-core, mig, mps or remote"},
      {"profiles off mig mode",
       R"([{"id":"GPU-a","mode":"hami-core","migProfiles":[{"name":"1g.10gb","memoryMB":1,"sliceCount":1,"placements":[{"start":0,"size":1}]}]}])",
       "not mig"},
      {"empty name",
       R"([{"id":"GPU-a","mode":"mig","migProfiles":[{"memoryMB":1,"sliceCount":1,"placements":[{"start":0,"size":1}]}]}])",
       "name is empty"},
      {"name twice",
       R"([{"id":"GPU-a","mode":"mig","migProfiles":[{"name":"a","memoryMB":1,"sliceCount":1,"placements":[{"start":0,"size":1}]},{"name":"a","memoryMB":1,"sliceCount":1,"placements":[{"start":0,"size":1}]}]}])",
       "appears twice"},
      {"no memory",
       R"([{"id":"GPU-a","mode":"mig","migProfiles":[{"name":"a","sliceCount":1,"placements":[{"start":0,"size":1}]}]}])",
       "memoryMB must be > 0"},
      {"no slices",
       R"([{"id":"GPU-a","mode":"mig","migProfiles":[{"name":"a","memoryMB":1,"placements":[{"start":0,"size":1}]}]}])",
       "sliceCount must be > 0"},
      {"no placements",
       R"([{"id":"GPU-a","mode":"mig","migProfiles":[{"name":"a","memoryMB":1,"sliceCount":1}]}])",
       "has no placements"},
      {"placement of size 0",
       R"([{"id":"GPU-a","mode":"mig","migProfiles":[{"name":"a","memoryMB":1,"sliceCount":1,"placements":[{"start":0}]}]}])",
       "must have size > 0"},
      {"placement past 32 slices",
       R"([{"id":"GPU-a","mode":"mig","migProfiles":[{"name":"a","memoryMB":1,"sliceCount":1,"placements":[{"start":31,"size":2}]}]}])",
       "end by slice 32"},
      {"placement twice",
       R"([{"id":"GPU-a","mode":"mig","migProfiles":[{"name":"a","memoryMB":1,"sliceCount":1,"placements":[{"start":1,"size":1},{"start":1,"size":1}]}]}])",
       "appears twice"},
      {"negative start",
       R"([{"id":"GPU-a","mode":"mig","migProfiles":[{"name":"a","memoryMB":1,"sliceCount":1,"placements":[{"start":-1,"size":1}]}]}])",
       "start"},
      {"placements not an array",
       R"([{"id":"GPU-a","mode":"mig","migProfiles":[{"name":"a","memoryMB":1,"sliceCount":1,"placements":{}}]}])",
       "placements: expected a JSON array"},
      {"mps without profiles", R"([{"id":"GPU-a","mode":"mps"}])", nullptr},
  };
  for (const Case& c : cases) {
    auto devs = DecodeNodeDevices(c.json);
    if (c.error == nullptr) {
      ASSERT_TRUE(devs.ok()) << c.name << ": " << devs.status();
      EXPECT_EQ(DecodeNodeDevices(EncodeNodeDevicesJson(*devs)).value(), *devs) << c.name;
    } else {
      ASSERT_FALSE(devs.ok()) << c.name;
      EXPECT_TRUE(Contains(devs.status(), c.error)) << c.name << ": " << devs.status();
    }
  }
}

// The annotation (mig_allocations.go DecodeMigAllocations and upstream's example).
TEST(MigTest, AllocationsCodec) {
  const char kExample[] =
      R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.10gb","placement":{"start":6,"size":1},"migUUID":"MIG-x","gpuInstanceID":5,"computeInstanceID":0}])";
  auto got = DecodeMigAllocations(kExample);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].placement, (MigPlacement{6, 1}));
  EXPECT_EQ((*got)[0].gpu_instance_id, 5u);
  EXPECT_EQ((*got)[0].compute_instance_id, 0u);
  EXPECT_EQ(EncodeMigAllocations(*got), kExample);
  const char kScheduled[] =
      R"([{"containerIndex":1,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"2g.10gb","placement":{"start":0,"size":2}}])";
  auto s = DecodeMigAllocations(kScheduled);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE((*s)[0].HasRuntime());
  EXPECT_EQ(EncodeMigAllocations(*s), kScheduled);
  EXPECT_TRUE(DecodeMigAllocations("").value().empty());

  struct Bad {
    const char* name;
    const char* text;
    const char* error;
  };
  const Bad bad[] = {
      {"not json", "[", "hami.io/vgpu-mig-allocations"},
      {"not an array", "{}", "expected a JSON array"},
      {"no profile",
       R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","placement":{"start":0,"size":1}}])",
       "incomplete"},
      {"no gpu", R"([{"profile":"1g.5gb","placement":{"start":0,"size":1}}])", "incomplete"},
      {"placement size 0", R"([{"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":0}}])",
       "incomplete"},
      {"negative index",
       R"([{"containerIndex":-1,"gpuUUID":"GPU-a","profile":"p","placement":{"start":0,"size":1}}])",
       "containerIndex"},
      {"fractional start",
       R"([{"gpuUUID":"GPU-a","profile":"p","placement":{"start":0.5,"size":1}}])", "start"},
      {"partial runtime",
       R"([{"gpuUUID":"GPU-a","profile":"p","placement":{"start":0,"size":1},"migUUID":"MIG-x"}])",
       "partial runtime identity"},
      {"instance id past uint32",
       R"([{"gpuUUID":"GPU-a","profile":"p","placement":{"start":0,"size":1},"migUUID":"MIG-x","gpuInstanceID":4294967296,"computeInstanceID":0}])",
       "gpuInstanceID"},
      {"twice",
       R"([{"gpuUUID":"GPU-a","profile":"p","placement":{"start":0,"size":1}},{"gpuUUID":"GPU-b","profile":"p","placement":{"start":1,"size":1}}])",
       "second entry"},
  };
  for (const Bad& b : bad) {
    auto r = DecodeMigAllocations(b.text);
    ASSERT_FALSE(r.ok()) << b.name;
    EXPECT_TRUE(Contains(r.status(), b.error)) << b.name << ": " << r.status();
  }
}

TEST(MigTest, AttachAndCheckGrants) {
  PodAllocation a;
  a.containers = {{}, {{"GPU-a", kNvidiaVendor, 10240, 28}, {"GPU-b", kNvidiaVendor, 100, 10}}};
  a.containers[1][0].mig_profile = "2g.10gb";
  a.containers[1][0].mig_placement = {0, 2};
  const auto entries = MigAllocationsOf(a);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].container_index, 1);
  EXPECT_EQ(entries[0].device_index, 0);

  PodAllocation plain = a;
  plain.containers[1][0].mig_profile.clear();
  plain.containers[1][0].mig_placement = {};
  PodAllocation back = plain;
  EXPECT_EQ(AttachMigAllocations(entries, &back), 1);
  EXPECT_EQ(back, a);
  // A stale entry (another GPU at that position, or a position the decision lacks) is left out.
  auto stale = entries;
  stale[0].gpu_uuid = "GPU-z";
  stale.push_back(entries[0]);
  stale.back().container_index = 5;
  back = plain;
  EXPECT_EQ(AttachMigAllocations(stale, &back), 0);
  EXPECT_EQ(back, plain);

  const DeviceInfo d = A100();
  ContainerDevice g{"GPU-a", kNvidiaVendor, 10240, 28};
  g.mig_profile = "2g.10gb";
  g.mig_placement = {2, 2};
  EXPECT_EQ(CheckMigGrant(d, g), "");
  ContainerDevice wrong = g;
  wrong.mig_placement = {1, 2};
  EXPECT_NE(CheckMigGrant(d, wrong).find("is not a placement"), std::string::npos);
  wrong = g;
  wrong.mig_profile = "7g.40gb";
  EXPECT_NE(CheckMigGrant(d, wrong).find("is not one device"), std::string::npos);
  wrong = g;
  wrong.usedmem_mib = 100;
  EXPECT_NE(CheckMigGrant(d, wrong).find("claims 100 MiB"), std::string::npos);
  DeviceInfo shared = d;
  shared.mode = kModeHamiCore;
  EXPECT_NE(CheckMigGrant(shared, g).find("not in mig mode"), std::string::npos);
  EXPECT_EQ(CheckMigGrant(shared, ContainerDevice{"GPU-a", kNvidiaVendor, 10, 10}), "");
}

}  // namespace
}  // namespace hami::core
