// Prints the exporter's output for a small node (two GPUs, three containers written through
// libvgpu's region code, one pod unknown) on stdout: the input of the `promtool check metrics`
// test and of the dashboard check (dashboard_check.py).
#include <unistd.h>

#include <cstdio>

#include "monitor/exporter.h"
#include "monitor/testing/region_writer.h"
#include "vgpu/shared_region.h"

int main() {
  using namespace hami;
  using namespace hami::monitor;
  constexpr uint64_t kMiB = 1ull << 20;
  testing::TempDir root;
  FakeClock clock;
  clock.AdvanceSeconds(100);
  auto a =
      testing::FakeContainerProcess::Attach(root.path(), "uid-a", "main", VGPU_POLICY_DEFAULT, 0);
  auto b =
      testing::FakeContainerProcess::Attach(root.path(), "uid-b", "worker", VGPU_POLICY_FORCE, 1);
  auto c = testing::FakeContainerProcess::Attach(root.path(), "uid-gone", "main");
  if (!a.ok() || !b.ok() || !c.ok()) {
    std::fprintf(stderr, "cannot create regions\n");
    return 1;
  }
  (*a)->Device({"GPU-0000", 3000 * kMiB, 30, 0});
  (*a)->Device({"GPU-1111", 2000 * kMiB, 30, 1});
  (*a)->Reserve(0, 1200 * kMiB);
  (*a)->StampLaunch(0, static_cast<uint64_t>(clock.MonotonicNanos()) - 1'000'000'000, 42'000'000);
  (*b)->Device({"GPU-0000", 0, 100, 0});
  (*b)->Reserve(0, 64 * kMiB);
  (*c)->Device({"GPU-1111", 0, 100, 0});

  StaticTelemetry telemetry;
  // The first GPU with temperature, power and ECC counts, the second without (no such series).
  telemetry.SetDevices(
      {{0, "GPU-0000", "NVIDIA A100-SXM4-80GB", 80ull << 30, 1300 * kMiB, 55, 20, 47, 93500, 2, 0},
       {1, "GPU-1111", "NVIDIA A100-SXM4-80GB", 80ull << 30, 0, 0, 0}});
  telemetry.SetProcessUtil("GPU-0000", {{static_cast<uint32_t>(getpid()), 55}});
  StaticPodDirectory pods;
  pods.Set("uid-a", {"team-a", "train-0"});
  pods.Set("uid-b", {"team-b", "serve \"quoted\"\\pod"});
  RegionStore store({root.path(), 300, 16}, clock);
  Exporter exporter({"node-1", CurrentBuildInfo(), 1000}, store, pods, telemetry, clock);
  // Two scrapes 10 s apart, the second printed: the duty ratio (hami_container_device_busy_ratio)
  // needs the previous scrape's mark (container a was busy 4.2 s of the 10).
  (void)exporter.Render();
  clock.AdvanceSeconds(10);
  (*a)->StampLaunch(0, static_cast<uint64_t>(clock.MonotonicNanos()) - 1'000'000'000, 0, 4200);
  std::fputs(exporter.Render().c_str(), stdout);
  return 0;
}
