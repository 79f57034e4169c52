#pragma once
// The utilisation/priority feedback loop (upstream HAMi's vGPUmonitor feedback, same meaning of the
// region's two feedback fields; see vgpu/shared_region.h):
//  - per GPU, count the containers active on it, per priority (lower number = higher priority);
//  - a container is blocked (recent_kernel = -1: libvgpu makes its launches wait, bounded) while a
//    container of higher priority is active on one of its GPUs; otherwise recent_kernel = 0;
//  - utilization_switch = 1 (apply the SM limit under policy "default") only under contention: a
//    higher-priority container is active on one of its GPUs, or two or more containers of its own
//    priority are (itself included). A lone container is therefore not throttled under "default";
//    policy "force" always gets 1 (libvgpu limits it anyway, the field then says so truthfully).
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "monitor/gpu_telemetry.h"
#include "monitor/region_store.h"

namespace hami::monitor {

struct ContainerActivity {
  int32_t priority = 1;
  uint32_t policy = 0;  // VGPU_POLICY_*
  struct Device {
    std::string uuid;
    bool active = false;
  };
  std::vector<Device> devices;
};

struct FeedbackDecision {
  int32_t utilization_switch = 1;
  int32_t recent_kernel = 0;
  bool operator==(const FeedbackDecision&) const = default;
};

// One decision per input container, in input order. Pure.
std::vector<FeedbackDecision> DecideFeedback(const std::vector<ContainerActivity>& containers);

// Whether a container used device `d` recently: a launch through libvgpu's limiter within
// `window_ns` of `now_mono_ns` (both CLOCK_MONOTONIC, shared by the host and its containers), or
// NVML saw one of its processes keep the SMs busy (`sm_pct` > 0) in the window. The NVML signal
// matters because libvgpu only stamps launches while it limits, i.e. not for a container whose
// switch is off.
bool DeviceActive(const RegionDevice& d, int64_t now_mono_ns, int64_t window_ns, uint32_t sm_pct);

// Which files the processes NVML reports (host PIDs) have open, from <proc>/<pid>/fd. This is how a
// row is tied to a container: every libvgpu process keeps its container's region file open (it
// holds its liveness lock on it), while the PIDs in the region are those of the container's PID
// namespace (and container PIDs repeat across containers). Caches per PID: use one instance per
// tick or scrape.
class ProcessFiles {
 public:
  explicit ProcessFiles(std::string proc_root = "/proc") : proc_root_(std::move(proc_root)) {}
  // nullopt when <proc>/<pid>/fd cannot be read (not our PID namespace, no permission, exited).
  std::optional<bool> HasOpen(uint32_t pid, uint64_t device, uint64_t inode);

 private:
  std::string proc_root_;
  std::map<uint32_t, std::optional<std::set<std::pair<uint64_t, uint64_t>>>> cache_;
};

// Sum of the container's processes' SM use on one device from NVML's per-process rows, clamped to
// 100. A row belongs to the container when its process has the container's region file open
// (`files`); where that cannot be checked, when its PID equals a slot's host PID (or PID when the
// host PID is unknown).
uint32_t ContainerSmPercent(const std::vector<RegionProcess>& procs,
                            const std::vector<ProcessUtil>& rows, ProcessFiles* files = nullptr,
                            const MappedRegion* region = nullptr);

// When each container was last seen busy on each GPU (CLOCK_MONOTONIC ns), recorded by the feedback
// loop and by scrapes from NVML's per-process samples. libvgpu stamps `last_launch_ns` only on its
// limiting path, so without this hami_container_last_kernel_elapsed_seconds would vanish for an
// unthrottled container. Resolution: the feedback interval. Thread-safe.
class ActivityLog {
 public:
  void Saw(const std::string& dir, const std::string& uuid, int64_t mono_ns);
  // 0 = never seen busy.
  int64_t LastSeen(const std::string& dir, const std::string& uuid) const;
  // Drops the entries of directories not in `live` (containers that are gone).
  void Retain(const std::vector<ContainerRegion>& live);

