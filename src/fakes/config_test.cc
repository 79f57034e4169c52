#include "fakes/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>

#include "fakes/fake_gpu.h"

namespace fakegpu {
namespace {

TEST(ParseDevicesTest, Table) {
  struct Case {
    const char* text;
    bool ok;
    size_t count;
    const char* first_name;
    uint64_t first_mib;
    uint32_t first_sms;
    const char* first_uuid;
  };
  const Case cases[] = {
      {"NVIDIA A100-SXM4-80GB:81920:108", true, 1, "NVIDIA A100-SXM4-80GB", 81920, 108,
       "GPU-fa4e0000-0000-4000-8000-000000000000"},
      {"NVIDIA A100-SXM4-80GB:81920:108;Tesla T4:15360:40", true, 2, "NVIDIA A100-SXM4-80GB", 81920,
       108, nullptr},
      {"Tesla T4:15360:40:GPU-1234", true, 1, "Tesla T4", 15360, 40, "GPU-1234"},
      {" Tesla T4 : 15360 : 40 ", true, 1, "Tesla T4", 15360, 40, nullptr},
      {"", false, 0, nullptr, 0, 0, nullptr},
      {"A:1", false, 0, nullptr, 0, 0, nullptr},
      {"A:1:2:GPU-x:extra", false, 0, nullptr, 0, 0, nullptr},
      {"A:0:10", false, 0, nullptr, 0, 0, nullptr},
      {"A:-5:10", false, 0, nullptr, 0, 0, nullptr},
      {"A:100:0", false, 0, nullptr, 0, 0, nullptr},
      {"A:100:abc", false, 0, nullptr, 0, 0, nullptr},
      {":100:10", false, 0, nullptr, 0, 0, nullptr},
      {"A:100:10:NOT-A-UUID", false, 0, nullptr, 0, 0, nullptr},
      {"A:100:10:GPU-1;B:100:10:GPU-1", false, 0, nullptr, 0, 0, nullptr},
      {"A:100:10;", false, 0, nullptr, 0, 0, nullptr},
      {"A:99999999999999999999999:10", false, 0, nullptr, 0, 0, nullptr},
  };
  for (const Case& c : cases) {
    std::vector<DeviceSpec> devs;
    std::string err;
    EXPECT_EQ(ParseDevices(c.text, &devs, &err), c.ok) << c.text << " err=" << err;
    if (!c.ok) {
      EXPECT_FALSE(err.empty()) << c.text;
      continue;
    }
    ASSERT_EQ(devs.size(), c.count) << c.text;
    EXPECT_EQ(devs[0].name, c.first_name);
    EXPECT_EQ(devs[0].mem_mib, c.first_mib);
    EXPECT_EQ(devs[0].sms, c.first_sms);
    if (c.first_uuid) {
      EXPECT_EQ(devs[0].uuid, c.first_uuid);
    }
  }
}

TEST(ParseDevicesTest, DefaultUuidsAreDistinctAndPerIndex) {
  std::vector<DeviceSpec> devs;
  std::string err;
  ASSERT_TRUE(ParseDevices("A:1:1;B:1:1;C:1:1", &devs, &err));
  EXPECT_EQ(devs[1].uuid, DefaultUuid(1));
  EXPECT_NE(devs[0].uuid, devs[2].uuid);
  std::string many;
  for (int i = 0; i <= kMaxDevices; ++i) many += std::string(i ? ";" : "") + "A:1:1";
  EXPECT_FALSE(ParseDevices(many, &devs, &err));
}

TEST(ParseListsTest, NvLinks) {
  struct Case {
    const char* text;
    bool ok;
    size_t n;
  };
  const Case cases[] = {{"0-1:12,2-3:12", true, 2},  {"", true, 0},       {"0-1", false, 0},
                        {"0-0:2", false, 0},         {"0-9:2", false, 0}, {"0-1:37", false, 0},
                        {"0-1:20,0-2:20", false, 0}, {"a-b:1", false, 0}, {"0-1:0", false, 0}};
  for (const Case& c : cases) {
    std::vector<NvLinkSpec> out;
    std::string err;
    EXPECT_EQ(ParseNvLinks(c.text, 4, &out, &err), c.ok) << c.text;
    if (c.ok) {
      EXPECT_EQ(out.size(), c.n) << c.text;
    }
  }
}

TEST(ParseListsTest, Faults) {
  std::vector<FaultSpec> out;
  std::string err;
  ASSERT_TRUE(ParseFaults("cuMemAlloc_v2=2@3,nvmlDeviceGetMemoryInfo=999", &out, &err)) << err;
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].symbol, "cuMemAlloc_v2");
  EXPECT_EQ(out[0].code, 2);
  EXPECT_EQ(out[0].nth, 3u);
  EXPECT_EQ(out[1].code, 999);
  EXPECT_EQ(out[1].nth, 0u);
  for (const char* bad :
       {"cuInit", "=2", "cuInit=x", "cuInit=2@0", "cuInit=2@x", "cu-Init=2", "cuInit=0"}) {
    EXPECT_FALSE(ParseFaults(bad, &out, &err)) << bad;
  }
}

