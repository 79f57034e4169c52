#include "dra/slice.h"

#include <gtest/gtest.h>

namespace hami::dra {
namespace {

using Json = nlohmann::json;

gpu::GpuInfo Gpu(int index, int64_t mib, std::string bus = "") {
  gpu::GpuInfo g;
  g.index = index;
  g.uuid = StrCat("GPU-", index);
  g.model = "NVIDIA H200";
  g.memory_mib = mib;
  g.numa_node = index / 2;
  g.pci_bus_id = std::move(bus);
  return g;
}

SliceOptions Opts() {
  SliceOptions o;
  o.node_name = "node-a";
  o.node_uid = "uid-node-a";
  o.generation = 3;
  return o;
}

TEST(Slice, OneSharedDevicePerGpuWithWholeDeviceDefaults) {
  auto s = BuildResourceSlice({Gpu(0, 16384, "00000000:3B:00.0"), Gpu(1, 16384)}, {}, Opts());
  ASSERT_TRUE(s.ok()) << s.status();
  const Json& j = *s;
  EXPECT_EQ(j["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(j["kind"], "ResourceSlice");
  EXPECT_EQ(j["metadata"]["name"], "node-a-hami-core-gpu-project-hami-io");
  EXPECT_EQ(j["metadata"]["ownerReferences"][0], (Json{{"apiVersion", "v1"},
                                                       {"kind", "Node"},
                                                       {"name", "node-a"},
                                                       {"uid", "uid-node-a"},
                                                       {"controller", true}}));
  EXPECT_EQ(j["spec"]["driver"], "hami-core-gpu.project-hami.io");
  EXPECT_EQ(j["spec"]["nodeName"], "node-a");
  EXPECT_EQ(j["spec"]["pool"],
            (Json{{"name", "node-a"}, {"generation", 3}, {"resourceSliceCount", 1}}));
  ASSERT_EQ(j["spec"]["devices"].size(), 2u);
  const Json& d = j["spec"]["devices"][0];
  EXPECT_EQ(d["name"], "gpu-0");
  EXPECT_EQ(d["allowMultipleAllocations"], true);
  EXPECT_EQ(d["attributes"]["type"]["string"], "hami-gpu");
  EXPECT_EQ(d["attributes"]["uuid"]["string"], "GPU-0");
  EXPECT_EQ(d["attributes"]["index"]["int"], 0);
  EXPECT_EQ(d["attributes"]["productName"]["string"], "NVIDIA H200");
  EXPECT_EQ(d["attributes"]["resource.kubernetes.io/pciBusID"]["string"], "0000:3b:00.0");
  EXPECT_EQ(d["attributes"]["resource.kubernetes.io/numaNode"]["int"], 0);
  EXPECT_EQ(
      d["capacity"]["memory"],
      (Json{
          {"value", "17179869184"},
          {"requestPolicy",
           {{"default", "17179869184"},
            {"validRange", {{"min", "1048576"}, {"max", "17179869184"}, {"step", "1048576"}}}}}}));
  EXPECT_EQ(d["capacity"]["cores"],
            (Json{{"value", "100"},
                  {"requestPolicy",
                   {{"default", "100"},
                    {"validRange", {{"min", "0"}, {"max", "100"}, {"step", "1"}}}}}}));
  EXPECT_FALSE(j["spec"]["devices"][1]["attributes"].contains("resource.kubernetes.io/pciBusID"));
}

TEST(Slice, ScalingExtrasAndExclusiveMode) {
  SliceOptions o = Opts();
  o.memory_scaling = 1.5;
  o.shared = false;
  std::map<std::string, GpuExtras> extras = {
      {"GPU-0", {"Hopper", "9.0", "550.54.15", "pci0000:3a"}}};
  auto s = BuildResourceSlice({Gpu(0, 1000)}, extras, o);
  ASSERT_TRUE(s.ok()) << s.status();
  const Json& d = (*s)["spec"]["devices"][0];
  EXPECT_EQ(d["capacity"]["memory"], (Json{{"value", std::to_string(1500 * kMiB)}}));
  EXPECT_FALSE(d.contains("allowMultipleAllocations"));
  EXPECT_EQ(d["attributes"]["architecture"]["string"], "Hopper");
  EXPECT_EQ(d["attributes"]["cudaComputeCapability"]["version"], "9.0.0");
  EXPECT_EQ(d["attributes"]["driverVersion"]["version"], "550.54.15");
  EXPECT_EQ(d["attributes"]["resource.kubernetes.io/pcieRoot"]["string"], "pci0000:3a");
}

TEST(Slice, NamesAreStable) {
  auto a = BuildResourceSlice({Gpu(0, 100), Gpu(1, 100)}, {}, Opts());
  auto b = BuildResourceSlice({Gpu(0, 100), Gpu(1, 100)}, {}, Opts());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

TEST(Slice, Refusals) {
  struct Case {
    const char* name;
    std::vector<gpu::GpuInfo> gpus;
    SliceOptions opts;
    const char* error;
  };
  SliceOptions no_uid = Opts();
  no_uid.node_uid = "";
  SliceOptions bad_driver = Opts();
  bad_driver.driver = "Hami_GPU";
  SliceOptions long_driver = Opts();
  long_driver.driver = std::string(64, 'a');
  std::vector<gpu::GpuInfo> many;
  for (int i = 0; i < 129; ++i) many.push_back(Gpu(i, 100));
  const Case cases[] = {
      {"no node uid", {Gpu(0, 100)}, no_uid, "node's name and uid"},
      {"upper-case driver", {Gpu(0, 100)}, bad_driver, "DNS subdomain"},
      {"64-char driver", {Gpu(0, 100)}, long_driver, "DNS subdomain"},
      {"129 GPUs", many, Opts(), "at most 128"},
      {"no memory", {Gpu(0, 0)}, Opts(), "reports no memory"},
      {"duplicate index", {Gpu(0, 100), Gpu(0, 100)}, Opts(), "taken"},
  };
  for (const auto& c : cases) {
    auto s = BuildResourceSlice(c.gpus, {}, c.opts);
    ASSERT_FALSE(s.ok()) << c.name;
    EXPECT_NE(s.status().message().find(c.error), std::string::npos)
        << c.name << ": " << s.status();
  }
}

TEST(Slice, PciBusIdNormalization) {
  const std::pair<const char*, const char*> cases[] = {
      {"00000000:3B:00.0", "0000:3b:00.0"},
      {"0000:af:00.1", "0000:af:00.1"},
      {"00000001:3B:00.0", "0001:3b:00.0"},
      {"10000000:3B:00.0", ""},
      {"garbage", ""},
      {"", ""},
      {"0000:zz:00.0", ""},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(NormalizePciBusId(in), want) << in;
}

}  // namespace
}  // namespace hami::dra
