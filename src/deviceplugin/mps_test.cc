#include "deviceplugin/mps.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "deviceplugin/testing/builders.h"

namespace hami::deviceplugin {
namespace {

namespace fs = std::filesystem;
using testing::Dev;

TEST(MpsTest, PinnedMemLimitNamesEachOrdinalInMiB) {
  EXPECT_EQ(MpsPinnedMemLimit({Dev("GPU-a", 3000, 0)}), "0=3000M");
  EXPECT_EQ(MpsPinnedMemLimit({Dev("GPU-b", 8000, 0), Dev("GPU-a", 40960, 0)}), "0=8000M,1=40960M");
  EXPECT_EQ(MpsPinnedMemLimit({}), "");
}

TEST(MpsTest, ActiveThreadPercentageIsTheSmallestGrant) {
  struct Case {
    std::vector<core::ContainerDevice> devs;
    int want;
  };
  const Case cases[] = {
      {{Dev("a", 1, 30)}, 30},
      {{Dev("a", 1, 0)}, 0},
      {{Dev("a", 1, 40), Dev("b", 1, 20)}, 20},
      {{Dev("a", 1, 0), Dev("b", 1, 50)}, 50},
      {{Dev("a", 1, 100)}, 100},
      {{Dev("a", 1, 150)}, 100},  // a percentage: never above 100
      {{}, 0},
  };
  for (const Case& c : cases) EXPECT_EQ(MpsActiveThreadPercentage(c.devs), c.want);
}

class MpsDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hmpsXXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void WritePid(const std::string& text) {
    std::ofstream(dir_ + "/nvidia-cuda-mps-control.pid") << text;
  }
  std::string dir_;
};

TEST_F(MpsDaemonTest, RunsWhenItsPidFileNamesALiveProcess) {
  WritePid(std::to_string(::getpid()) + "\n");
  EXPECT_TRUE(CheckMpsControlDaemon(dir_).ok());
}

TEST_F(MpsDaemonTest, ErrorsNameThePidFileAndHowToStartIt) {
  struct Case {
    const char* name;
    const char* pid_text;  // nullptr: no file
    const char* want;
  };
  const std::string huge(1 << 20, '7');  // read only as far as a PID can reach
  const Case cases[] = {
      {"no daemon", nullptr, "MPS control daemon not running: no "},
      {"1 MiB of digits", huge.c_str(), "does not hold a PID (\"7777777"},
      {"empty file", "", "does not hold a PID"},
      {"garbage", "daemon\n", "does not hold a PID (\"daemon\")"},
      {"negative", "-5", "does not hold a PID"},
      {"zero", "0", "does not hold a PID"},
      {"too large", "99999999999", "does not hold a PID"},
      {"dead process", "2147483000", "PID 2147483000 of "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    fs::remove(dir_ + "/nvidia-cuda-mps-control.pid");
    if (c.pid_text != nullptr) WritePid(c.pid_text);
    Status s = CheckMpsControlDaemon(dir_);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    const std::string m(s.message());
    EXPECT_NE(m.find(c.want), std::string::npos) << m;
    EXPECT_NE(m.find(dir_ + "/nvidia-cuda-mps-control.pid"), std::string::npos) << m;
    EXPECT_NE(m.find("CUDA_MPS_PIPE_DIRECTORY=" + dir_ + " nvidia-cuda-mps-control -d"),
              std::string::npos)
        << m;
  }
}

}  // namespace
}  // namespace hami::deviceplugin
