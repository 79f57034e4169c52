// Table tests of libvgpu's environment parsing (upstream's contract, strict about garbage).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "vgpu/vgpu_core.h"

namespace {

constexpr uint64_t kMi = 1ull << 20;
constexpr uint64_t kGi = 1ull << 30;

TEST(VgpuEnv, MemSizes) {
  struct Case {
    const char* in;
    int rc;
    uint64_t want;
  } cases[] = {
      {"3000m", 0, 3000 * kMi},
      {"3000M", 0, 3000 * kMi},
      {"1Gi", 0, kGi},
      {"1GiB", 0, kGi},
      {"1gb", 0, kGi},
      {"1g", 0, kGi},
      {"1.5g", 0, kGi + kGi / 2},
      {"0.25Gi", 0, kGi / 4},
      {"1073741824", 0, kGi},
      {" 64k ", 0, 64 * 1024},
      {"2t", 0, 2ull << 40},
      {"0", 0, 0},
      {"512b", 0, 512},
      {"", -1, 0},
      {"Gi", -1, 0},
      {"-1g", -1, 0},
      {"0x10", -1, 0},
      {"1Gx", -1, 0},
      {"1 g b", -1, 0},
      {"1.g", -1, 0},
      {"1p", -1, 0},
      {"99999999999999999999", -1, 0},
      {"17179869184g", -1, 0},
      {"1e9", -1, 0},
      {"1Mii", -1, 0},
  };
  for (const Case& c : cases) {
    uint64_t v = 12345;
    EXPECT_EQ(vgpu_parse_mem_size(c.in, &v), c.rc) << c.in;
    if (c.rc == 0) {
      EXPECT_EQ(v, c.want) << c.in;
    }
  }
  uint64_t v;
  EXPECT_EQ(vgpu_parse_mem_size(nullptr, &v), -1);
}

TEST(VgpuEnv, PercentPolicyInt) {
  uint32_t p;
  EXPECT_EQ(vgpu_parse_percent("30", &p), 0);
  EXPECT_EQ(p, 30u);
  EXPECT_EQ(vgpu_parse_percent("100", &p), 0);
  EXPECT_EQ(vgpu_parse_percent("101", &p), -1);
  EXPECT_EQ(vgpu_parse_percent("-5", &p), -1);
  EXPECT_EQ(vgpu_parse_percent("30%", &p), -1);
  struct {
    const char* in;
    int rc;
    uint32_t want;
  } policies[] = {{"force", 0, VGPU_POLICY_FORCE},     {"FORCE", 0, VGPU_POLICY_FORCE},
                  {"disable", 0, VGPU_POLICY_DISABLE}, {"Default", 0, VGPU_POLICY_DEFAULT},
                  {"", 0, VGPU_POLICY_DEFAULT},        {"forced", -1, 0}};
  for (const auto& c : policies) {
    uint32_t v = 99;
    EXPECT_EQ(vgpu_parse_policy(c.in, &v), c.rc) << c.in;
    if (c.rc == 0) {
      EXPECT_EQ(v, c.want) << c.in;
    }
  }
  int32_t i;
  EXPECT_EQ(vgpu_parse_int("-3", &i), 0);
  EXPECT_EQ(i, -3);
  EXPECT_EQ(vgpu_parse_int("2147483648", &i), -1);
  EXPECT_EQ(vgpu_parse_int("1x", &i), -1);
}

TEST(VgpuEnv, VisibleDevices) {
  vgpu_visible_entry e[8];
  EXPECT_EQ(vgpu_parse_visible_devices("1,0", e, 8), 2);
  EXPECT_EQ(e[0].index, 1);
  EXPECT_EQ(e[1].index, 0);
  EXPECT_EQ(vgpu_parse_visible_devices("GPU-aaaa-bbbb, MIG-cccc ,3", e, 8), 3);
  EXPECT_EQ(e[0].index, -1);
  EXPECT_STREQ(e[0].id, "GPU-aaaa-bbbb");
  EXPECT_STREQ(e[1].id, "MIG-cccc");
  EXPECT_EQ(e[2].index, 3);
  EXPECT_EQ(vgpu_parse_visible_devices("0,bogus,1", e, 8), 1);  // stops at the first invalid entry
  EXPECT_EQ(vgpu_parse_visible_devices("bogus", e, 8), -1);
  EXPECT_EQ(vgpu_parse_visible_devices("0,1,2", e, 2), 2);
}

TEST(VgpuEnv, LimitsFile) {
  const std::string text =
      "# written by the device plugin\n"
      "CUDA_DEVICE_MEMORY_LIMIT_0=1024m\n"
      "  CUDA_DEVICE_SM_LIMIT = 30 \r\n"
      "\n"
      "PATH=/evil\n"                     // not a governed key
      "CUDA_DEVICE_MEMORY_LIMIT_0=8g\n"  // duplicate: the first one stays
      "no equals sign\n"
      "CUDA_DEVICE_MEMORY_LIMIT_12345=1g\n"   // index too long
      "GPU_CORE_UTILIZATION_POLICY=default";  // no final newline
  vgpu_cfg cfg;
  int first_bad = -1;
  EXPECT_EQ(vgpu_parse_limits(text.data(), text.size(), &cfg, &first_bad), 4);
  EXPECT_EQ(first_bad, 5);
  EXPECT_EQ(cfg.count, 3);
  EXPECT_STREQ(vgpu_cfg_get(&cfg, "CUDA_DEVICE_MEMORY_LIMIT_0"), "1024m");
  EXPECT_STREQ(vgpu_cfg_get(&cfg, "CUDA_DEVICE_SM_LIMIT"), "30");
  EXPECT_STREQ(vgpu_cfg_get(&cfg, "GPU_CORE_UTILIZATION_POLICY"), "default");
  EXPECT_EQ(vgpu_cfg_get(&cfg, "PATH"), nullptr);
  EXPECT_EQ(vgpu_cfg_get(&cfg, "CUDA_DEVICE_MEMORY_LIMIT"), nullptr);
  EXPECT_EQ(vgpu_parse_limits("", 0, &cfg, &first_bad), 0);
  EXPECT_EQ(cfg.count, 0);
  EXPECT_EQ(first_bad, 0);
  const std::string nul(
      "CUDA_DEVICE_SM_LIMIT=3\0"
      "0\n",
      25);
  EXPECT_EQ(vgpu_parse_limits(nul.data(), nul.size(), &cfg, &first_bad), 1);
  EXPECT_EQ(cfg.count, 0);
  std::string many;
  for (int i = 0; i < VGPU_CFG_MAX + 2; i++)
    many += "CUDA_DEVICE_SM_LIMIT_" + std::to_string(i) + "=1\n";
  EXPECT_EQ(vgpu_parse_limits(many.data(), many.size(), &cfg, &first_bad), 2);
  EXPECT_EQ(cfg.count, VGPU_CFG_MAX);
  int b = -1;
  EXPECT_EQ(vgpu_parse_bool("TRUE", &b), 0);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(vgpu_parse_bool("", &b), 0);
  EXPECT_EQ(b, 0);
  EXPECT_EQ(vgpu_parse_bool("yes", &b), -1);
}

// deviceMemoryScaling as the device plugin writes it (absl's shortest form of a double).
TEST(VgpuEnv, MemoryScalingInThousandths) {
  const struct {
    const char* in;
    int rc;
    uint32_t permille;
  } cases[] = {{"2", 0, 2000},  {"1.5", 0, 1500},     {" 1.33333 ", 0, 1333},
               {"0.5", 0, 500}, {"1000", 0, 1000000}, {"1000.001", -1, 0},
               {"1001", -1, 0}, {"0", -1, 0},         {"0.0001", -1, 0},
               {"", -1, 0},     {"2x", -1, 0},        {"-2", -1, 0},
               {"1.", -1, 0},   {".5", -1, 0},        {"99999999999999999999", -1, 0},
               {"1e3", -1, 0}};
  for (const auto& c : cases) {
    uint32_t v = 7;
    EXPECT_EQ(vgpu_parse_scaling(c.in, &v), c.rc) << c.in;
    EXPECT_EQ(v, c.rc == 0 ? c.permille : 7u) << c.in;
  }
  EXPECT_EQ(vgpu_parse_scaling(nullptr, nullptr), -1);
  const char kLine[] = "CUDA_DEVICE_MEMORY_SCALING=2\n";
  vgpu_cfg cfg;
  int first_bad = 0;
  EXPECT_EQ(vgpu_parse_limits(kLine, sizeof(kLine) - 1, &cfg, &first_bad), 0);
  ASSERT_NE(vgpu_cfg_get(&cfg, "CUDA_DEVICE_MEMORY_SCALING"), nullptr);
}

}  // namespace

