#include "deviceplugin/imex.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "deviceplugin/allocate_env.h"
#include "deviceplugin/testing/builders.h"

namespace hami::deviceplugin {
namespace {

namespace fs = std::filesystem;
using testing::Dev;

TEST(ImexTest, ParseChannelIds) {
  struct Case {
    const char* text;
    std::vector<int> want;
    const char* error;  // a part of the message; nullptr = parses
  };
  const Case cases[] = {
      {"", {}, nullptr},
      {"  ", {}, nullptr},
      {"0", {0}, nullptr},
      {"0,3", {0, 3}, nullptr},
      {" 1 , 2 ", {1, 2}, nullptr},
      {"2147483647", {2147483647}, nullptr},
      {"2147483648", {}, "too large"},
      {"-1", {}, "negative"},
      {"1,,2", {}, "empty entry"},
      {"1,", {}, "empty entry"},
      {",1", {}, "empty entry"},
      {"x", {}, "'x' is not a whole number"},
      {"1.5", {}, "not a whole number"},
      {"0x10", {}, "not a whole number"},
      {"+1", {}, "not a whole number"},
      {"3,3", {}, "given twice"},
      {"1 2", {}, "not a whole number"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    auto ids = ParseImexChannelIds(c.text);
    if (c.error == nullptr) {
      ASSERT_TRUE(ids.ok()) << ids.status();
      EXPECT_EQ(*ids, c.want);
    } else {
      ASSERT_FALSE(ids.ok());
      EXPECT_NE(std::string(ids.status().message()).find(c.error), std::string::npos)
          << ids.status();
    }
  }
}

// Upstream's TestGetChannels cases (imex_test.go), with a device root of our own: a character
// device (a link to /dev/null: stat follows it, as the runtime's open does), a missing channel, a
// regular file in the channel's place.
class ImexRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/himexXXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    const fs::path dir = fs::path(root_) / "dev/nvidia-caps-imex-channels";
    fs::create_directories(dir);
    fs::create_symlink("/dev/null", dir / "channel0");
    std::ofstream(dir / "channel1") << "dummy";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::string root_;
};

TEST_F(ImexRootTest, UpstreamTestGetChannels) {
  // empty channels list
  auto none = ResolveImexChannels({}, true, root_);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  // missing channel not required: skipped
  auto skipped = ResolveImexChannels({999}, false, "/nonexistent-dev-root");
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_TRUE(skipped->empty());
  // missing channel required: start fails naming it
  auto missing = ResolveImexChannels({999}, true, "/nonexistent-dev-root");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message())
                .find("requested IMEX channel channel999 does not exist"),
            std::string::npos)
      << missing.status();
  // channel path is a regular file instead of a character device
  auto file = ResolveImexChannels({1}, true, root_);
  ASSERT_FALSE(file.ok());
  EXPECT_NE(std::string(file.status().message()).find("is not a character device"),
            std::string::npos)
      << file.status();
}

TEST_F(ImexRootTest, KeepsTheChannelsFoundInOrder) {
  auto found = ResolveImexChannels({7, 0, 1}, false, root_);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, std::vector<int>{0});
  auto trailing_slash = ResolveImexChannels({0}, true, root_ + "/");
  ASSERT_TRUE(trailing_slash.ok()) << trailing_slash.status();
  EXPECT_EQ(*trailing_slash, std::vector<int>{0});
}

TEST(ImexTest, ChannelPath) {
  EXPECT_EQ(ImexChannelPath(0), "/dev/nvidia-caps-imex-channels/channel0");
  EXPECT_EQ(ImexChannelPath(12), "/dev/nvidia-caps-imex-channels/channel12");
}