 private:
  mutable Mutex mu_;
  std::map<std::pair<std::string, std::string>, int64_t> last_ ABSL_GUARDED_BY(mu_);
};

// ---- Work-conserving shares (issue 33). A container's SM limit (gpucores) is its guaranteed share
// under contention; the busy containers of a GPU split the idle time in proportion to their shares,
// and a container alone gets the whole GPU. The monitor decides, per container and GPU, a factor
// (1/10000; 10000 = its limit) that libvgpu multiplies its own limit by, and writes it into the
// container's limits file, which the container sees read-only (vgpu_core.h, "#hami-share" lines).
// Nothing a container can write raises its own factor: its share and priority are read from the
// device plugin's limits file, and it is busy when libvgpu counted launches for it in its region or
// NVML saw its processes on the GPU (claiming to be busy only lowers the others' factor, never
// below 1).
struct ShareInput {
  int32_t priority = 1;  // 0 = high
  uint32_t policy = 0;   // VGPU_POLICY_*
  // Not armed (no limits file): its share is unknown; while busy it counts as the whole GPU.
  bool armed = true;
  struct Device {
    std::string uuid;
    uint32_t share_pct = 0;  // the trusted SM limit; 0 or 100 = none (counts as the whole GPU)
    bool busy = false;
  };
  std::vector<Device> devices;
};

struct ShareDecision {
  bool blocked = false;          // a busy container of higher priority shares one of its GPUs
  std::vector<uint32_t> factor;  // per input device, 1/10000, >= 10000
  bool operator==(const ShareDecision&) const = default;
};

// Pure. Per GPU, among the busy containers of the highest busy priority: those under policy
// "default" with a limit get factor (100 - what "force" ones hold) / (sum of their limits), at
// least 1, at most 100; everyone else 1 (idle containers: 1, so that they come back at their share;
// lower priorities are blocked). A busy container without a known limit (not armed, none,
// "disable"), or `unexplained` device time on the GPU (NVML rows of no container), leave the GPU's
// factor at 1.
std::vector<ShareDecision> DecideShares(const std::vector<ShareInput>& containers,
                                        const std::set<std::string>& unexplained = {});

// Per container and device (as `containers` and `decisions` of DecideShares): whether the device's
// time is lent, i.e. the container is idle on a GPU where a busy container got a factor above 1.
// Its line then says so (VGPU_SHARE_LENT) and libvgpu banks none of that idle time: it comes back
// with at most the default burst beyond its share (vgpu_limiter_lent), not with what it gathered
// while its neighbours used the same time.
std::vector<std::vector<bool>> LentDevices(const std::vector<ShareInput>& containers,
                                           const std::vector<ShareDecision>& decisions);

// The share lines of one container, written in place at the end of its limits file (the device
// plugin's `<root>/<dir>.limits`, mounted read-only into the container): one per GPU. Returns false
// when the file cannot be written (no file: the container is not armed).
bool WriteShareLines(const std::string& limits_path, const std::string& lines);

// The trusted values of a limits file (KEY=VALUE lines) a share decision needs.
struct TrustedLimits {
  bool found = false;
  uint32_t max_sm_pct = 0;  // the highest CUDA_DEVICE_SM_LIMIT(_<i>), 0 = none set
  int32_t priority = 1;
  uint32_t policy = 0;
};
TrustedLimits ReadTrustedLimits(const std::string& limits_path);

// ---- NVML's samples by period (docs/design.md, "How the monitor accounts NVML's periods"). A
// driver samples per-process utilisation in periods (200 ms on an H200) and stamps each sample with
// its period's end; a library that averages stamps its reading with the call. The share loop polls
// every 100 ms: it asks for the samples newer than the newest stamp it counted on the device and
// weights them by the span from that stamp to theirs, so that each period counts once, by its own
// length and at its own place in time, whatever the poll interval. Per device; not thread-safe.
class SampleSpans {
 public:
  // Samples newer than this (CLOCK_REALTIME us) are new on a poll at `now_us`: the newest stamp
  // counted, or `window_us` back when there is none within kMaxAgeUs (first poll, idle device).
  uint64_t Since(uint64_t now_us, uint64_t window_us) const;
  // The span (us) that samples asked `since_us` with newest stamp `newest_us` stand for, at most
  // max(window_us, the period); counts the stamp. 0 when nothing is newer than `since_us`.
  uint64_t Count(uint64_t since_us, uint64_t newest_us, uint64_t window_us);
  // The shortest recent gap between newest stamps (20 ms .. 2 s): the driver's period, or the poll
  // interval for a library that averages; 0 before two stamps.
  uint64_t period_us() const;