// The node monitor's share lines in the limits file: what libvgpu accepts, and that a torn, forged,
// stale or foreign line is never read as a share.
TEST(VgpuEnv, ShareLines) {
  const char* kUuid = "GPU-fa4e0000-0000-4000-8000-000000000000";
  char line[256];
  ASSERT_EQ(vgpu_format_share(line, sizeof line, kUuid, 14286, 0, 5000), 86);
  EXPECT_EQ(std::string(line, 77),
            std::string("#hami-share ") + kUuid + " 0014286 0 0000000005000 ");
  const std::string good = line;
  std::string tampered = good;
  tampered[good.find(" 0014286") + 2] = '9';  // factor raised by hand, checksum left
  std::string torn = good;
  torn.replace(70, 3, "999");  // a new time half written over the old one
  char blocked[256];
  ASSERT_GT(vgpu_format_share(blocked, sizeof blocked, kUuid, 10000, 1, 5000), 0);
  char lent[256];
  ASSERT_GT(vgpu_format_share(lent, sizeof lent, kUuid, 10000, VGPU_SHARE_LENT, 5000), 0);
  std::string state3 = lent;  // a state this libvgpu does not know, with a valid checksum
  state3[state3.find(" 0000000005000") - 1] = '3';
  {
    const size_t pre = sizeof(VGPU_SHARE_PREFIX) - 1, sum = state3.size() - 9;
    char hex[16];
    uint32_t h = 2166136261u;  // FNV-1a 32, as vgpu_env.c
    for (size_t i = pre; i < sum - 1; ++i)
      h = (h ^ static_cast<unsigned char>(state3[i])) * 16777619u;
    snprintf(hex, sizeof hex, "%08x", h);
    state3.replace(sum, 8, hex);
  }
  char other[256];
  ASSERT_GT(vgpu_format_share(other, sizeof other, "GPU-other", 50000, 0, 5000), 0);
  const std::string limits = "CUDA_DEVICE_SM_LIMIT=30\nGPU_CORE_UTILIZATION_POLICY=default\n";
  struct Case {
    std::string text;
    uint64_t now_ms;
    int found;
    uint32_t factor;
    int blocked;
  } cases[] = {
      {limits + good, 5000, 1, 14286, 0},
      {limits + good, 5999, 1, 14286, 0},
      {limits + good, 6001, 0, 0, 0},                    // stale: the monitor stopped
      {limits + good, 3999, 0, 0, 0},                    // from the future
      {limits + tampered, 5000, 0, 0, 0},                // checksum
      {limits + torn, 5000, 0, 0, 0},                    // half-written
      {limits + other, 5000, 0, 0, 0},                   // another GPU's line
      {limits + other + good, 5000, 1, 14286, 0},        // its own among others
      {limits + blocked, 5000, 1, 10000, 1},             // blocked by priority
      {limits + lent, 5000, 1, 10000, VGPU_SHARE_LENT},  // idle, its time lent
      {limits + state3, 5000, 0, 0, 0},                  // unknown state
      {limits + good.substr(0, 85), 5000, 1, 14286, 0},  // no final newline
      {limits + good.substr(0, 84), 5000, 0, 0, 0},      // cut
      {limits + " " + good, 5000, 0, 0, 0},              // not at the start of a line
      {limits, 5000, 0, 0, 0},
  };
  for (const Case& c : cases) {
    uint32_t f = 0;
    int b = 0;
    EXPECT_EQ(vgpu_find_share(c.text.data(), c.text.size(), kUuid, c.now_ms, &f, &b), c.found)
        << c.text;
    if (c.found) {
      EXPECT_EQ(f, c.factor);
      EXPECT_EQ(b, c.blocked);
    }
  }
  // The limits parser skips the lines (comments).
  vgpu_cfg cfg;
  int first_bad = 0;
  std::string all = limits + good + blocked;
  EXPECT_EQ(vgpu_parse_limits(all.data(), all.size(), &cfg, &first_bad), 0);
  EXPECT_EQ(cfg.count, 2);
  // Formatting refuses what it cannot write back exactly.
  EXPECT_EQ(vgpu_format_share(line, sizeof line, kUuid, 9999, 0, 1), -1);
  EXPECT_EQ(vgpu_format_share(line, sizeof line, kUuid, 1000001, 0, 1), -1);
  EXPECT_EQ(vgpu_format_share(line, sizeof line, "GPU x", 10000, 0, 1), -1);
  EXPECT_EQ(vgpu_format_share(line, 86, kUuid, 10000, 0, 1), -1);
  EXPECT_EQ(vgpu_format_share(line, sizeof line, kUuid, 10000, 3, 1), -1);
  EXPECT_EQ(vgpu_format_share(line, sizeof line, kUuid, 10000, -1, 1), -1);
  // Effective percent: rounded, at most 100.
  struct Pct {
    uint32_t pct, factor, want;
  } pcts[] = {{20, 14286, 29},   {50, 14286, 71}, {30, 10000, 30}, {30, 33334, 100},
              {1, 1000000, 100}, {99, 10000, 99}, {70, 14285, 100}};
  for (const Pct& p : pcts) EXPECT_EQ(vgpu_share_pct(p.pct, p.factor), p.want) << p.pct;
}
