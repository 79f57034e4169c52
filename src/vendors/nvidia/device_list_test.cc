#include "vendors/nvidia/device_list.h"

#include <gtest/gtest.h>

namespace hami::vendors::nvidia {
namespace {

TEST(DeviceListTest, ParseStrategies) {
  struct Case {
    const char* text;
    const char* want;  // canonical spelling; nullptr = error
  };
  const Case cases[] = {
      {"envvar", "envvar"},
      {"volume-mounts", "volume-mounts"},
      {"cdi-annotations", "cdi-annotations"},
      {"cdi-cri", "cdi-cri"},
      // NVIDIA's plugin combines any set (its flag is a list; a comma separates here).
      {"cdi-cri,cdi-annotations", "cdi-annotations,cdi-cri"},
      {"envvar, cdi-annotations", "envvar,cdi-annotations"},
      {" envvar ", "envvar"},
      {"envvar,envvar", "envvar"},
      {"envvar,volume-mounts,cdi-annotations,cdi-cri",
       "envvar,volume-mounts,cdi-annotations,cdi-cri"},
      {"", nullptr},
      {"  ", nullptr},
      {",", nullptr},
      {"envvar,", nullptr},
      {",envvar", nullptr},
      {"envvar,,cdi-cri", nullptr},
      {"cdi", nullptr},  // not a strategy of NVIDIA's plugin
      {"Envvar", nullptr},
      {"env var", nullptr},
      {"cdi-annotations;cdi-cri", nullptr},
  };
  for (const auto& tc : cases) {
    auto got = ParseDeviceListStrategies(tc.text);
    if (tc.want == nullptr) {
      EXPECT_FALSE(got.ok()) << "'" << tc.text << "' accepted as " << got->ToString();
      continue;
    }
    ASSERT_TRUE(got.ok()) << "'" << tc.text << "': " << got.status();
    EXPECT_EQ(got->ToString(), tc.want) << tc.text;
    // The canonical spelling parses back to the same set.
    auto again = ParseDeviceListStrategies(got->ToString());
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *got) << tc.text;
  }
  auto bad = ParseDeviceListStrategies("cdi");
  EXPECT_NE(std::string(bad.status().message()).find("\"cdi\" is not one of envvar"),
            std::string::npos)
      << bad.status();
}

TEST(DeviceListTest, OnlyCdiDropsTheEnvironmentList) {
  struct Case {
    const char* text;
    bool any_cdi, only_cdi;
  };
  const Case cases[] = {
      {"envvar", false, false},
      {"volume-mounts", false, false},
      {"cdi-annotations", true, true},
      {"cdi-cri", true, true},
      {"cdi-annotations,cdi-cri", true, true},
      {"envvar,cdi-annotations", true, false},
      {"volume-mounts,cdi-cri", true, false},
  };
  for (const auto& tc : cases) {
    auto s = ParseDeviceListStrategies(tc.text);
    ASSERT_TRUE(s.ok()) << tc.text;
    EXPECT_EQ(s->AnyCdi(), tc.any_cdi) << tc.text;
    EXPECT_EQ(s->OnlyCdi(), tc.only_cdi) << tc.text;
  }
}

TEST(DeviceListTest, DeviceIdStrategy) {
  EXPECT_TRUE(CheckDeviceIdStrategy("uuid").ok());
  EXPECT_TRUE(CheckDeviceIdStrategy("index").ok());
  for (const char* bad : {"", "UUID", "name", "uuid,index"})
    EXPECT_FALSE(CheckDeviceIdStrategy(bad).ok()) << bad;
}

TEST(DeviceListTest, CdiKind) {
  struct Case {
    const char* kind;
    bool ok;
  };
  const Case cases[] = {
      {"nvidia.com/gpu", true},
      {"k8s.device-plugin.nvidia.com/gpu", true},
      {"management.nvidia.com/gpu", true},
      {"vendor_1.io/dev-class_2", true},
      {"a/b", true},
      {"nvidia.com", false},
      {"/gpu", false},
      {"nvidia.com/", false},
      {"1nvidia.com/gpu", false},   // vendor starts with a letter
      {"nvidia.com./gpu", false},   // and ends with a letter or digit
      {"nvidia.com/gpu.x", false},  // no '.' in a class
      {"nvidia.com/gpu/x", false},
      {"nvidia.com/-gpu", false},
      {"nvidia com/gpu", false},
  };
  for (const auto& tc : cases) EXPECT_EQ(CheckCdiKind(tc.kind).ok(), tc.ok) << tc.kind;
}

TEST(DeviceListTest, CdiDeviceName) {
  struct Case {
    const char* kind;
    const char* name;
    const char* want;  // nullptr = error
  };
  const Case cases[] = {
      {"nvidia.com/gpu", "GPU-3c2d7a3e-54f1-11ee-8c99-0242ac120002",
       "nvidia.com/gpu=GPU-3c2d7a3e-54f1-11ee-8c99-0242ac120002"},
      {"nvidia.com/gpu", "0", "nvidia.com/gpu=0"},
      {"nvidia.com/gpu", "12", "nvidia.com/gpu=12"},
      {"k8s.device-plugin.nvidia.com/gpu", "MIG-1:0", "k8s.device-plugin.nvidia.com/gpu=MIG-1:0"},
      {"nvidia.com/gpu", "", nullptr},
      {"nvidia.com/gpu", "GPU-", nullptr},
      {"nvidia.com/gpu", "-0", nullptr},
      {"nvidia.com/gpu", "a,b", nullptr},  // would split the annotation value
      {"nvidia.com/gpu", "a=b", nullptr},
      {"nvidia.com/gpu", "a/b", nullptr},
      {"nvidia.com", "0", nullptr},
  };
  for (const auto& tc : cases) {
    auto got = CdiDeviceName(tc.kind, tc.name);
    if (tc.want == nullptr) {
      EXPECT_FALSE(got.ok()) << tc.kind << " " << tc.name;
    } else {
      ASSERT_TRUE(got.ok()) << tc.name << ": " << got.status();
      EXPECT_EQ(*got, tc.want);
    }
  }
}

// The key NVIDIA's plugin writes: cdi.k8s.io/nvidia-device-plugin_<random UUID of the response>.
TEST(DeviceListTest, CdiAnnotationKey) {
  struct Case {
    const char* prefix;
    const char* id;
    const char* want;  // nullptr = error
  };
  const Case cases[] = {
      {"cdi.k8s.io/", "3f0e9a52-1b7c-4c1e-9d7e-7f3b0e2a1c55",
       "cdi.k8s.io/nvidia-device-plugin_3f0e9a52-1b7c-4c1e-9d7e-7f3b0e2a1c55"},
      {"example.com/", "r", "example.com/nvidia-device-plugin_r"},
      {"cdi.k8s.io/", "a/b", "cdi.k8s.io/nvidia-device-plugin_a_b"},
      // 21 + 42 = 63 characters: the longest name.
      {"cdi.k8s.io/", "012345678901234567890123456789012345678901",
       "cdi.k8s.io/nvidia-device-plugin_012345678901234567890123456789012345678901"},
      {"cdi.k8s.io/", "0123456789012345678901234567890123456789012", nullptr},
      {"cdi.k8s.io/", "", nullptr},  // ends in '_'
      {"cdi.k8s.io/", "a b", nullptr},
      {"cdi.k8s.io", "r", nullptr},
      {"/", "r", nullptr},
      {"CDI.k8s.io/", "r", nullptr},
      {"cdi..io/", "r", nullptr},
      {"-cdi.io/", "r", nullptr},
      {"cdi.k8s.io//", "r", nullptr},
  };
  for (const auto& tc : cases) {
    auto got = CdiAnnotationKey(tc.prefix, tc.id);
    if (tc.want == nullptr) {
      EXPECT_FALSE(got.ok()) << tc.prefix << " " << tc.id << " -> " << *got;
    } else {
      ASSERT_TRUE(got.ok()) << tc.prefix << tc.id << ": " << got.status();
      EXPECT_EQ(*got, tc.want);
    }
  }
}

}  // namespace
}  // namespace hami::vendors::nvidia