// Every GPU container names the node's channels beside its devices, under the device list's
// strategies (upstream: updateResponseForImexChannelsEnvVar, the volume-mounts entries under
// imex/, CDI devices of class imex-channel); libvgpu's limits file does not carry them.
TEST(ImexTest, AllocationsNameTheChannelsUnderEveryStrategy) {
  struct Case {
    const char* strategy;
    const char* env;  // NVIDIA_IMEX_CHANNELS; nullptr = absent
    std::vector<MountSpec> mounts;
    const char* annotation;  // the CDI annotation's value; nullptr = none
    std::vector<std::string> cdi;
  };
  const Case cases[] = {
      {"envvar", "0,3", {}, nullptr, {}},
      {"volume-mounts",
       nullptr,
       {{"/var/run/nvidia-container-devices/imex/0", "/dev/null", false},
        {"/var/run/nvidia-container-devices/imex/3", "/dev/null", false}},
       nullptr,
       {}},
      {"cdi-annotations",
       nullptr,
       {},
       "nvidia.com/gpu=GPU-a,nvidia.com/imex-channel=0,nvidia.com/imex-channel=3",
       {}},
      {"cdi-cri",
       nullptr,
       {},
       nullptr,
       {"nvidia.com/gpu=GPU-a", "nvidia.com/imex-channel=0", "nvidia.com/imex-channel=3"}},
      {"envvar,cdi-cri",
       "0,3",
       {},
       nullptr,
       {"nvidia.com/gpu=GPU-a", "nvidia.com/imex-channel=0", "nvidia.com/imex-channel=3"}},
  };
  const PendingPod p = testing::MakePod("p1", {{Dev("GPU-a", 3000, 30)}});
  const std::string cache = "0f3c8e2a-7d41-4b6e-9a15-c2e4b7d90a13.cache";
  const std::string key = "cdi.k8s.io/nvidia-device-plugin_0f3c8e2a-7d41-4b6e-9a15-c2e4b7d90a13";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.strategy);
    PluginConfig cfg;
    cfg.device_list_strategy = c.strategy;
    auto without = BuildContainerAllocation(p, p.containers[0], cfg, cache);
    ASSERT_TRUE(without.ok()) << without.status();
    EXPECT_EQ(without->envs.count(kEnvImexChannels), 0u);
    cfg.imex_channels = {0, 3};
    auto a = BuildContainerAllocation(p, p.containers[0], cfg, cache);
    ASSERT_TRUE(a.ok()) << a.status();
    if (c.env == nullptr) {
      EXPECT_EQ(a->envs.count(kEnvImexChannels), 0u);
    } else {
      EXPECT_EQ(a->envs.at(kEnvImexChannels), c.env);
    }
    // The channels' mounts follow the device list's; then libvgpu's, unchanged.
    ASSERT_EQ(a->mounts.size(), without->mounts.size() + c.mounts.size());
    size_t at = 0;  // past the device list's mounts
    while (at < without->mounts.size() &&
           without->mounts[at].container_path.rfind("/var/run/nvidia-container-devices/", 0) == 0)
      ++at;
    EXPECT_EQ(std::vector<MountSpec>(a->mounts.begin(), a->mounts.begin() + at),
              std::vector<MountSpec>(without->mounts.begin(), without->mounts.begin() + at));
    EXPECT_EQ(std::vector<MountSpec>(a->mounts.begin() + at + c.mounts.size(), a->mounts.end()),
              std::vector<MountSpec>(without->mounts.begin() + at, without->mounts.end()));
    EXPECT_EQ(
        std::vector<MountSpec>(a->mounts.begin() + at, a->mounts.begin() + at + c.mounts.size()),
        c.mounts);
    if (c.annotation == nullptr) {
      EXPECT_TRUE(a->annotations.empty());
    } else {
      EXPECT_EQ(a->annotations.at(key), c.annotation);
    }
    EXPECT_EQ(a->cdi_devices, c.cdi);
    EXPECT_EQ(a->limits_file, without->limits_file);
  }
  // MIG and MPS containers hold GPUs too: they get the channels.
  PluginConfig cfg;
  cfg.imex_channels = {5};
  auto mig = BuildMigContainerAllocation(p, p.containers[0], cfg,
                                         {"MIG-11111111-2222-4333-8444-555555555555"}, "a1");
  ASSERT_TRUE(mig.ok()) << mig.status();
  EXPECT_EQ(mig->envs.at(kEnvImexChannels), "5");
  auto mps = BuildMpsContainerAllocation(p, p.containers[0], cfg, "a2");
  ASSERT_TRUE(mps.ok()) << mps.status();
  EXPECT_EQ(mps->envs.at(kEnvImexChannels), "5");
  // A CDI kind of another vendor names that vendor's channels.
  cfg.device_list_strategy = "cdi-cri";
  cfg.cdi_kind = "k8s.device-plugin.nvidia.com/gpu";
  auto own = BuildContainerAllocation(p, p.containers[0], cfg, cache);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->cdi_devices.back(), "k8s.device-plugin.nvidia.com/imex-channel=5");
}

}  // namespace
}  // namespace hami::deviceplugin
