#include "monitor/feedback.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "monitor/testing/region_writer.h"
#include "vgpu/shared_region.h"
#include "vgpu/vgpu_core.h"

namespace hami::monitor {
namespace {

using testing::FakeContainerProcess;
using testing::TempDir;

// Shorthands for the table: a container of priority p / policy on devices (uuid, active).
ContainerActivity C(int32_t prio, std::vector<ContainerActivity::Device> devs,
                    uint32_t policy = VGPU_POLICY_DEFAULT) {
  ContainerActivity c;
  c.priority = prio;
  c.policy = policy;
  c.devices = std::move(devs);
  return c;
}
constexpr FeedbackDecision kFree{0, 0};     // not limited, not blocked
constexpr FeedbackDecision kLimited{1, 0};  // limited (contention), not blocked
constexpr FeedbackDecision kBlocked{1, -1};

TEST(DecideFeedback, Table) {
  struct Case {
    const char* name;
    std::vector<ContainerActivity> in;
    std::vector<FeedbackDecision> want;
  };
  const Case cases[] = {
      {"lone active container is not throttled", {C(1, {{"g0", true}})}, {kFree}},
      {"lone idle container", {C(1, {{"g0", false}})}, {kFree}},
      {"two active, same priority, same GPU: both limited",
       {C(1, {{"g0", true}}), C(1, {{"g0", true}})},
       {kLimited, kLimited}},
      {"two active, same priority, different GPUs: neither",
       {C(1, {{"g0", true}}), C(1, {{"g1", true}})},
       {kFree, kFree}},
      {"one active one idle, same GPU: neither",
       {C(1, {{"g0", true}}), C(1, {{"g0", false}})},
       {kFree, kFree}},
      {"idle container beside two active peers is limited (it would add contention)",
       {C(1, {{"g0", true}}), C(1, {{"g0", true}}), C(1, {{"g0", false}})},
       {kLimited, kLimited, kLimited}},
      {"high priority active blocks and limits the low one; high runs free",
       {C(0, {{"g0", true}}), C(1, {{"g0", true}})},
       {kFree, kBlocked}},
      {"idle high priority blocks nobody",
       {C(0, {{"g0", false}}), C(1, {{"g0", true}})},
       {kFree, kFree}},
      {"high priority on another GPU blocks nobody",
       {C(0, {{"g1", true}}), C(1, {{"g0", true}})},
       {kFree, kFree}},
      {"multi-GPU container: blocked through any of its GPUs",
       {C(0, {{"g1", true}}), C(1, {{"g0", true}, {"g1", false}})},
       {kFree, kBlocked}},
      {"two high priority active: both limited, low blocked",
       {C(0, {{"g0", true}}), C(0, {{"g0", true}}), C(1, {{"g0", true}})},
       {kLimited, kLimited, kBlocked}},
      {"policy force is always switched on", {C(1, {{"g0", true}}, VGPU_POLICY_FORCE)}, {kLimited}},
      {"policy disable still counts as a contender",
       {C(1, {{"g0", true}}, VGPU_POLICY_DISABLE), C(1, {{"g0", true}})},
       {kLimited, kLimited}},
      {"a GPU listed twice counts the container once",
       {C(1, {{"g0", true}, {"g0", true}})},
       {kFree}},
      {"priorities beyond 0/1 order by number",
       {C(2, {{"g0", true}}), C(5, {{"g0", true}})},
       {kFree, kBlocked}},
      {"no containers", {}, {}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DecideFeedback(c.in), c.want) << c.name;
  }
}

TEST(DeviceActive, Table) {
  constexpr int64_t kS = 1'000'000'000;
  struct Case {
    const char* name;
    uint64_t last_launch_ns;
    int64_t now;
    uint32_t sm_pct;
    bool active;
  };
  const Case cases[] = {
      {"never launched, NVML idle", 0, 100 * kS, 0, false},
      {"never launched through the limiter, NVML busy", 0, 100 * kS, 7, true},
      {"launch within the window", 96 * kS, 100 * kS, 0, true},
      {"launch exactly one window ago", 95 * kS, 100 * kS, 0, true},
      {"launch older than the window", 94 * kS, 100 * kS, 0, false},
      {"launch from the future (clock skew beyond a window) is ignored", 200 * kS, 100 * kS, 0,
       false},
  };
  for (const Case& c : cases) {
    RegionDevice d;
    d.last_launch_ns = c.last_launch_ns;
    EXPECT_EQ(DeviceActive(d, c.now, 5 * kS, c.sm_pct), c.active) << c.name;
  }
}

TEST(ContainerSmPercent, MatchesHostPidsAndClamps) {
  std::vector<RegionProcess> procs = {{0, 10, 1010, 1}, {1, 11, 0, 1}};
  EXPECT_EQ(ContainerSmPercent(procs, {{1010, 30}, {11, 20}, {999, 50}}), 50u);
  EXPECT_EQ(ContainerSmPercent(procs, {{10, 30}}), 0u);  // pid 10 is known by its host pid 1010
  EXPECT_EQ(ContainerSmPercent(procs, {{1010, 80}, {11, 70}}), 100u);
  EXPECT_EQ(ContainerSmPercent({}, {{1010, 80}}), 0u);
}

TEST(ContainerSmPercent, RowsAreTiedToTheContainerByItsOpenRegionFile) {
  // A fake /proc: host PID 4242 has container A's region open, 5151 has B's, 7 is container B's own
  // process seen with a PID that collides with A's slot PID; 9999 has no /proc entry.
  TempDir root;
  auto a = FakeContainerProcess::Attach(root.path(), "uid-a", "main");
  auto b = FakeContainerProcess::Attach(root.path(), "uid-b", "main");
  ASSERT_TRUE(a.ok() && b.ok());
  auto ra = MappedRegion::Open((*a)->path());
  auto rb = MappedRegion::Open((*b)->path());
  ASSERT_TRUE(ra.ok() && rb.ok());
  const std::string proc = root.path() + "/proc";
  auto link = [&](int pid, const std::string& target) {
    std::filesystem::create_directories(proc + "/" + std::to_string(pid) + "/fd");
    std::filesystem::create_symlink(target, proc + "/" + std::to_string(pid) + "/fd/3");
  };
  link(4242, (*a)->path());
  link(5151, (*b)->path());
  link(7, (*b)->path());
  std::vector<RegionProcess> slots_a = {{0, 7, 0, 1}};  // container A's process is PID 7 inside A
  std::vector<ProcessUtil> rows = {{4242, 30}, {5151, 20}, {7, 15}, {9999, 5}};
  ProcessFiles files(proc);
  EXPECT_EQ(files.HasOpen(4242, (*ra)->device(), (*ra)->inode()), true);
  EXPECT_EQ(files.HasOpen(5151, (*ra)->device(), (*ra)->inode()), false);
  EXPECT_EQ(files.HasOpen(9999, (*ra)->device(), (*ra)->inode()), std::nullopt);
  // A: 4242 (file open). Not 7 (same number as A's slot, but /proc says it is B's), not 5151; 9999
  // has no /proc entry and matches no slot.
  EXPECT_EQ(ContainerSmPercent(slots_a, rows, &files, ra->get()), 30u);
  EXPECT_EQ(ContainerSmPercent({}, rows, &files, rb->get()), 35u);  // 5151 + 7
  // Without /proc the PID rule applies (here: the colliding PID 7 is wrongly counted for A).
  EXPECT_EQ(ContainerSmPercent(slots_a, rows), 15u);
}

TEST(FeedbackLoop, WritesDecisionsIntoRegionsAndReleasesThem) {
  TempDir root;
  FakeClock clock;
  clock.AdvanceSeconds(1000);
  const uint64_t now = static_cast<uint64_t>(clock.MonotonicNanos());
  auto hi = FakeContainerProcess::Attach(root.path(), "uid-hi", "main", VGPU_POLICY_DEFAULT, 0);
  auto lo = FakeContainerProcess::Attach(root.path(), "uid-lo", "main", VGPU_POLICY_DEFAULT, 1);
  auto solo = FakeContainerProcess::Attach(root.path(), "uid-solo", "main", VGPU_POLICY_DEFAULT, 1);
  ASSERT_TRUE(hi.ok() && lo.ok() && solo.ok());
  (*hi)->Device({"GPU-0", 0, 50, 0});
  (*lo)->Device({"GPU-0", 0, 50, 0});
  (*solo)->Device({"GPU-1", 0, 50, 0});
  (*lo)->StampLaunch(0, now - 1'000'000'000);  // active through the limiter's stamp
  (*solo)->StampLaunch(0, now);
  StaticTelemetry telemetry;  // hi is active through NVML (its switch may be off: no stamps)
  telemetry.SetProcessUtil("GPU-0", {{static_cast<uint32_t>(getpid()), 40}});

  RegionStore store({root.path(), 300, 16}, clock);
  FeedbackLoop loop(store, telemetry, clock, 5'000'000'000);
  FeedbackStats s = loop.Tick();
  EXPECT_EQ(s.containers, 3);
  EXPECT_EQ(s.errors, 0);
  // All three processes are this test process, so NVML's row makes every container on GPU-0 active:
  // hi (priority 0) runs free, lo is blocked; solo is alone on GPU-1.
  EXPECT_EQ((*hi)->region()->hdr.utilization_switch, 0);
  EXPECT_EQ((*hi)->region()->hdr.recent_kernel, 0);
  EXPECT_EQ((*lo)->region()->hdr.utilization_switch, 1);
  EXPECT_EQ((*lo)->region()->hdr.recent_kernel, -1);
  EXPECT_EQ((*solo)->region()->hdr.utilization_switch, 0);
  EXPECT_EQ(s.blocked, 1);
  EXPECT_EQ(s.switched_on, 1);

  // hi goes quiet: NVML sees nothing, lo's stamp ages out of the window.
  telemetry.SetProcessUtil("GPU-0", {});
  clock.AdvanceSeconds(10);
  loop.Tick();
  EXPECT_EQ((*lo)->region()->hdr.recent_kernel, 0);
  EXPECT_EQ((*lo)->region()->hdr.utilization_switch, 0);

  loop.Release();
  for (auto* p : {&*hi, &*lo, &*solo}) {
    EXPECT_EQ((*p)->region()->hdr.utilization_switch, 1);
    EXPECT_EQ((*p)->region()->hdr.recent_kernel, 0);
  }
}

}  // namespace
}  // namespace hami::monitor

namespace hami::monitor {
namespace {

// Work-conserving shares: a container of priority p / policy with (uuid, trusted limit, busy).
ShareInput S(int32_t prio, std::vector<ShareInput::Device> devs,
             uint32_t policy = VGPU_POLICY_DEFAULT, bool armed = true) {
  ShareInput c;
  c.priority = prio;
  c.policy = policy;
  c.armed = armed;
  c.devices = std::move(devs);
  return c;
}
ShareDecision F(std::vector<uint32_t> f, bool blocked = false) {
  return {blocked, std::move(f)};
}

TEST(DecideShares, Table) {
  struct Case {
    const char* name;
    std::vector<ShareInput> in;
    std::vector<ShareDecision> want;
    std::set<std::string> unexplained = {};
  };
  const Case cases[] = {
      {"30/70 both busy: their limits",
       {S(1, {{"g0", 30, true}}), S(1, {{"g0", 70, true}})},
       {F({10000}), F({10000})}},
      {"20/30/50, the 30 idle: the busy two split its time (28.6/71.4)",
       {S(1, {{"g0", 20, true}}), S(1, {{"g0", 30, false}}), S(1, {{"g0", 50, true}})},
       {F({14285}), F({10000}), F({14285})}},
      {"alone: the whole GPU (30 x 3.33)", {S(1, {{"g0", 30, true}})}, {F({33333})}},
      {"a 1 % container alone: factor at most 100", {S(1, {{"g0", 1, true}})}, {F({1000000})}},
      {"idle alone: its limit, so that it starts at its share",
       {S(1, {{"g0", 30, false}})},
       {F({10000})}},
      {"limits over 100 %: each keeps its limit",
       {S(1, {{"g0", 60, true}}), S(1, {{"g0", 70, true}})},
       {F({10000}), F({10000})}},
      {"force holds its limit, default takes the rest (70 -> 100 - 20 = 80)",
       {S(1, {{"g0", 20, true}}, VGPU_POLICY_FORCE), S(1, {{"g0", 70, true}})},
       {F({10000}), F({11428})}},
      {"busy high priority: alone among its class, the low one blocked",
       {S(0, {{"g0", 30, true}}), S(1, {{"g0", 70, true}})},
       {F({33333}), F({10000}, true)}},
      {"idle high priority blocks nobody",
       {S(0, {{"g0", 30, false}}), S(1, {{"g0", 70, true}})},
       {F({10000}), F({14285})}},
      {"a busy container without limit (none, disable, not armed) leaves factor 1",
       {S(1, {{"g0", 100, true}}), S(1, {{"g0", 30, true}})},
       {F({10000}), F({10000})}},
      {"busy disable",
       {S(1, {{"g0", 30, true}}, VGPU_POLICY_DISABLE), S(1, {{"g0", 30, true}})},
       {F({10000}), F({10000})}},
      {"busy not armed",
       {S(1, {{"g0", 10, true}}, VGPU_POLICY_DEFAULT, false), S(1, {{"g0", 30, true}})},
       {F({10000}), F({10000})}},
      {"idle not armed: no effect",
       {S(1, {{"g0", 10, false}}, VGPU_POLICY_DEFAULT, false), S(1, {{"g0", 30, true}})},
       {F({10000}), F({33333})}},
      {"unexplained device time on the GPU: factor 1",
       {S(1, {{"g0", 30, true}})},
       {F({10000})},
       {"g0"}},
      {"per GPU: busy on g0 with a neighbour, alone on g1",
       {S(1, {{"g0", 50, true}, {"g1", 50, true}}), S(1, {{"g0", 25, true}})},
       {F({13333, 20000}), F({13333})}},
      {"blocked on one GPU: factor 1 everywhere",
       {S(1, {{"g0", 50, true}, {"g1", 50, true}}), S(0, {{"g0", 25, true}})},
       {F({10000, 10000}, true), F({40000})}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DecideShares(c.in, c.unexplained), c.want) << c.name;
  }
}

// An idle container's time is lent (its line says so and libvgpu banks none of it) only where a
// busy container on the same GPU gets more than its limit.
TEST(LentDevices, Table) {
  struct Case {
    const char* name;
    std::vector<ShareInput> in;
    std::vector<std::vector<bool>> want;
    std::set<std::string> unexplained = {};
  };
  const Case cases[] = {
      {"30 idle, 70 busy: the 70 takes the GPU, the 30's time is lent",
       {S(1, {{"g0", 30, false}}), S(1, {{"g0", 70, true}})},
       {{true}, {false}}},
      {"both busy: nothing lent",
       {S(1, {{"g0", 30, true}}), S(1, {{"g0", 70, true}})},
       {{false}, {false}}},
      {"idle alone: nobody takes its time", {S(1, {{"g0", 30, false}})}, {{false}}},
      {"a busy container of unknown share holds everyone at factor 1: nothing lent",
       {S(1, {{"g0", 30, false}}), S(1, {{"g0", 70, true}}), S(1, {{"g0", 10, true}}, 0, false)},
       {{false}, {false}, {false}}},
      {"unexplained device time: nothing lent",
       {S(1, {{"g0", 30, false}}), S(1, {{"g0", 70, true}})},
       {{false}, {false}},
       {"g0"}},
      {"per GPU: idle on g1 where the other is busy, idle on g0 where nobody is",
       {S(1, {{"g0", 50, false}, {"g1", 50, false}}), S(1, {{"g1", 25, true}})},
       {{false, true}, {false}}},
      {"force neighbour busy alone (factor 1): nothing lent",
       {S(1, {{"g0", 30, false}}), S(1, {{"g0", 70, true}}, VGPU_POLICY_FORCE)},
       {{false}, {false}}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(LentDevices(c.in, DecideShares(c.in, c.unexplained)), c.want) << c.name;
  }
}

// NVML's samples by period: the share loop polls every 100 ms; each sample counts once, for the
// span from the newest stamp already counted to its own (at most max(window, period)).
TEST(SampleSpans, EachSampleCountsItsOwnSpanOnce) {
  constexpr uint64_t kWindow = 200'000, kT0 = 1'000'000'000;
  struct Poll {
    uint64_t now_us;
    uint64_t newest_us;  // the newest stamp NVML returns for `since`, 0 = none newer (NOT_FOUND)
    uint64_t want_since, want_span;
  };
  struct Case {
    const char* name;
    std::vector<Poll> polls;
    uint64_t want_period;
  };
  const Case cases[] = {
      {"a driver's 200 ms periods, polled every 100 ms: each period once, 200 ms",
       {{kT0 + 50'000, kT0, kT0 + 50'000 - kWindow, 150'000},  // first: the window's part
        {kT0 + 150'000, 0, kT0, 0},
        {kT0 + 250'000, kT0 + 200'000, kT0, 200'000},
        {kT0 + 350'000, 0, kT0 + 200'000, 0},
        {kT0 + 450'000, kT0 + 400'000, kT0 + 200'000, 200'000}},
       200'000},
      {"a library that averages, stamped with each call: the interval",
       {{kT0, kT0, kT0 - kWindow, kWindow},
        {kT0 + 100'000, kT0 + 100'000, kT0, 100'000},
        {kT0 + 230'000, kT0 + 230'000, kT0 + 100'000, 130'000}},
       100'000},
      {"a period handed out again 0.2 ms later: counted once, not twice",
       {{kT0 + 10'000, kT0, kT0 + 10'000 - kWindow, 190'000},
        {kT0 + 110'000, kT0 + 200, kT0, 200},
        {kT0 + 210'000, kT0 + 200'000, kT0 + 200, 199'800}},
       199'800},
      {"after a silence of over 2 s: the window back, not the silence",
       {{kT0, kT0, kT0 - kWindow, kWindow},
        {kT0 + 3'000'000, kT0 + 2'900'000, kT0 + 3'000'000 - kWindow, 100'000}},
       0},
      {"samples missed for a second: at most max(window, period)",
       {{kT0, kT0, kT0 - kWindow, kWindow},
        {kT0 + 200'000, kT0 + 200'000, kT0, 200'000},
        {kT0 + 1'200'000, kT0 + 1'200'000, kT0 + 200'000, 200'000}},
       200'000},
  };
  for (const Case& c : cases) {
    SampleSpans spans;
    for (size_t i = 0; i < c.polls.size(); ++i) {
      const Poll& p = c.polls[i];
      const uint64_t since = spans.Since(p.now_us, kWindow);
      EXPECT_EQ(since, p.want_since) << c.name << ", poll " << i;
      EXPECT_EQ(spans.Count(since, p.newest_us, kWindow), p.want_span) << c.name << ", poll " << i;
    }
    EXPECT_EQ(spans.period_us(), c.want_period) << c.name;
  }
}

// Policing per sample span. Under time-slicing a driver's 200 ms period goes wholly to one process
// (99 %): two 50 % containers alternating periods each use their share and neither is blocked
// (policed per poll window, each period at 99 % looked like twice its share). A container over its
// share is blocked once it owes more than a period and until it has repaid it.
TEST(SharePolice, ChargesEachPeriodAgainstTheFactorOfItsTime) {
  constexpr int64_t kMs = 1'000'000, kPeriod = 200 * kMs;
  {
    SharePolice a, b;
    for (int i = 0; i < 50; ++i) {
      const int64_t from = i * kPeriod, to = from + kPeriod;
      a.Decided(to, VGPU_SHARE_FACTOR_ONE);
      b.Decided(to, VGPU_SHARE_FACTOR_ONE);
      EXPECT_FALSE(a.Charge(from, to, i % 2 ? 0 : 99, 50, kPeriod)) << "period " << i;
      EXPECT_FALSE(b.Charge(from, to, i % 2 ? 99 : 0, 50, kPeriod)) << "period " << i;
      EXPECT_FALSE(a.blocked() || b.blocked()) << "period " << i;
      EXPECT_LE(std::max(a.debt_ns(), b.debt_ns()), kPeriod) << "period " << i;
    }
  }
  {
    SharePolice p;  // 30 %, at 99 % every period: 136 ms owed per period
    p.Decided(kPeriod, VGPU_SHARE_FACTOR_ONE);
    EXPECT_FALSE(p.Charge(0, kPeriod, 99, 30, kPeriod));
    EXPECT_EQ(p.debt_ns(), 136 * kMs);
    p.Decided(2 * kPeriod, VGPU_SHARE_FACTOR_ONE);
    EXPECT_TRUE(p.Charge(kPeriod, 2 * kPeriod, 99, 30, kPeriod)) << "owes 272 ms: blocked";
    EXPECT_EQ(p.last_allowed_pct(), 31u);
    int idle = 0;
    for (int64_t t = 2 * kPeriod; p.blocked(); t += kPeriod, ++idle) {
      p.Decided(t + kPeriod, VGPU_SHARE_FACTOR_ONE);
      p.Charge(t, t + kPeriod, 0, 30, kPeriod);  // repays 62 ms per period
    }
    EXPECT_EQ(idle, 5);
  }
  {
    // A 30 % container alone (factor 3.33) takes a whole period; its neighbour is back 50 ms
    // after the period ended and its factor drops to 1 before the sample arrives (the next poll):
    // the period is charged at the factor of its own time, not at the one of the poll.
    SharePolice p;
    for (int64_t t = 0; t <= kPeriod; t += 100 * kMs) p.Decided(t, 33'333);
    p.Decided(kPeriod + 100 * kMs, VGPU_SHARE_FACTOR_ONE);
    p.Decided(kPeriod + 200 * kMs, VGPU_SHARE_FACTOR_ONE);
    EXPECT_FALSE(p.Charge(0, kPeriod, 99, 30, kPeriod));
    EXPECT_EQ(p.debt_ns(), 0);
    EXPECT_EQ(p.last_allowed_pct(), 101u);
  }
}

// The trusted side: share and priority from the device plugin's limits file, and the lines written
// in place after its content (rewritten, never growing).
TEST(ShareLines, TrustedLimitsAndInPlaceWrites) {
  TempDir tmp;
  const std::string path = tmp.path() + "/uid_main.limits";
  const std::string plugin =
      "# libvgpu limits\nCUDA_DEVICE_SM_LIMIT=30\nCUDA_DEVICE_SM_LIMIT_1=40\n"
      "CUDA_TASK_PRIORITY=0\nGPU_CORE_UTILIZATION_POLICY=force\n";
  EXPECT_FALSE(ReadTrustedLimits(path).found);
  EXPECT_FALSE(WriteShareLines(path, "x\n")) << "no limits file: not armed";
  { std::ofstream(path) << plugin; }
  TrustedLimits t = ReadTrustedLimits(path);
  EXPECT_TRUE(t.found);
  EXPECT_EQ(t.max_sm_pct, 40u);
  EXPECT_EQ(t.priority, 0);
  EXPECT_EQ(t.policy, VGPU_POLICY_FORCE);
  auto read = [&] {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  char a[256], b[256];
  ASSERT_GT(vgpu_format_share(a, sizeof a, "GPU-a", 14285, 0, 1000), 0);
  ASSERT_GT(vgpu_format_share(b, sizeof b, "GPU-b", 10000, 1, 1000), 0);
  ASSERT_TRUE(WriteShareLines(path, std::string(a) + b));
  EXPECT_EQ(read(), plugin + a + b);
  ASSERT_GT(vgpu_format_share(a, sizeof a, "GPU-a", 20000, 0, 2000), 0);
  ASSERT_TRUE(WriteShareLines(path, std::string(a) + b));
  EXPECT_EQ(read(), plugin + a + b) << "rewritten in place";
  ASSERT_TRUE(WriteShareLines(path, a));
  EXPECT_EQ(read(), plugin + a) << "a GPU gone: shorter";
  EXPECT_EQ(ReadTrustedLimits(path).max_sm_pct, 40u) << "the lines are comments";
  uint32_t f = 0;
  int blocked = 0;
  const std::string text = read();
  EXPECT_EQ(vgpu_find_share(text.data(), text.size(), "GPU-a", 2000, &f, &blocked), 1);
  EXPECT_EQ(f, 20000u);
  // A file without a final newline gets one before the lines.
  { std::ofstream(path) << "CUDA_DEVICE_SM_LIMIT=30"; }
  ASSERT_TRUE(WriteShareLines(path, a));
  EXPECT_EQ(read(), std::string("CUDA_DEVICE_SM_LIMIT=30\n") + a);
  ASSERT_TRUE(WriteShareLines(path, a));
  EXPECT_EQ(read(), std::string("CUDA_DEVICE_SM_LIMIT=30\n") + a);
}

}  // namespace
}  // namespace hami::monitor
