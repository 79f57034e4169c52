// Scrape time of `hami monitor` for a node with N containers' regions (written through libvgpu's
// own region code, each with its processes alive), 8 GPUs and per-process utilisation rows: the
// full Render() path (rescan of the region root, snapshots with liveness checks, labels, text
// format). Usage: monitor_scrape_bench [containers=100] [procs_per_container=2] [scrapes=2000]
// [metered=1]. metered=1: the regions are metered as libvgpu (layout v5) meters an armed container
// (hdr.metered_mask), so that from the second scrape on the per-container utilisation comes from
// the busy meter; metered=0: regions without SM limit and not metered (older libvgpu, unarmed),
// from NVML's per-process rows (one /proc/<pid>/fd read per reported process) as every region was
// before the meter. The fake clock advances 2.5 s per scrape.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "monitor/exporter.h"
#include "monitor/feedback.h"
#include "monitor/testing/region_writer.h"

int main(int argc, char** argv) {
  using namespace hami;
  using namespace hami::monitor;
  const int containers = argc > 1 ? std::atoi(argv[1]) : 100;
  const int procs = argc > 2 ? std::atoi(argv[2]) : 2;
  const int scrapes = argc > 3 ? std::atoi(argv[3]) : 2000;
  const bool metered = argc > 4 ? std::atoi(argv[4]) != 0 : true;
  constexpr int kGpus = 8;
  constexpr uint64_t kMiB = 1ull << 20;

  testing::TempDir root;
  FakeClock clock;
  clock.AdvanceSeconds(1000);
  StaticPodDirectory pods;
  StaticTelemetry telemetry;
  std::vector<HostGpu> gpus;
  for (int g = 0; g < kGpus; ++g) {
    gpus.push_back({g, "GPU-bench-" + std::to_string(g), "NVIDIA A100-SXM4-80GB", 80ull << 30,
                    1000 * kMiB, 50, 10});
    telemetry.SetProcessUtil(gpus.back().uuid,
                             {{static_cast<uint32_t>(getpid()), 30}, {12345, 20}});
  }
  telemetry.SetDevices(gpus);
  std::vector<std::unique_ptr<testing::FakeContainerProcess>> live;
  for (int c = 0; c < containers; ++c) {
    std::string uid = "pod-" + std::to_string(c);
    pods.Set(uid, {"ns-" + std::to_string(c % 10), "pod-" + std::to_string(c)});
    for (int p = 0; p < procs; ++p) {
      auto proc = testing::FakeContainerProcess::Attach(root.path(), uid, "main", 0, c % 2);
      if (!proc.ok()) {
        std::fprintf(stderr, "attach: %s\n", std::string(proc.status().message()).c_str());
        return 1;
      }
      // Not metered: no SM limit either (a limited device's controller meters it).
      int e = (*proc)->Device({gpus[c % kGpus].uuid, 4000 * kMiB, metered ? 30u : 100u, 0});
      (*proc)->Reserve(e, (100 + c) * kMiB);
      (*proc)->StampLaunch(e, static_cast<uint64_t>(clock.MonotonicNanos()) - 1'000'000'000);
      if (metered) (*proc)->region()->hdr.metered_mask = 1u << e;
      live.push_back(std::move(*proc));
    }
  }
  RegionStore store({root.path(), 300, 16}, clock);
  Exporter exporter({"node-1", CurrentBuildInfo(), 1000}, store, pods, telemetry, clock);
  FeedbackLoop loop(store, telemetry, clock, 5'000'000'000);

  size_t bytes = exporter.Render().size();  // warm-up: maps every region
  std::vector<double> us;
  us.reserve(static_cast<size_t>(scrapes));
  for (int i = 0; i < scrapes; ++i) {
    clock.AdvanceNanos(2'500'000'000);
    auto t0 = std::chrono::steady_clock::now();
    bytes = exporter.Render().size();
    auto t1 = std::chrono::steady_clock::now();
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::vector<double> tick_us;
  for (int i = 0; i < std::max(1, scrapes / 10); ++i) {
    auto t0 = std::chrono::steady_clock::now();
    loop.Tick();
    auto t1 = std::chrono::steady_clock::now();
    tick_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  auto pct = [](std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  };
  std::printf("containers=%d procs_per_container=%d scrapes=%d metered=%d exposition_bytes=%zu\n",
              containers, procs, scrapes, metered ? 1 : 0, bytes);
  std::printf("scrape_us p50=%.1f p99=%.1f max=%.1f\n", pct(us, 0.5), pct(us, 0.99), pct(us, 1.0));
  std::printf("feedback_tick_us p50=%.1f p99=%.1f\n", pct(tick_us, 0.5), pct(tick_us, 0.99));
  return 0;
}