TEST(ParseListsTest, Xids) {
  std::vector<XidSpec> out;
  std::string err;
  ASSERT_TRUE(ParseXids("1:79:500,0:48:0", 2, &out, &err)) << err;
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].dev, 1);
  EXPECT_EQ(out[0].xid, 79u);
  EXPECT_EQ(out[0].after_ms, 500u);
  for (const char* bad : {"2:79:0", "0:79", "x:1:1", "0:1:-1"})
    EXPECT_FALSE(ParseXids(bad, 2, &out, &err)) << bad;
}

TEST(VisibleDevicesTest, Table) {
  const std::vector<std::string> uuids = {"GPU-aaaa1111", "GPU-bbbb2222", "GPU-aaaa3333"};
  struct Case {
    const char* env;
    std::vector<int> want;
  };
  const Case cases[] = {
      {nullptr, {0, 1, 2}},
      {"", {}},
      {"2,0", {2, 0}},
      {"1", {1}},
      {"0,7,1", {0}},              // stops at the first invalid entry
      {"0,0,1", {0}},              // duplicate ends the list
      {"GPU-bbbb", {1}},           // unique prefix
      {"GPU-aaaa", {}},            // ambiguous prefix
      {"GPU-aaaa3333,1", {2, 1}},  // full uuid, then index
      {"-1,0", {}},
      {"NoDevFiles", {}},
      {" 1 , 2 ", {1, 2}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(VisibleDevices(c.env, uuids), c.want) << (c.env ? c.env : "(unset)");
  }
}

TEST(LoadConfigTest, DefaultsAndMalformedValues) {
  std::map<std::string, std::string> env = {
      {FAKEGPU_ENV_DEVICES, "broken"},       {FAKEGPU_ENV_WAVE_US, "0"},
      {FAKEGPU_ENV_CTX_OVERHEAD_MIB, "512"}, {FAKEGPU_ENV_FAULTS, "nonsense"},
      {FAKEGPU_ENV_INIT_FAIL, "yes"},        {FAKEGPU_ENV_MAX_BACKLOG_US, "1000"},
  };
  std::vector<std::string> warnings;
  Config c = LoadConfig(
      [&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      &warnings);
  ASSERT_EQ(c.devices.size(), 1u);
  EXPECT_EQ(c.devices[0].name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(c.wave_us, 100u);
  EXPECT_EQ(c.ctx_overhead_mib, 512u);
  EXPECT_EQ(c.max_backlog_us, 1000u);
  EXPECT_TRUE(c.faults.empty());
  EXPECT_FALSE(c.init_fail);
  EXPECT_EQ(warnings.size(), 4u);
  for (const std::string& w : warnings) {
    EXPECT_EQ(w.rfind("fakegpu: FAKEGPU_", 0), 0u) << w;
    EXPECT_EQ(w.find('\n'), std::string::npos);
  }
  // Default state path: uid plus a hash of the (effective) device list text.
  EXPECT_EQ(c.state_path.rfind("/dev/shm/fakegpu-" + std::to_string(getuid()) + "-", 0), 0u)
      << c.state_path;
}

TEST(ParseListsTest, MigDevices) {
  std::vector<DeviceSpec> devices;
  std::string err;
  ASSERT_TRUE(
      ParseDevices("NVIDIA A100-SXM4-40GB:40960:108;Tesla T4:15360:40;"
                   "NVIDIA H100 80GB HBM3:81559:132;NVIDIA H100 PCIe:40960:114",
                   &devices, &err))
      << err;
  std::vector<int> out;
  ASSERT_TRUE(ParseMigDevices(" 2, 0", devices, &out, &err)) << err;
  EXPECT_EQ(out, (std::vector<int>{2, 0}));
  ASSERT_TRUE(ParseMigDevices("", devices, &out, &err));
  EXPECT_TRUE(out.empty());
  // A T4 (1) and a small H100 (3) have no MIG table; 4 is no device; duplicates and junk.
  for (const char* bad : {"1", "3", "4", "0,0", "x", "0;2", "-1"})
    EXPECT_FALSE(ParseMigDevices(bad, devices, &out, &err)) << bad;
  ParseMigDevices("1", devices, &out, &err);
  EXPECT_NE(err.find("cannot run MIG"), std::string::npos) << err;
}

TEST(LoadConfigTest, StatePathDependsOnDevices) {
  auto path_for = [](const char* devices) {
    std::vector<std::string> w;
    return LoadConfig(
               [&](const char* name) -> const char* {
                 return std::string(name) == FAKEGPU_ENV_DEVICES ? devices : nullptr;
               },
               &w)
        .state_path;
  };
  EXPECT_NE(path_for("A:1:1"), path_for("B:1:1"));
  EXPECT_EQ(path_for("A:1:1"), path_for("A:1:1"));
  // FAKEGPU_MIG sets the modes a state starts with: another MIG setting, another state.
  std::vector<std::string> w;
  const Config mig = LoadConfig(
      [&](const char* name) -> const char* {
        if (std::string(name) == FAKEGPU_ENV_DEVICES) return "NVIDIA A100-PCIE-40GB:40960:108";
        return std::string(name) == FAKEGPU_ENV_MIG ? "0" : nullptr;
      },
      &w);
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(mig.mig_devices, (std::vector<int>{0}));
  EXPECT_NE(mig.state_path, path_for("NVIDIA A100-PCIE-40GB:40960:108"));
}

TEST(UuidTest, BytesFromHex) {
  unsigned char b[16];
  UuidBytes("GPU-fa4e0000-0000-4000-8000-00000000000a", b);
  EXPECT_EQ(b[0], 0xfa);
  EXPECT_EQ(b[1], 0x4e);
  EXPECT_EQ(b[15], 0x0a);
  unsigned char c[16];
  UuidBytes("GPU-custom", c);
  UuidBytes("GPU-custom2", b);
  EXPECT_NE(std::string(reinterpret_cast<char*>(b), 16),
            std::string(reinterpret_cast<char*>(c), 16));
}

TEST(ComputeCapabilityTest, Table) {
  struct Case {
    const char* name;
    int major, minor;
  };
  const Case cases[] = {{"NVIDIA A100-SXM4-80GB", 8, 0},
                        {"Tesla T4", 7, 5},
                        {"NVIDIA H100 80GB HBM3", 9, 0},
                        {"NVIDIA L4", 8, 9},
                        {"NVIDIA A10", 8, 6},
                        {"Tesla V100-SXM2-32GB", 7, 0},
                        {"NVIDIA B200", 10, 0},
                        {"Tesla K80", 3, 7},
                        {"Tesla M60", 5, 2},
                        {"Mystery GPU", 8, 0}};
  for (const Case& c : cases) {
    int major = 0, minor = 0;
    ComputeCapability(c.name, &major, &minor);
    EXPECT_EQ(major, c.major) << c.name;
    EXPECT_EQ(minor, c.minor) << c.name;
  }
}

}  // namespace
}  // namespace fakegpu