  static constexpr uint64_t kMaxAgeUs = 2'000'000;

 private:
  static constexpr int kGaps = 8;
  uint64_t last_us_ = 0;
  uint64_t gaps_[kGaps] = {};
  int next_ = 0;
};

// The share loop's policing of one container on one GPU: device time NVML measured beyond what the
// container was allowed (its limit x the highest factor decided from kLagNs before the span to its
// end, + 1 point), in ns, charged per sample span. While it owes more than one sampling period (a
// period can go wholly to one process under time-slicing) or 50 ms, whichever is more, it is
// blocked, until the debt is repaid (a container that forged its own bucket in its region is
// stopped from outside).
class SharePolice {
 public:
  // The factor decided at `mono_ns` (kept kHistoryNs).
  void Decided(int64_t mono_ns, uint32_t factor);
  // The container used `pct` % of the span [from_ns, to_ns] (CLOCK_MONOTONIC) at SM limit
  // `share_pct`; `period_ns` as SampleSpans::period_us. Returns true when this starts a block.
  bool Charge(int64_t from_ns, int64_t to_ns, uint32_t pct, uint32_t share_pct, int64_t period_ns);
  bool blocked() const { return on_; }
  int64_t debt_ns() const { return debt_ns_; }
  uint32_t last_allowed_pct() const { return allowed_; }
  bool warned = false;  // one warning per container and GPU; later episodes at debug level

  static constexpr int64_t kLagNs = 300'000'000;  // a decision reaches libvgpu within a poll or two
  static constexpr int64_t kHistoryNs = 2'000'000'000;

 private:
  int64_t debt_ns_ = 0;
  bool on_ = false;
  uint32_t allowed_ = 0;
  std::vector<std::pair<int64_t, uint32_t>> factors_;  // (mono ns, factor), oldest first
};

struct FeedbackStats {
  int containers = 0;
  int switched_on = 0;
  int blocked = 0;
  int errors = 0;
};

// Applies DecideFeedback to the regions of a store. Thread-compatible; one loop per store.
class FeedbackLoop {
 public:
  // `activity` (optional) is told which containers were busy.
  FeedbackLoop(RegionStore& store, GpuTelemetry& telemetry, const Clock& clock, int64_t window_ns,
               ActivityLog* activity = nullptr);
  FeedbackStats Tick();
  // Leaves every region in libvgpu's safe default (limit on, nobody blocked): on shutdown, so that
  // a monitor that stops never leaves a container blocked or unthrottled.
  void Release();

  // One round of work-conserving shares (every ~100 ms, its own thread: ShareThread): rescans the
  // store, decides the factors from the last round's launches and NVML, writes each armed
  // container's share lines. Returns the containers written.
  int ShareTick(int64_t window_ns);

 private:
  RegionStore& store_;
  GpuTelemetry& telemetry_;
  const Clock& clock_;
  int64_t window_ns_;
  ActivityLog* activity_;
  // (dir, uuid) -> the waves libvgpu counted, when they last grew (CLOCK_MONOTONIC ns), and
  // whether it counts them (it limits: share x the last factor under 100 %)
  struct Launches {
    uint64_t waves = 0;
    int64_t grew_ns = 0;
    bool counted = false;
  };
  std::map<std::pair<std::string, std::string>, Launches> waves_;
  // The share loop's policing, per (dir, uuid), and NVML's samples per uuid: their spans and the
  // newest rows (who is busy between two periods).
  std::map<std::pair<std::string, std::string>, SharePolice> police_;
  struct DeviceSamples {
    SampleSpans spans;
    std::vector<ProcessUtil> rows;
    uint64_t end_us = 0;
    int64_t from_ns = 0;  // the start of the rows' span (CLOCK_MONOTONIC)
  };
  std::map<std::string, DeviceSamples> samples_;
};

// Runs loop.ShareTick every interval until destroyed.
class ShareThread {
 public:
  ShareThread(FeedbackLoop& loop, int64_t interval_ms);
  ~ShareThread();
  ShareThread(const ShareThread&) = delete;
  ShareThread& operator=(const ShareThread&) = delete;

 private:
  Mutex mu_;
  CondVar cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace hami::monitor
