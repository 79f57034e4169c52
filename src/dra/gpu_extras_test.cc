#include "dra/gpu_extras.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "dra/testing/builders.h"

namespace hami::dra {
namespace {

namespace fs = std::filesystem;

TEST(GpuExtras, ArchitectureOf) {
  struct Case {
    int major, minor;
    const char* want;
  };
  const Case cases[] = {{6, 1, "Pascal"}, {7, 0, "Volta"},      {7, 5, "Turing"},
                        {8, 0, "Ampere"}, {8, 6, "Ampere"},     {8, 9, "Ada Lovelace"},
                        {9, 0, "Hopper"}, {10, 0, "Blackwell"}, {12, 0, "Blackwell"},
                        {5, 2, ""},       {11, 0, ""},          {0, 0, ""}};
  for (const auto& c : cases)
    EXPECT_EQ(ArchitectureOf(c.major, c.minor), c.want) << c.major << "." << c.minor;
}

TEST(GpuExtras, DriverSemver) {
  const std::pair<const char*, const char*> cases[] = {{"550.54.15", "550.54.15"},
                                                       {"535.104.05", "535.104.5"},
                                                       {"550.54", "550.54.0"},
                                                       {"560", "560.0.0"},
                                                       {"00.0.000", "0.0.0"},
                                                       {"", ""},
                                                       {"1.2.3.4", ""},
                                                       {"550..1", ""},
                                                       {"550.54.15-rc1", ""},
                                                       {"r550", ""},
                                                       {"1234567890.1", ""}};
  for (const auto& [in, want] : cases) EXPECT_EQ(DriverSemver(in), want) << in;
}

TEST(GpuExtras, PcieRootFromSysfs) {
  testing::TempDir sys;
  const std::string root = sys.path();
  // /sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0 and the bus/pci/devices link to it.
  fs::create_directories(root + "/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0");
  fs::create_directories(root + "/bus/pci/devices");
  fs::create_symlink("../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0",
                     root + "/bus/pci/devices/0000:3b:00.0");
  // A link that leaves /sys/devices, and one to a directory not under a pci root.
  fs::create_directories(root + "/elsewhere/0000:3c:00.0");
  fs::create_symlink("../../../elsewhere/0000:3c:00.0", root + "/bus/pci/devices/0000:3c:00.0");
  fs::create_directories(root + "/devices/platform/0000:3d:00.0");
  fs::create_symlink("../../../devices/platform/0000:3d:00.0",
                     root + "/bus/pci/devices/0000:3d:00.0");
  const std::pair<const char*, const char*> cases[] = {
      {"00000000:3B:00.0", "pci0000:3a"},  // NVML's form
      {"0000:3b:00.0", "pci0000:3a"},
      {"0000:3c:00.0", ""},
      {"0000:3d:00.0", ""},
      {"0000:99:00.0", ""},
      {"garbage", ""},
      {"", ""}};
  for (const auto& [bus, want] : cases) EXPECT_EQ(PcieRoot(root, bus), want) << bus;
}

}  // namespace
}  // namespace hami::dra
