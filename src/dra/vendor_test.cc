#include "dra/vendor.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "dra/cdi.h"
#include "dra/driver.h"
#include "dra/slice.h"
#include "dra/testing/builders.h"

namespace hami::dra {
namespace {

using Json = nlohmann::json;

std::unique_ptr<DraVendor> Ascend() {
  VendorOptions o;
  o.vnpu_core_dir = "/host/vnpu";
  o.vnpu_shared_region_dir = "/host/shared";
  auto v = MakeDraVendor("ascend", o);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *std::move(v) : nullptr;
}

std::vector<DeviceCapacity> TwoNpus() {
  return {{"npu-0-0", "910B3-0", 0, 65536, 100}, {"npu-1-0", "910B3-1", 1, 65536, 100}};
}

deviceplugin::PluginConfig Paths() {
  deviceplugin::PluginConfig c;
  c.region_root = "/host/vnpu/containers";
  return c;
}

using testing::SpecEnv;

TEST(DraVendor, RegistryNamesTheVendors) {
  const struct {
    const char* name;
    const char* driver;  // "" = refused
    const char* type;
  } cases[] = {{"nvidia", "hami-core-gpu.project-hami.io", "hami-gpu"},
               {"ascend", "ascend.project-hami.io", "HAMivNPUCore"},
               {"hygon", "", ""},
               {"", "", ""}};
  for (const auto& c : cases) {
    auto v = MakeDraVendor(c.name);
    if (*c.driver == '\0') {
      ASSERT_FALSE(v.ok()) << c.name;
      EXPECT_NE(v.status().message().find("nvidia, ascend"), std::string::npos) << v.status();
      continue;
    }
    ASSERT_TRUE(v.ok()) << c.name << ": " << v.status();
    EXPECT_EQ((*v)->name(), c.name);
    EXPECT_EQ((*v)->default_driver(), c.driver);
    EXPECT_EQ((*v)->device_type(), c.type);
  }
}

// The same slice builder publishes NPUs with upstream ascend-dra-driver's names, type and
// attributes, and the capacities of every shared device (memory bytes, cores percent).
TEST(DraVendor, AscendSliceHasUpstreamNamesTypeAndCapacities) {
  auto ascend = Ascend();
  gpu::GpuInfo npu = gpu::GpuInfo{};
  npu.index = 3;
  npu.uuid = "910B3-3";
  npu.model = "Ascend910B3";
  npu.memory_mib = 65536;
  npu.numa_node = 1;
  SliceOptions o;
  o.driver = std::string(ascend->default_driver());
  o.node_name = "node-a";
  o.node_uid = "uid-a";
  o.vendor = ascend.get();
  auto s = BuildResourceSlice({npu}, {}, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)["metadata"]["name"], "node-a-ascend-project-hami-io");
  EXPECT_EQ((*s)["spec"]["driver"], "ascend.project-hami.io");
  const Json& d = (*s)["spec"]["devices"][0];
  EXPECT_EQ(d["name"], "npu-3-0");
  EXPECT_EQ(d["allowMultipleAllocations"], true);
  const Json want_attrs = {
      {"type", {{"string", "HAMivNPUCore"}}}, {"index", {{"int", 3}}},
      {"physicalID", {{"int", 3}}},           {"uuid", {{"string", "910B3-3"}}},
      {"model", {{"string", "Ascend910B3"}}}, {"productName", {{"string", "Ascend910B3"}}},
      {"brand", {{"string", "Huawei"}}},      {"resource.kubernetes.io/numaNode", {{"int", 1}}}};
  EXPECT_EQ(d["attributes"], want_attrs);
  EXPECT_EQ(d["capacity"]["memory"]["value"], std::to_string(int64_t{65536} * kMiB));
  EXPECT_EQ(d["capacity"]["cores"]["value"], "100");
  EXPECT_EQ(d["capacity"]["cores"]["requestPolicy"]["validRange"]["min"], "0");
  auto caps = DeviceCapacities({npu}, 1.0, ascend.get());
  ASSERT_TRUE(caps.ok());
  EXPECT_EQ((*caps)[0].name, "npu-3-0");
  EXPECT_EQ(DeviceName(npu), "gpu-3") << "no vendor: NVIDIA's name, as before";
}

TEST(DraVendor, AscendEditsArmTheVnpuCoreWithTheConsumedCapacity) {
  struct Case {
    const char* name;
    std::vector<Share> shares;
    std::map<std::string, std::string> want;  // the whole env; empty: refused
  };
  const std::map<std::string, std::string> one_npu0 = {
      {"ASCEND_VISIBLE_DEVICES", "0"},
      {"NPU_MEM_QUOTA", "4096"},
      {"NPU_PRIORITY", "30"},
      {"NPU_GLOBAL_SHM_PATH", "/hami-shared-region/0_global_registry"},
      {"NPU_LOCAL_SHM_PATH", "/hami-vnpu-shmem/vnpu_local_shmem"}};
  const Case cases[] = {
      {"one share", {{"npu", "npu-0-0", "s1", {4096, 30}}}, one_npu0},
      {"two requests on one NPU add up, never two quotas",
       {{"a", "npu-0-0", "s1", {3072, 20}}, {"b", "npu-0-0", "s2", {1024, 10}}},
       one_npu0},
      {"results in reverse order: the NPUs in index order",
       {{"a", "npu-1-0", "s1", {2048, 25}}, {"b", "npu-0-0", "s2", {2048, 25}}},
       {{"ASCEND_VISIBLE_DEVICES", "0,1"},
        {"NPU_MEM_QUOTA", "2048"},
        {"NPU_PRIORITY", "25"},
        {"NPU_GLOBAL_SHM_PATH", "/hami-shared-region/0_global_registry"},
        {"NPU_LOCAL_SHM_PATH", "/hami-vnpu-shmem/vnpu_local_shmem"}}},
      {"two NPUs consumed differently: one quota cannot hold both",
       {{"a", "npu-0-0", "s1", {4096, 30}}, {"b", "npu-1-0", "s2", {2048, 30}}},
       {}},
      {"no memory: the library would read it as no quota", {{"a", "npu-0-0", "s1", {0, 30}}}, {}},
  };
  auto ascend = Ascend();
  for (const auto& c : cases) {
    const ClaimAllocation claim{{"ns", "c1", "uid-1"}, c.shares};
    auto e = BuildClaimEdits(claim, TwoNpus(), "ascend.project-hami.io", Paths(), ascend.get());
    if (c.want.empty()) {
      ASSERT_FALSE(e.ok()) << c.name;
      EXPECT_TRUE(absl::IsFailedPrecondition(e.status())) << c.name << ": " << e.status();
      continue;
    }
    ASSERT_TRUE(e.ok()) << c.name << ": " << e.status();
    const Json spec = Json::parse(e->spec_json);
    EXPECT_EQ(spec["kind"], "k8s.ascend.project-hami.io/claim") << c.name;
    EXPECT_EQ(e->cdi_device_id, "k8s.ascend.project-hami.io/claim=uid-1") << c.name;
    EXPECT_EQ(SpecEnv(spec), c.want) << c.name;
    EXPECT_EQ(spec["devices"][0]["containerEdits"]["env"].size(), c.want.size()) << c.name;
    EXPECT_EQ(e->edits.dirs, std::vector<std::string>{"/host/vnpu/containers/uid-1_dra"}) << c.name;
    EXPECT_TRUE(e->edits.files.empty()) << c.name;
    std::map<std::string, Json> mounts;  // by container path
    for (const auto& m : spec["devices"][0]["containerEdits"]["mounts"])
      mounts[m["containerPath"].get<std::string>()] = m;
    const struct {
      const char* at;
      const char* from;
      const char* mode;
    } want_mounts[] = {
        {"/etc/ld.so.preload", "/host/vnpu/ld.so.preload", "ro"},
        {"/hami-vnpu-core", "/host/vnpu", "ro"},
        {"/hami-shared-region", "/host/shared", "rw"},
        {"/hami-vnpu-shmem", "/host/vnpu/containers/uid-1_dra", "rw"},
        {"/usr/local/Ascend/driver/lib64/driver", "/usr/local/Ascend/driver/lib64/driver", "ro"}};
    for (const auto& m : want_mounts) {
      ASSERT_TRUE(mounts.count(m.at)) << c.name << ": no mount at " << m.at;
      EXPECT_EQ(mounts[m.at]["hostPath"], m.from) << c.name << ": " << m.at;
      EXPECT_EQ(mounts[m.at]["options"][1], m.mode) << c.name << ": " << m.at;
    }
  }
}

// The driver with the Ascend vendor: with consumable capacity off (exclusive devices) a claim is
// armed with the whole NPU whatever its consumedCapacity says; a claim the vnpu core cannot express
// is refused with nothing written and nothing booked.
TEST(DraVendor, AscendDriverArmsWholeNpusWhenExclusiveAndRefusesWithoutSideEffects) {
  struct Case {
    const char* name;
    bool shared;
    testing::ClaimBuilder claim;
    const char* quota;  // NPU_MEM_QUOTA; nullptr: refused
    const char* priority;
  };
  const std::string driver = "ascend.project-hami.io";
  const Case cases[] = {
      {"shared: the consumed capacity", true,
       testing::MakeClaim("ns", "c", "uid-c")
           .Result("npu", "npu-0-0", "4Gi", "30", testing::kNode, driver),
       "4096", "30"},
      {"exclusive (gate off): the whole NPU", false,
       testing::MakeClaim("ns", "c", "uid-c")
           .Result("npu", "npu-0-0", "4Gi", "30", testing::kNode, driver),
       "65536", "100"},
      {"two NPUs consumed differently", true,
       testing::MakeClaim("ns", "c", "uid-c")
           .Result("a", "npu-0-0", "4Gi", "30", testing::kNode, driver)
           .Result("b", "npu-1-0", "2Gi", "30", testing::kNode, driver),
       nullptr, nullptr},
  };
  auto ascend = Ascend();
  for (const auto& c : cases) {
    testing::TempDir dir;
    testing::MapClaims claims;
    claims.Put(c.claim.Json());
    DriverOptions o;
    o.driver = driver;
    o.node_name = testing::kNode;
    o.plugin_dir = dir.path() + "/plugin";
    o.cdi_root = dir.path() + "/cdi";
    o.vgpu.region_root = dir.path() + "/containers";
    o.vendor = ascend.get();
    auto d = Driver::Create(o, TwoNpus(), &claims);
    ASSERT_TRUE(d.ok()) << c.name << ": " << d.status();
    (*d)->SetShared(c.shared);
    const ClaimRef ref{"ns", "c", "uid-c"};
    auto r = (*d)->Prepare({ref});
    const std::string spec = dir.path() + "/cdi/k8s." + driver + "-claim_uid-c.json";
    if (c.quota == nullptr) {
      EXPECT_TRUE(absl::IsFailedPrecondition(r[ref.uid].status))
          << c.name << ": " << r[ref.uid].status;
      EXPECT_FALSE(std::filesystem::exists(spec)) << c.name;
      EXPECT_FALSE(std::filesystem::exists(dir.path() + "/containers/uid-c_dra")) << c.name;
      EXPECT_EQ((*d)->Used("npu-0-0").memory_mib, 0) << c.name;
      EXPECT_EQ((*d)->Prepared(), 0u) << c.name;
      continue;
    }
    ASSERT_TRUE(r[ref.uid].status.ok()) << c.name << ": " << r[ref.uid].status;
    auto text = ReadWholeFile(spec);
    ASSERT_TRUE(text.ok()) << c.name << ": " << text.status();
    const auto env = SpecEnv(Json::parse(*text));
    EXPECT_EQ(env.at("NPU_MEM_QUOTA"), c.quota) << c.name;
    EXPECT_EQ(env.at("NPU_PRIORITY"), c.priority) << c.name;
    EXPECT_TRUE(std::filesystem::is_directory(dir.path() + "/containers/uid-c_dra")) << c.name;
    EXPECT_TRUE((*d)->Unprepare({ref})[ref.uid].ok()) << c.name;
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/containers/uid-c_dra")) << c.name;
  }
}

TEST(DraVendor, DevicesFileInTheAscendRegistrationFormat) {
  struct Case {
    const char* name;
    const char* text;
    std::vector<std::pair<int, std::string>> want;  // index, uuid; empty: refused
  };
  const Case cases[] = {
      {"two NPUs, listed out of order",
       R"([{"id":"910B3-1","index":1,"devmem":65536,"devcore":100,"type":"Ascend910B3"},
           {"id":"910B3-0","index":0,"devmem":65536,"devcore":100,"type":"Ascend910B3","numa":0}])",
       {{0, "910B3-0"}, {1, "910B3-1"}}},
      {"no devices", "[]", {}},
      {"no memory", R"([{"id":"910B3-0","index":0,"type":"Ascend910B3"}])", {}},
      {"an index twice",
       R"([{"id":"a","index":0,"devmem":1024},{"id":"b","index":0,"devmem":1024}])",
       {}},
      {"an id twice",
       R"([{"id":"a","index":0,"devmem":1024},{"id":"a","index":1,"devmem":1024}])",
       {}},
      {"garbage", "{not json", {}},
  };
  for (const auto& c : cases) {
    auto got = ParseDevicesFile(c.text);
    if (c.want.empty()) {
      EXPECT_FALSE(got.ok()) << c.name;
      continue;
    }
    ASSERT_TRUE(got.ok()) << c.name << ": " << got.status();
    std::vector<std::pair<int, std::string>> ids;
    for (const auto& g : *got) ids.emplace_back(g.index, g.uuid);
    EXPECT_EQ(ids, c.want) << c.name;
    EXPECT_EQ((*got)[0].memory_mib, 65536) << c.name;
    EXPECT_EQ((*got)[0].model, "Ascend910B3") << c.name;
  }
}

}  // namespace
}  // namespace hami::dra
