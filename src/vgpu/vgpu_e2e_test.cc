// End-to-end tests of libvgpu.so: test programs (e2e/) run as child processes with
// LD_PRELOAD=libvgpu.so and the fake libcuda.so.1 / libnvidia-ml.so.1 on LD_LIBRARY_PATH; each test
// has its own fake device state file and its own shared-region file in a temp dir. Programs print
// key=value lines that the tests read.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "vgpu/shared_region.h"

namespace {

constexpr uint64_t kMi = 1ull << 20;
constexpr uint64_t kGi = 1ull << 30;
constexpr uint64_t kCtx = 300 * kMi;  // the fake's default context overhead

using Env = std::vector<std::string>;

struct Proc {
  pid_t pid = -1;
  int fd = -1;
};

struct Result {
  int status = -1;
  std::string out;
  std::map<std::string, std::string> kv;
  bool Exited(int code) const { return WIFEXITED(status) && WEXITSTATUS(status) == code; }
  uint64_t U(const std::string& k) const {
    auto it = kv.find(k);
    return it == kv.end() ? ~0ull : std::stoull(it->second);
  }
  int64_t I(const std::string& k) const {
    auto it = kv.find(k);
    return it == kv.end() ? INT64_MIN : std::stoll(it->second);
  }
  std::string S(const std::string& k) const {
    auto it = kv.find(k);
    return it == kv.end() ? "<missing>" : it->second;
  }
};

uint64_t ClockUs(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000ull + static_cast<uint64_t>(ts.tv_nsec) / 1000;
}
uint64_t RealtimeUs() {
  return ClockUs(CLOCK_REALTIME);
}
// CLOCK_REALTIME as a child running on libfakegpu_time.so's clock at `scale` reads it now:
// realtime + (scale - 1) x monotonic (src/fakes/README.md, "Scaled time").
uint64_t ScaledRealtimeUs(int scale) {
  return RealtimeUs() + static_cast<uint64_t>(scale - 1) * ClockUs(CLOCK_MONOTONIC);
}

// One SM-limit configuration: containers (one process each, own region) at `pcts` sharing one
// simulated device of `sms` SMs whose waves take `wave_us`, launching through `path` (see
// vgpu_e2e_prog's launch mode); the second container's waves take `wave_us_second` when set.
struct SmConfig {
  int sms;
  std::vector<int> pcts;
  const char* path;
  int wave_us;
  int wave_us_second = 0;
};

class VgpuE2e : public ::testing::Test {
 protected:
  // Runs every configuration at once, each on its own device, for `window_ms`, and checks each
  // container's share of device time (fakegpu_busy_ns over the window: the fake's device clock)
  // against its target within `tolerance` points, and the split of two containers within 5.
  // `scale` > 1: the children run on libfakegpu_time.so's clock, `scale` times faster than the
  // wall clock (the window and the kernel lengths are in that time).
  // `extra`: more environment for every child (after the configuration's own).
  void ExpectSmShares(const std::vector<SmConfig>& configs, int window_ms, double tolerance,
                      int scale = 1, const std::vector<std::string>& extra = {});

  void SetUp() override {
    if (access(VGPU_PROG, X_OK) != 0 || access(VGPU_FAKES_DIR "/libcuda.so.1", R_OK) != 0) {
      GTEST_SKIP() << "fake driver or test program not built (src/fakes missing?)";
    }
    char tmpl[] = "/tmp/vgpu_e2e_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (dir_.empty()) return;
    std::string cmd = "rm -rf '" + dir_ + "'";
    if (system(cmd.c_str()) != 0) ADD_FAILURE() << "cleanup failed";
  }

  // The environment of a child: the fakes, libvgpu, per-test state files, then `extra` (which
  // wins).
  std::vector<std::string> BaseEnv(const std::string& devices, const std::string& tag = "") const {
    return {"PATH=/usr/bin:/bin",
            std::string("LD_LIBRARY_PATH=") + VGPU_FAKES_DIR,
            std::string("LD_PRELOAD=") + VGPU_LIB,
            "FAKEGPU_DEVICES=" + devices,
            "FAKEGPU_STATE=" + dir_ + "/fake" + tag + ".state",
            "CUDA_DEVICE_MEMORY_SHARED_CACHE=" + dir_ + "/region" + tag + ".cache",
            "LIBCUDA_LOG_LEVEL=1"};
  }

  // `with_stderr`: the child's stderr goes to the same pipe (to check its log lines).
  static Proc Start(const std::vector<std::string>& argv, const Env& env,
                    bool with_stderr = false) {
    int p[2];
    if (pipe(p) != 0) return {};
    pid_t pid = fork();
    if (pid == 0) {
      dup2(p[1], 1);
      if (with_stderr) dup2(p[1], 2);
      close(p[0]);
      close(p[1]);
      std::vector<char*> a, e;
      for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
      a.push_back(nullptr);
      for (const auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
      e.push_back(nullptr);
      execve(a[0], a.data(), e.data());
      _exit(127);
    }
    close(p[1]);
    return {pid, p[0]};
  }

  static Result Wait(Proc p) {
    Result r;
    char buf[4096];
    ssize_t n;
    while ((n = read(p.fd, buf, sizeof(buf))) > 0) r.out.append(buf, static_cast<size_t>(n));
    close(p.fd);
    waitpid(p.pid, &r.status, 0);
    std::istringstream in(r.out);
    std::string tok;
    while (in >> tok) {
      auto eq = tok.find('=');
      if (eq != std::string::npos) r.kv[tok.substr(0, eq)] = tok.substr(eq + 1);
    }
    return r;
  }

  static Result Run(const std::vector<std::string>& argv, const Env& env,
                    bool with_stderr = false) {
    return Wait(Start(argv, env, with_stderr));
  }

  // Lines of `out` containing `what`.
  static int CountLines(const std::string& out, const std::string& what) {
    std::istringstream in(out);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) n += line.find(what) != std::string::npos;
    return n;
  }

  // Waits (bounded) until `path` exists.
  static bool WaitForFile(const std::string& path) {
    for (int i = 0; i < 3000; i++) {
      if (access(path.c_str(), F_OK) == 0) return true;
      usleep(10000);
    }
    return false;
  }

  static void Touch(const std::string& path) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) close(fd);
  }

  // A copy of libvgpu.so in its own directory with the device plugin's limits file beside it (what
  // the device plugin's mounts give a container). Returns the library's path.
  std::string ArmedLibrary(const std::string& limits) const {
    std::string lib_dir = dir_ + "/vgpu";
    mkdir(lib_dir.c_str(), 0755);
    std::string cmd = std::string("cp '") + VGPU_LIB + "' '" + lib_dir + "/libvgpu.so'";
    if (system(cmd.c_str()) != 0) return "";
    FILE* f = fopen((lib_dir + "/vgpu.limits").c_str(), "w");
    if (!f) return "";
    fputs(limits.c_str(), f);
    fclose(f);
    return lib_dir + "/libvgpu.so";
  }

  // `env` with the KEY=VALUE entries of `extra` replacing same-named ones (getenv takes the first
  // match).
  static Env With(Env env, const Env& extra) {
    for (const std::string& kv : extra) {
      std::string key = kv.substr(0, kv.find('=') + 1);
      bool replaced = false;
      for (std::string& e : env) {
        if (e.compare(0, key.size(), key) == 0) {
          e = kv;
          replaced = true;
        }
      }
      if (!replaced) env.push_back(kv);
    }
    return env;
  }

  // Reads the region file the way the node exporter would: a copy of the pure-data layout.
  bool ReadRegion(const std::string& tag, vgpu_region* out) const {
    int fd = open((dir_ + "/region" + tag + ".cache").c_str(), O_RDONLY);
    if (fd < 0) return false;
    void* m = mmap(nullptr, sizeof(vgpu_region), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return false;
    memcpy(static_cast<void*>(out), m, sizeof(vgpu_region));
    munmap(m, sizeof(vgpu_region));
    return out->hdr.magic == VGPU_REGION_MAGIC;
  }

  std::string dir_;
};

const char* kOneGpu = "NVIDIA A100-SXM4-80GB:8192:108";

TEST_F(VgpuE2e, OomExactlyAtTheLimitAndReportingAgrees) {
  struct Case {
    const char* limit;
    uint64_t want_total;
  } cases[] = {{"1Gi", kGi}, {"3000m", 3000 * kMi}, {"1.5g", kGi + kGi / 2}, {"1Gx", 8192 * kMi}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.limit);
    Result r =
        Run({VGPU_PROG, "exact"},
            With(BaseEnv(kOneGpu, c.limit), {std::string("CUDA_DEVICE_MEMORY_LIMIT=") + c.limit}));
    ASSERT_TRUE(r.Exited(0)) << r.out;
    uint64_t free0 = c.want_total - kCtx;
    EXPECT_EQ(r.U("start_total"), c.want_total);
    EXPECT_EQ(r.U("start_devtotal"), c.want_total);
    EXPECT_EQ(r.U("start_free"), free0);
    EXPECT_EQ(r.I("alloc_free_rc"), 0);
    EXPECT_EQ(r.I("alloc_one_more_rc"), 2);  // CUDA_ERROR_OUT_OF_MEMORY
    EXPECT_EQ(r.U("full_free"), 0u);
    EXPECT_EQ(r.I("alloc_over_rc"), 2);
    EXPECT_EQ(r.I("alloc_again_rc"), 0);
    EXPECT_EQ(r.U("end_free"), free0);
    for (const char* tag : {"start", "full", "end"}) {  // NVML agrees with cuMemGetInfo
      std::string t = tag;
      EXPECT_EQ(r.I(t + "_nvml_rc"), 0);
      EXPECT_EQ(r.U(t + "_nvml_free"), r.U(t + "_free")) << t;
      EXPECT_EQ(r.U(t + "_nvml_total"), r.U(t + "_total")) << t;
      EXPECT_EQ(r.U(t + "_nvml_used"), r.U(t + "_total") - r.U(t + "_free")) << t;
      EXPECT_EQ(r.U(t + "_nvml2_free"), r.U(t + "_free")) << t;
      EXPECT_EQ(r.U(t + "_nvml2_total"), r.U(t + "_total")) << t;
      EXPECT_EQ(r.I(t + "_null_rc"), 0) << t;
      EXPECT_EQ(r.I(t + "_null_nvml_rc"), 2) << t;  // NVML_ERROR_INVALID_ARGUMENT, no crash
    }
  }
}

TEST_F(VgpuE2e, EveryAllocationPathIsChargedItsTrueSize) {
  Result r = Run({VGPU_PROG, "coverage"}, With(BaseEnv(kOneGpu), {"CUDA_DEVICE_MEMORY_LIMIT=4Gi"}));
  ASSERT_TRUE(r.Exited(0)) << r.out;
  EXPECT_EQ(r.U("ctx_create_delta"), kCtx);
  EXPECT_EQ(r.I("ctx_destroy_delta"), 0);
  EXPECT_EQ(r.U("pitch"), 1024u);  // the fake pads rows to 512 B: the returned pitch is charged
  EXPECT_EQ(r.U("pitch_delta"), 1024u * 100);
  EXPECT_EQ(r.U("managed_delta"), 3 * kMi);
  EXPECT_EQ(r.U("async_delta"), 5 * kMi);
  EXPECT_EQ(r.U("pool_delta"), 7 * kMi);
  EXPECT_EQ(r.U("vmm_delta"), 8 * kMi);
  EXPECT_EQ(r.U("array_delta"), 1024u * 512 * 4 * 2);
  EXPECT_EQ(r.U("array3d_delta"), 64u * 64 * 16 * 4);
  EXPECT_EQ(r.I("final_delta"), 0);
  EXPECT_GT(r.I("bogus_free_rc"), 0);  // the driver's own error code, never -1
}

TEST_F(VgpuE2e, FourProcessesNeverExceedASharedLimit) {
  // 4 contexts take 1200 MiB of the 1600 MiB: allocations of up to 64 MiB collide with the limit
  // often.
  const uint64_t limit = 1600 * kMi;
  Env env = With(BaseEnv(kOneGpu), {"CUDA_DEVICE_MEMORY_LIMIT=1600m"});
  uint64_t start = RealtimeUs() + 1500000;  // after every process has its context
  std::vector<Proc> ps;
  for (int i = 0; i < 4; i++) {
    ps.push_back(
        Start({VGPU_PROG, "loop", std::to_string(start), "2000", std::to_string(limit)}, env));
  }
  int64_t ooms = 0, allocs = 0;
  for (Proc& p : ps) {
    Result r = Wait(p);
    ASSERT_TRUE(r.Exited(0)) << r.out;
    EXPECT_EQ(r.I("over"), 0) << "device usage above the limit was observed: " << r.out;
    allocs += r.I("allocs");
    ooms += r.I("ooms");
  }
  EXPECT_GT(allocs, 0);
  EXPECT_GT(ooms, 0) << "the limit was never reached: the test did not test anything";
  vgpu_region reg;
  ASSERT_TRUE(ReadRegion("", &reg));
  EXPECT_EQ(reg.devices[0].used_bytes, 0u) << "well-behaved processes free everything they charged";
}

TEST_F(VgpuE2e, ThreadsOfOneProcessShareTheLimitWithoutLeaks) {
  // 8 threads holding up to 8 x 32 MiB each, 128 MiB left after the context: the limit is hit
  // often.
  Result r =
      Run({VGPU_PROG, "threads", "8"}, With(BaseEnv(kOneGpu), {"CUDA_DEVICE_MEMORY_LIMIT=428m"}));
  ASSERT_TRUE(r.Exited(0)) << r.out;
  EXPECT_EQ(r.I("thread_errors"), 0);
  EXPECT_GT(r.I("thread_ooms"), 0);
  EXPECT_EQ(r.U("free_after"), r.U("free_before"))
      << "every free credited exactly what its alloc charged";
  EXPECT_EQ(r.U("free_before"), 128 * kMi);
}

TEST_F(VgpuE2e, ProcessKilledMidAllocationIsReclaimed) {
  for (const char* point :
       {"1:3", "2:3"}) {  // 3rd reservation: context, alloc 0, then dies in alloc 1
    SCOPED_TRACE(point);
    Env env = With(BaseEnv(kOneGpu, point), {"CUDA_DEVICE_MEMORY_LIMIT=1Gi"});
    Result crashed =
        Run({VGPU_PROG, "crash", "5"}, With(env, {std::string("VGPU_TEST_CRASH_POINT=") + point}));
    ASSERT_TRUE(WIFSIGNALED(crashed.status) && WTERMSIG(crashed.status) == SIGKILL) << crashed.out;
    EXPECT_EQ(crashed.I("alloc_0_rc"), 0);
    EXPECT_EQ(crashed.kv.count("alloc_1_rc"), 0u);
    vgpu_region reg;
    ASSERT_TRUE(ReadRegion(point, &reg));
    EXPECT_NE(reg.hdr.lock, 0u) << "it died holding the region lock";
    // The next process takes the lock over, reclaims the dead slot and gets the full limit.
    Result next = Run({VGPU_PROG, "exact"}, env);
    ASSERT_TRUE(next.Exited(0)) << next.out;
    EXPECT_EQ(next.U("start_free"), kGi - kCtx);
    EXPECT_EQ(next.I("alloc_free_rc"), 0);
    EXPECT_EQ(next.I("alloc_one_more_rc"), 2);
    ASSERT_TRUE(ReadRegion(point, &reg));
    EXPECT_EQ(reg.hdr.lock, 0u);
    EXPECT_GE(reg.hdr.recoveries, 1u);
    EXPECT_EQ(reg.devices[0].used_bytes, 0u);
  }
}

// NVML process lists show the container's own processes only: two processes of container X and one
// of container Y share a device; X's see 2 entries, Y's sees 1, each including itself.
TEST_F(VgpuE2e, NvmlProcessListsAreContainerScoped) {
  uint64_t start = RealtimeUs() + 1500000;
  Env x = BaseEnv(kOneGpu),
      y = With(BaseEnv(kOneGpu), {"CUDA_DEVICE_MEMORY_SHARED_CACHE=" + dir_ + "/y.cache"});
  std::vector<Proc> ps = {Start({VGPU_PROG, "procs", std::to_string(start)}, x),
                          Start({VGPU_PROG, "procs", std::to_string(start)}, x),
                          Start({VGPU_PROG, "procs", std::to_string(start)}, y)};
  const uint64_t want[] = {2, 2, 1};
  for (int i = 0; i < 3; i++) {
    Result r = Wait(ps[i]);
    ASSERT_TRUE(r.Exited(0)) << r.out;
    EXPECT_EQ(r.I("procs_rc"), 0);
    EXPECT_EQ(r.U("procs"), want[i]) << "process " << i;
    EXPECT_EQ(r.I("self_listed"), 1) << "process " << i;
  }
}

TEST_F(VgpuE2e, CuGetProcAddressIsVersionExact) {
  Result r = Run({VGPU_PROG, "procaddr"}, With(BaseEnv(kOneGpu), {"CUDA_DEVICE_MEMORY_LIMIT=2Gi"}));
  ASSERT_TRUE(r.Exited(0)) << r.out;
  EXPECT_EQ(r.I("mismatches"), 0) << r.out;
  EXPECT_EQ(r.I("legacy_over_rc"), 2);
  EXPECT_NE(r.I("legacy_fit_rc"),
            2);  // within the limit: the driver decides (the fake: NOT_SUPPORTED)
  EXPECT_EQ(r.S("legacy"), "ok");
  EXPECT_EQ(r.I("create_v4_rc"), 0);
  EXPECT_GE(r.I("hooks_checked"), 56) << "every hook the fake driver exports is routed";
}

// The legacy (CUDA 2.x) array entry points, linked directly or returned by cuGetProcAddress for
// cudaVersion 2000, are charged and refused at the limit like the _v2 ones (they were not hooked: a
// process held the whole 8 GiB card under a 1 GiB limit); so is the legacy pitched allocator.
TEST_F(VgpuE2e, LegacyArrayEntryPointsAreChargedAndRefusedAtTheLimit) {
  const uint64_t array = 64 * kMi, fit = (kGi - kCtx) / array;
  for (const char* via : {"direct", "procaddr"}) {
    SCOPED_TRACE(via);
    Result r = Run({VGPU_PROG, "legacy", via},
                   With(BaseEnv(kOneGpu, via), {"CUDA_DEVICE_MEMORY_LIMIT=1Gi"}));
    ASSERT_TRUE(r.Exited(0)) << r.out;
    EXPECT_EQ(r.U("start_free"), kGi - kCtx);
    EXPECT_EQ(r.U("arrays"), fit) << "the card has 8 GiB: only the limit stops them";
    EXPECT_EQ(r.I("last_rc"), 2);  // CUDA_ERROR_OUT_OF_MEMORY
    EXPECT_EQ(r.U("charged"), fit * array);
    EXPECT_EQ(r.U("held"), kCtx + fit * array) << "what the driver holds for the process";
    EXPECT_EQ(r.I("pitch_over_rc"), 2);
    EXPECT_NE(r.I("pitch_fit_rc"), 2);  // within the limit: the driver's answer
    EXPECT_EQ(r.U("end_free"), kGi - kCtx);
  }
}

// A context beyond the process's first that would take the container past its limit fails with
// CUDA_ERROR_OUT_OF_MEMORY and leaves nothing behind (the driver's context destroyed, nothing
// charged, the thread's current context unchanged), in every cuCtxCreate ABI (a loop of them held
// 26 contexts, 8.1 GiB, under a 1 GiB limit).
TEST_F(VgpuE2e, ContextsBeyondTheLimitAreRefusedAndLeaveNothingBehind) {
  const uint64_t fit = (kGi - kCtx) / kCtx;  // 2 next to the primary context
  for (const char* api : {"v2", "legacy", "v3", "v4", "procaddr", "green"}) {
    SCOPED_TRACE(api);
    Result r = Run({VGPU_PROG, "contexts", api},
                   With(BaseEnv(kOneGpu, api), {"CUDA_DEVICE_MEMORY_LIMIT=1Gi"}));
    ASSERT_TRUE(r.Exited(0)) << r.out;
    EXPECT_EQ(r.U("start_free"), kGi - kCtx);
    EXPECT_EQ(r.U("created"), fit);
    EXPECT_EQ(r.I("last_rc"), 2);
    EXPECT_EQ(r.I("current_kept"), 1);
    EXPECT_EQ(r.U("charged"), fit * kCtx);
    EXPECT_EQ(r.U("held"), (1 + fit) * kCtx) << "the refused context is gone from the driver";
    EXPECT_EQ(r.U("end_free"), kGi - kCtx);
  }
}

// The first context of a process is always admitted, even when the container is full (else the
// process could not even free); the primary context and further contexts are not, and a refused
// primary retain is released again.
TEST_F(VgpuE2e, FirstContextOfAProcessIsAlwaysAdmitted) {
  Env alone = With(BaseEnv(kOneGpu, "alone"), {"CUDA_DEVICE_MEMORY_LIMIT=1Gi"});
  Env full = With(BaseEnv(kOneGpu, "full"), {"CUDA_DEVICE_MEMORY_LIMIT=1Gi"});
  std::string flag = dir_ + "/fill";
  Proc filler = Start({VGPU_PROG, "fill", flag}, full);
  ASSERT_TRUE(WaitForFile(flag + ".ready"));
  struct Case {
    const char* name;
    const Env* env;
    uint64_t start_free;
    int primary_after_free_rc;
  } cases[] = {{"alone", &alone, kGi - kCtx, 0}, {"next to a full process", &full, 0, 2}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result r = Run({VGPU_PROG, "ctxfirst"}, *c.env);
    ASSERT_TRUE(r.Exited(0)) << r.out;
    EXPECT_EQ(r.I("first_rc"), 0);
    EXPECT_EQ(r.U("start_free"), c.start_free);
    EXPECT_EQ(r.I("primary_rc"), 2);
    EXPECT_EQ(r.I("primary_active"), 0) << "the refused retain was released";
    EXPECT_EQ(r.I("primary_null"), 1);
    EXPECT_EQ(r.I("create_rc"), 2);
    EXPECT_EQ(r.I("held_delta"), 0);
    EXPECT_EQ(r.I("primary_after_free_rc"), c.primary_after_free_rc);
  }
  Touch(flag);
  EXPECT_TRUE(Wait(filler).Exited(0));
}

// A graph's memory allocation nodes take device memory when it is launched, which libvgpu cannot
// charge in step: on a device with a limit they are refused with CUDA_ERROR_NOT_SUPPORTED in each
// entry point (before: a 1 GiB container held 6 GiB through one graph launch); without a limit
// they work.
TEST_F(VgpuE2e, GraphMemoryNodesAreRefusedUnderALimit) {
  struct Case {
    const char* name;
    Env extra;
    int rc;
    uint64_t held;
  } cases[] = {{"limited", {"CUDA_DEVICE_MEMORY_LIMIT=1Gi"}, 801, kCtx},
               {"unlimited", {}, 0, kCtx + 3 * 2 * kGi}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result r = Run({VGPU_PROG, "graphmem"}, With(BaseEnv(kOneGpu, c.name), c.extra));
    ASSERT_TRUE(r.Exited(0)) << r.out;
    EXPECT_EQ(r.I("alloc_node_rc"), c.rc);
    EXPECT_EQ(r.I("add_node_rc"), c.rc);
    EXPECT_EQ(r.I("add_node_v1_rc"), c.rc);
    EXPECT_EQ(r.I("launch_rc"), 0);
    EXPECT_EQ(r.U("held"), c.held);
  }
}

// cuMemCreate memory lives while it is mapped or retained: releasing the handle right after mapping
// it (the usual pattern) credited the charge while the memory stayed (before: 30 chunks of 256 MiB,
// the whole card, under a 1 GiB limit). The charge now goes with the last reference.
TEST_F(VgpuE2e, MappedOrRetainedVmmMemoryStaysCharged) {
  const uint64_t chunk = 256 * kMi, fit = (kGi - kCtx) / chunk;
  Result r = Run({VGPU_PROG, "vmm"}, With(BaseEnv(kOneGpu), {"CUDA_DEVICE_MEMORY_LIMIT=1Gi"}));
  ASSERT_TRUE(r.Exited(0)) << r.out;
  EXPECT_EQ(r.U("start_free"), kGi - kCtx);
  EXPECT_EQ(r.U("mapped"), fit);
  EXPECT_EQ(r.I("last_rc"), 2);
  EXPECT_EQ(r.U("charged"), fit * chunk);
  EXPECT_EQ(r.U("held"), fit * chunk);
  EXPECT_EQ(r.U("unmapped_free"), kGi - kCtx) << "the last unmap gives the charge back";
  EXPECT_EQ(r.U("retained_charged"), chunk) << "a retained reference keeps it charged";
  EXPECT_EQ(r.U("retained_held"), chunk);
  EXPECT_EQ(r.U("end_free"), kGi - kCtx);
  EXPECT_EQ(r.U("end_held"), 0u);
}

TEST_F(VgpuE2e, DlopenDlsymPathIsLimitedAndRtldNextWorks) {
  Result r = Run({VGPU_DLOPEN_PROG}, With(BaseEnv(kOneGpu), {"CUDA_DEVICE_MEMORY_LIMIT=1Gi"}));
  ASSERT_TRUE(r.Exited(0)) << r.out;
  EXPECT_EQ(r.I("rtld_next_ok"), 1);
  EXPECT_EQ(r.I("alloc_from_libvgpu"), 1);
  EXPECT_EQ(r.I("unhooked_from_driver"), 1);
  EXPECT_EQ(r.U("total"), kGi);
  EXPECT_LE(r.U("allocated"), kGi - kCtx);
  EXPECT_GT(r.U("allocated") + 16 * kMi, kGi - kCtx);
  EXPECT_EQ(r.I("last_rc"), 2);
}

TEST_F(VgpuE2e, ReorderedVisibleDevicesKeepEachLimitOnItsCard) {
  const std::string two = "CardA:8192:20;CardB:8192:20";
  Env env =
      With(BaseEnv(two), {"CUDA_DEVICE_MEMORY_LIMIT_0=1Gi", "CUDA_DEVICE_MEMORY_LIMIT_1=2Gi"});
  // A reordered process creates the region first; then one without CUDA_VISIBLE_DEVICES.
  Result rev = Run({VGPU_PROG, "devices"}, With(env, {"CUDA_VISIBLE_DEVICES=1,0"}));
  Result plain = Run({VGPU_PROG, "devices"}, env);
  ASSERT_TRUE(rev.Exited(0)) << rev.out;
  ASSERT_TRUE(plain.Exited(0)) << plain.out;
  const std::string a = plain.S("ord0_uuid"), b = plain.S("ord1_uuid");
  EXPECT_EQ(rev.S("ord0_uuid"), b);
  EXPECT_EQ(rev.S("ord1_uuid"), a);
  EXPECT_EQ(plain.U("ord0_devtotal"), kGi);
  EXPECT_EQ(plain.U("ord1_devtotal"), 2 * kGi);
  EXPECT_EQ(plain.U("ord0_total"), kGi);
  EXPECT_EQ(rev.U("ord0_devtotal"), 2 * kGi);  // card B
  EXPECT_EQ(rev.U("ord0_total"), 2 * kGi);
  EXPECT_EQ(rev.U("ord1_devtotal"), kGi);  // card A
  EXPECT_EQ(rev.U("ord1_total"), kGi);
  Result by_uuid = Run({VGPU_PROG, "devices"}, With(env, {"CUDA_VISIBLE_DEVICES=" + b + "," + a}));
  ASSERT_TRUE(by_uuid.Exited(0)) << by_uuid.out;
  EXPECT_EQ(by_uuid.U("ord0_devtotal"), 2 * kGi);
  EXPECT_EQ(by_uuid.U("ord1_devtotal"), kGi);
  const std::string big = std::to_string(3 * kGi / 2);
  EXPECT_EQ(
      Run({VGPU_PROG, "alloc", "1", big}, With(env, {"CUDA_VISIBLE_DEVICES=1,0"})).I("alloc_rc"),
      2);
  EXPECT_EQ(
      Run({VGPU_PROG, "alloc", "0", big}, With(env, {"CUDA_VISIBLE_DEVICES=1,0"})).I("alloc_rc"),
      0);
}

// Achieved share of device time for 1 and 2 containers at 30/50/70 % on 20- and 132-SM devices,
// each configuration on its own simulated device, all at once. The fake's wave time (250 us)
// differs from the limiter's prior, so calibration is exercised; the launch path varies by
// configuration.
TEST_F(VgpuE2e, SmLimitHoldsTargetsOn20And132Sms) {
  ExpectSmShares(
      {
          {20, {30}, "kernel", 250},
          {20, {50}, "ex", 250},
          {20, {70}, "coop", 250},
          {132, {30}, "ex", 250},
          {132, {50}, "kernel", 250},
          {132, {70}, "graph", 250},
          {20, {30, 70}, "kernel", 250},
          {20, {50, 50}, "ex", 250},
          {132, {30, 70}, "ex", 250},
          {132, {50, 50}, "kernel", 250},
      },
      6000, 3.0);
}

// Kernel-length sweep against the fake driver in real time: kernels of one wave of 10 us, 100 us,
// 1 ms, 20 ms and 100 ms, graph launches of 4 waves of 5 ms (each charged one wave), and a mix of
// 1, 8, 40 and 400 waves of 250 us (250 us .. 100 ms), on 20, 132 and 188 SMs, one container and
// two at 30/70; and two containers whose kernels differ: 10 us at 30 % beside 100 ms at 70 % (the
// short kernels wait behind the long ones in the FIFO and must get their share in the gaps).
// Kernels of 500 ms to 2 s need minutes of real time per point: they run on a scaled clock in
// SmLimitHoldsForKernelsOf100MsTo2sOnAScaledClock, and on a model clock in
// VgpuLimiter.KernelLengthSweepHoldsWithinTwoPoints.
TEST_F(VgpuE2e, SmLimitHoldsForKernelLengthsFrom10UsTo100Ms) {
  ExpectSmShares(
      {
          {20, {30}, "one", 10},
          {188, {70}, "one", 100},
          {132, {30, 70}, "one", 100},
          {132, {50}, "one", 1000},
          {188, {30, 70}, "one", 20000},
          {20, {70}, "one", 100000},
          {188, {30}, "graph", 5000},
          {20, {30, 70}, "mixed", 250},
          {188, {30, 70}, "mixed", 250},
          {132, {30, 70}, "one", 10, 100000},
      },
      8000, 3.0);
}

// Kernels of 100 ms, 500 ms and 2 s (one wave each) at 10, 30 and 50 %, and a mix of 5 ms, 40 ms,
// 200 ms and 2 s kernels, through the fake driver and libvgpu.so as in the test above but on a
// clock 20 times faster than the wall clock (libfakegpu_time.so): the fake's device clock, its
// kernel durations, NVML's utilisation windows and libvgpu's token refill, 100 ms controller
// windows and waits all run on it, so libvgpu sees 2 s kernels against its 100 ms windows as on a
// real device, in 1/20 of the time. A window of 300 s from the first launch (as the tests above):
// 15 periods of a 2 s kernel at 10 % (where the window's end falls in the period moves the share by
// up to 0.6 points). About 17 s of wall time; the share holds within 2 points on the fake's device
// clock.
TEST_F(VgpuE2e, SmLimitHoldsForKernelsOf100MsTo2sOnAScaledClock) {
  ExpectSmShares(
      {
          {20, {10}, "one", 100000},
          {132, {30}, "one", 100000},
          {188, {50}, "one", 100000},
          {132, {10}, "one", 500000},
          {188, {30}, "one", 500000},
          {20, {50}, "one", 500000},
          {188, {10}, "one", 2000000},
          {20, {30}, "one", 2000000},
          {132, {50}, "one", 2000000},
          {132, {30}, "mixed", 5000},
      },
      300000, 2.0, 20);
}

// NVML as a real driver samples it (an H200 with driver 580): one sample per process every 200 ms,
// stamped with the period's end, instead of the fake's default average over the interval asked
// about. libvgpu's controller weighted such samples by its 100 ms window, saw half the device time
// and let a 30 % container run at 61 % on the H200 (docs/benchmarks.md, "libvgpu on a real GPU").
TEST_F(VgpuE2e, SmLimitHoldsWithAPeriodicNvmlSampler) {
  ExpectSmShares(
      {
          {132, {30}, "kernel", 250},
          {132, {50}, "one", 3000},
          {20, {70}, "mixed", 250},
          {132, {30, 70}, "kernel", 250},
          {188, {30, 70}, "one", 3000},
      },
      8000, 3.0, 1, {"FAKEGPU_NVML_SAMPLE_MS=200"});
}

void VgpuE2e::ExpectSmShares(const std::vector<SmConfig>& configs, int window_ms, double tolerance,
                             int scale, const std::vector<std::string>& extra) {
  // Two seconds of wall time for every child to start.
  uint64_t start = ScaledRealtimeUs(scale) + 2000000ull * static_cast<uint64_t>(scale);
  struct Running {
    int config, container, pct;
    Proc proc;
  };
  std::vector<Running> running;
  for (int i = 0; i < static_cast<int>(configs.size()); i++) {
    const SmConfig& c = configs[i];
    std::string dev = "SimGPU:16384:" + std::to_string(c.sms);
    for (int k = 0; k < static_cast<int>(c.pcts.size()); k++) {
      // One device state per configuration; one region (container) per process. Both policies
      // limit from the first launch (only the node monitor's switch lifts "default"): one
      // container runs "force", two run "default".
      Env env = BaseEnv(dev, std::to_string(i));
      env = With(
          env,
          {"FAKEGPU_WAVE_US=" +
               std::to_string(k == 1 && c.wave_us_second ? c.wave_us_second : c.wave_us),
           "CUDA_DEVICE_SM_LIMIT=" + std::to_string(c.pcts[k]),
           std::string("GPU_CORE_UTILIZATION_POLICY=") + (c.pcts.size() == 1 ? "force" : "default"),
           "CUDA_DEVICE_MEMORY_SHARED_CACHE=" + dir_ + "/region" + std::to_string(i) + "_" +
               std::to_string(k) + ".cache"});
      if (scale > 1) {
        env = With(env,
                   {"FAKEGPU_TIME_SCALE=" + std::to_string(scale),
                    std::string("LD_PRELOAD=") + VGPU_FAKES_DIR "/libfakegpu_time.so " + VGPU_LIB});
      }
      env = With(env, extra);
      running.push_back(
          {i, k, c.pcts[k],
           Start({VGPU_PROG, "launch", std::to_string(start), std::to_string(window_ms), c.path},
                 env)});
    }
  }
  std::map<int, std::vector<double>> shares;
  for (Running& r : running) {
    Result res = Wait(r.proc);
    ASSERT_TRUE(res.Exited(0)) << res.out;
    double share = 100.0 * static_cast<double>(res.U("busy_window_ns")) /
                   static_cast<double>(res.U("window_ns"));
    const SmConfig& c = configs[r.config];
    std::printf("sms=%d containers=%zu path=%s wave_us=%d target=%d achieved=%.2f launches=%lld\n",
                c.sms, c.pcts.size(), c.path, c.wave_us, r.pct, share,
                static_cast<long long>(res.I("launches")));
    EXPECT_NEAR(share, r.pct, tolerance) << "sms=" << c.sms << " containers=" << c.pcts.size()
                                         << " path=" << c.path << " wave_us=" << c.wave_us;
    shares[r.config].push_back(share);
  }
  for (auto& [i, s] : shares) {
    if (s.size() == 2) {  // the split between two containers
      double split0 = 100.0 * s[0] / (s[0] + s[1]);
      EXPECT_NEAR(split0, configs[i].pcts[0], 5.0) << "sms=" << configs[i].sms;
    }
  }
}

// Policies, alone on a device: "disable" ignores the SM limit; "default" limits from the first
// launch, as upstream, unless the node monitor's switch is off (it clears it for a container alone
// at its priority); "force" limits regardless of the switch; a container told that a
// higher-priority one is active (recent_kernel < 0) only launches after bounded waits.
TEST_F(VgpuE2e, PoliciesAndPriority) {
  struct Case {
    const char* name;
    const char* policy;
    int32_t util_switch;
    int32_t recent_kernel;
    double min_share, max_share;
  } cases[] = {
      {"disable", "disable", 1, 2, 90, 101},
      {"default_monitor_switch_off", "default", 0, 2, 90, 101},
      {"default_alone", "default", 1, 2, 24, 34},    // limited from the start, as upstream
      {"force_uncontended", "force", 0, 2, 24, 34},  // behaviour, not accuracy (see the test above)
      {"low_priority_blocked", "force", 1, -1, 0, 10},
  };
  const std::string dev = "SimGPU:16384:20";
  std::vector<Proc> procs;
  uint64_t start = RealtimeUs() + 2500000;
  for (int i = 0; i < static_cast<int>(std::size(cases)); i++) {
    const Case& c = cases[i];
    std::string tag = std::to_string(i);
    Env env = With(BaseEnv(dev, tag), {"CUDA_DEVICE_SM_LIMIT=30",
                                       std::string("GPU_CORE_UTILIZATION_POLICY=") + c.policy});
    // Create the region, then act as the node monitor: write the feedback fields.
    ASSERT_TRUE(Run({VGPU_PROG, "devices"}, env).Exited(0));
    int fd = open((dir_ + "/region" + tag + ".cache").c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    auto* reg = static_cast<vgpu_region*>(
        mmap(nullptr, sizeof(vgpu_region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    close(fd);
    ASSERT_NE(reg, MAP_FAILED);
    __atomic_store_n(&reg->hdr.utilization_switch, c.util_switch, __ATOMIC_RELEASE);
    __atomic_store_n(&reg->hdr.recent_kernel, c.recent_kernel, __ATOMIC_RELEASE);
    munmap(reg, sizeof(vgpu_region));
    procs.push_back(Start({VGPU_PROG, "launch", std::to_string(start), "2000", "kernel"}, env));
  }
  for (int i = 0; i < static_cast<int>(std::size(cases)); i++) {
    Result r = Wait(procs[i]);
    ASSERT_TRUE(r.Exited(0)) << r.out;
    double share =
        100.0 * static_cast<double>(r.U("busy_window_ns")) / static_cast<double>(r.U("window_ns"));
    std::printf("%s share=%.2f launches=%lld\n", cases[i].name, share,
                static_cast<long long>(r.I("launches")));
    EXPECT_GE(share, cases[i].min_share) << cases[i].name;
    EXPECT_LE(share, cases[i].max_share) << cases[i].name;
  }
}

TEST_F(VgpuE2e, ProcessesThatNeverTouchCudaAreUnaffected) {
  Env env = BaseEnv(kOneGpu);
  Result t = Run({"/bin/true"}, env);
  EXPECT_TRUE(t.Exited(0));
  Result sh = Run({"/bin/sh", "-c", "echo hello; ls / >/dev/null; exit 7"}, env);
  EXPECT_TRUE(sh.Exited(7));
  EXPECT_EQ(sh.out, "hello\n");
  if (access("/usr/bin/python3", X_OK) == 0) {
    Result py = Run({"/usr/bin/python3", "-c", "import ctypes, os; print(os.getpid() > 0)"}, env);
    EXPECT_TRUE(py.Exited(0));
    EXPECT_EQ(py.out, "True\n");
  }
  struct stat st;
  EXPECT_NE(stat((dir_ + "/region.cache").c_str(), &st), 0)
      << "no file may be touched without CUDA use";
}

TEST_F(VgpuE2e, LibraryNeedsOnlyLibcFamily) {
  std::string cmd = std::string("readelf -d '") + VGPU_LIB + "'";
  FILE* f = popen(cmd.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char line[512];
  int needed = 0;
  const std::vector<std::string> allowed = {"libc.so.6",  "libdl.so.2", "libpthread.so.0",
                                            "librt.so.1", "libm.so.6",  "ld-linux-x86-64.so.2"};
  while (fgets(line, sizeof(line), f)) {
    std::string s = line;
    if (s.find("(NEEDED)") == std::string::npos) continue;
    needed++;
    auto a = s.find('['), b = s.find(']');
    ASSERT_NE(a, std::string::npos);
    std::string lib = s.substr(a + 1, b - a - 1);
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), lib), allowed.end())
        << "unexpected NEEDED " << lib;
  }
  EXPECT_EQ(pclose(f), 0);
  EXPECT_GE(needed, 1);
}

// ---- Tampered region files fail closed: the limit from the environment holds, one ERROR line says
// why. ----

// Writes `bytes` over the start of `path` in place (no truncation: a mapped file must keep its
// size).
bool Overwrite(const std::string& path, const void* bytes, size_t n) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT, 0666);
  if (fd < 0) return false;
  bool ok = pwrite(fd, bytes, n, 0) == static_cast<ssize_t>(n);
  close(fd);
  return ok;
}

// A region with a valid header over a body of pseudo-random bytes.
std::vector<unsigned char> GarbageRegion(unsigned seed) {
  std::vector<unsigned char> b(sizeof(vgpu_region));
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& c : b) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<unsigned char>(x);
  }
  auto* r = reinterpret_cast<vgpu_region*>(b.data());
  r->hdr.magic = VGPU_REGION_MAGIC;
  r->hdr.version = VGPU_REGION_VERSION;
  r->hdr.size_bytes = sizeof(vgpu_region);
  r->hdr.init_state = VGPU_REGION_READY;
  return b;
}

TEST_F(VgpuE2e, UntrustedRegionFilesAreRebuiltAndTheLimitHolds) {
  // The fake's first device UUID (src/fakes/README.md): a forged entry that says "unlimited".
  const char* kUuid = "GPU-fa4e0000-0000-4000-8000-000000000000";
  struct Case {
    const char* name;
    std::vector<unsigned char> bytes;
    const char* why;
  };
  std::vector<Case> cases;
  cases.push_back({"garbage_body", GarbageRegion(1), "could not be trusted"});
  {
    std::vector<unsigned char> b = GarbageRegion(2);
    reinterpret_cast<vgpu_region*>(b.data())->hdr.version = 99;
    cases.push_back({"other_version", b, "another layout version"});
  }
  {
    std::vector<unsigned char> b = GarbageRegion(3);
    auto* r = reinterpret_cast<vgpu_region*>(b.data());
    vgpu_region_header h = r->hdr;
    memset(static_cast<void*>(r), 0, sizeof(*r));
    r->hdr.magic = h.magic;
    r->hdr.version = h.version;
    r->hdr.size_bytes = h.size_bytes;
    r->hdr.init_state = h.init_state;
    r->hdr.device_count = 1;
    snprintf(r->devices[0].uuid, sizeof(r->devices[0].uuid), "%s", kUuid);
    r->devices[0].limit_bytes = 0;  // "no limit"
    r->devices[0].sm_limit_pct = 100;
    cases.push_back({"forged_unlimited_entry", b, nullptr});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(Overwrite(dir_ + "/region" + c.name + ".cache", c.bytes.data(), c.bytes.size()));
    Result r = Run({VGPU_PROG, "exact"},
                   With(BaseEnv(kOneGpu, c.name), {"CUDA_DEVICE_MEMORY_LIMIT=1Gi"}), true);
    ASSERT_TRUE(r.Exited(0)) << r.out;
    EXPECT_EQ(r.U("start_total"), kGi) << r.out;
    EXPECT_EQ(r.U("start_free"), kGi - kCtx);
    EXPECT_EQ(r.I("alloc_one_more_rc"), 2);
    if (c.why) {
      EXPECT_EQ(CountLines(r.out, "ERROR"), 1) << r.out;
      EXPECT_EQ(CountLines(r.out, c.why), 1) << r.out;
      vgpu_region reg;
      ASSERT_TRUE(ReadRegion(c.name, &reg));
      EXPECT_EQ(reg.hdr.version, VGPU_REGION_VERSION) << "rebuilt in place";
    }
  }
}

TEST_F(VgpuE2e, RegionOverwrittenUnderARunningProcessKeepsItsLimit) {
  std::vector<unsigned char> zeros(sizeof(vgpu_region), 0);
  struct Case {
    const char* name;
    std::vector<unsigned char> bytes;
  } cases[] = {{"zeros", zeros}, {"garbage", GarbageRegion(4)}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string flag = dir_ + "/flag_" + c.name;
    Proc p = Start({VGPU_PROG, "tamper", flag},
                   With(BaseEnv(kOneGpu, c.name), {"CUDA_DEVICE_MEMORY_LIMIT=1Gi"}), true);
    ASSERT_TRUE(WaitForFile(flag + ".ready"));
    ASSERT_TRUE(Overwrite(dir_ + "/region" + std::string(c.name) + ".cache", c.bytes.data(),
                          c.bytes.size()));
    Touch(flag);
    Result r = Wait(p);
    ASSERT_TRUE(r.Exited(0)) << r.out;
    // 1 GiB - context (300 MiB) - 512 MiB held leaves 212 MiB: three 64 MiB chunks, not 8 GiB.
    EXPECT_EQ(r.U("after_bytes"), 3 * 64 * kMi) << r.out;
    EXPECT_EQ(r.U("after_total"), kGi);
    EXPECT_EQ(r.U("after_free"), kGi - kCtx - 512 * kMi - 3 * 64 * kMi);
    EXPECT_EQ(CountLines(r.out, "ERROR"), 1) << r.out;
    EXPECT_EQ(CountLines(r.out, "overwritten under this process"), 1) << r.out;
  }
}

// A running process uses the region; the file is then changed to another layout version (as a
// process of an older or newer libvgpu would see it, or as anything in the container can write it).
// A newcomer cannot count the running process's usage, so it must not enforce the whole limit again
// on a private region (that made the limit per process): its allocations are refused, with one
// ERROR line, and the container stays within 1 GiB.
TEST_F(VgpuE2e, RegionOfAnotherLayoutInUseRefusesTheNewcomer) {
  const std::string flag = dir_ + "/hold_layout";
  const Env env = With(BaseEnv(kOneGpu, "layout"), {"CUDA_DEVICE_MEMORY_LIMIT=1Gi"});
  Result before = Run({VGPU_PROG, "alloc", "0", std::to_string(64 * kMi)}, env, true);
  ASSERT_TRUE(before.Exited(0)) << before.out;
  EXPECT_EQ(before.I("alloc_rc"), 0) << "the region is usable before it is changed";
  Proc holder = Start({VGPU_PROG, "hold", flag}, env);
  ASSERT_TRUE(WaitForFile(flag + ".ready"));
  const uint32_t other = VGPU_REGION_VERSION + 1;
  int fd = open((dir_ + "/regionlayout.cache").c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, &other, sizeof(other), offsetof(vgpu_region_header, version)),
            static_cast<ssize_t>(sizeof(other)));
  close(fd);
  Result r = Run({VGPU_PROG, "alloc", "0", std::to_string(64 * kMi)}, env, true);
  Touch(flag);
  EXPECT_TRUE(Wait(holder).Exited(0));
  ASSERT_TRUE(r.Exited(0)) << r.out;
  EXPECT_EQ(r.I("alloc_rc"), 2) << r.out;
  EXPECT_EQ(CountLines(r.out, "ERROR"), 1) << r.out;
  EXPECT_EQ(CountLines(r.out, "another layout version"), 1) << r.out;
  EXPECT_EQ(CountLines(r.out, "allocations in this process are refused"), 1) << r.out;
}

// Armed by the device plugin, the region path is its choice: a path made unusable from inside the
// container (directory removed, replaced by a link) refuses allocations instead of per-process
// limits.
TEST_F(VgpuE2e, ArmedContainerWithAnUnusableRegionPathRefusesAllocations) {
  const std::string lib = ArmedLibrary(
      "CUDA_DEVICE_MEMORY_LIMIT=1Gi\n"
      "CUDA_DEVICE_MEMORY_SHARED_CACHE=" +
      dir_ + "/gone/region.cache\n");
  ASSERT_FALSE(lib.empty());
  Result r = Run({VGPU_PROG, "alloc", "0", std::to_string(64 * kMi)},
                 With(BaseEnv(kOneGpu), {"LD_PRELOAD=" + lib}), true);
  ASSERT_TRUE(r.Exited(0)) << r.out;
  EXPECT_EQ(r.I("alloc_rc"), 2) << r.out;
  EXPECT_EQ(CountLines(r.out, "ERROR"), 1) << r.out;
  EXPECT_EQ(CountLines(r.out, "armed this container"), 1) << r.out;
}

// ---- Environment semantics and the device plugin's limits file. ----

TEST_F(VgpuE2e, ZeroEmptyOrMalformedPerDeviceLimitFallsBackToTheGlobalOne) {
  for (const char* v : {"0", "", "junk", "0m"}) {
    SCOPED_TRACE(std::string("CUDA_DEVICE_MEMORY_LIMIT_0=") + v);
    Result r =
        Run({VGPU_PROG, "exact"},
            With(BaseEnv(kOneGpu, v[0] ? v : "empty"),
                 {"CUDA_DEVICE_MEMORY_LIMIT=1Gi", std::string("CUDA_DEVICE_MEMORY_LIMIT_0=") + v}));
    ASSERT_TRUE(r.Exited(0)) << r.out;
    EXPECT_EQ(r.U("start_total"), kGi);
    EXPECT_EQ(r.I("alloc_one_more_rc"), 2);
  }
}

// libvgpu does not read CUDA_DISABLE_CONTROL (the device plugin does, to skip /etc/ld.so.preload):
// in a process that has libvgpu loaded it lifts nothing, with or without the limits file.
TEST_F(VgpuE2e, DisableControlInTheEnvironmentLiftsNothing) {
  for (const char* v : {"true", "1", "TRUE"}) {
    SCOPED_TRACE(v);
    Result r =
        Run({VGPU_PROG, "exact"},
            With(BaseEnv(kOneGpu, std::string("dc") + v),
                 {"CUDA_DEVICE_MEMORY_LIMIT=1Gi", std::string("CUDA_DISABLE_CONTROL=") + v}));
    ASSERT_TRUE(r.Exited(0)) << r.out;
    EXPECT_EQ(r.U("start_total"), kGi);
    EXPECT_EQ(r.I("alloc_one_more_rc"), 2);
  }
}

TEST_F(VgpuE2e, ArmedLimitsCannotBeLiftedFromTheEnvironment) {
  const std::string region = dir_ + "/regionarmed.cache";
  const std::string lib = ArmedLibrary(
      "# written by the device plugin\n"
      "CUDA_DEVICE_MEMORY_LIMIT_0=1024m\n"
      "CUDA_DEVICE_SM_LIMIT=30\n"
      "GPU_CORE_UTILIZATION_POLICY=default\n"
      "CUDA_DEVICE_MEMORY_SHARED_CACHE=" +
      region + "\n");
  ASSERT_FALSE(lib.empty());
  const std::vector<Env> attempts = {
      {"CUDA_DEVICE_MEMORY_LIMIT_0=0"},
      {"CUDA_DEVICE_MEMORY_LIMIT_0="},
      {"CUDA_DEVICE_MEMORY_LIMIT_0=junk", "CUDA_DEVICE_MEMORY_LIMIT=0"},
      {"CUDA_DISABLE_CONTROL=true", "CUDA_DEVICE_MEMORY_LIMIT_0=8Gi",
       "CUDA_DEVICE_MEMORY_LIMIT=8Gi"},
      {"CUDA_DEVICE_MEMORY_SHARED_CACHE=" + dir_ + "/mine.cache",
       "GPU_CORE_UTILIZATION_POLICY=disable", "CUDA_DEVICE_SM_LIMIT=0"},
  };
  for (const Env& extra : attempts) {
    SCOPED_TRACE(extra.front());
    Env env = With(BaseEnv(kOneGpu), {"LD_PRELOAD=" + lib});
    env = With(env, extra);
    Result r = Run({VGPU_PROG, "exact"}, env);
    ASSERT_TRUE(r.Exited(0)) << r.out;
    EXPECT_EQ(r.U("start_total"), kGi);
    EXPECT_EQ(r.U("start_free"), kGi - kCtx);
    EXPECT_EQ(r.I("alloc_one_more_rc"), 2);
  }
  vgpu_region reg;
  ASSERT_TRUE(ReadRegion("armed", &reg)) << "the limits file names the region";
  EXPECT_EQ(reg.devices[0].limit_bytes, kGi);
  EXPECT_EQ(reg.devices[0].sm_limit_pct, 30u);
  EXPECT_EQ(reg.hdr.policy, VGPU_POLICY_DEFAULT);
  struct stat st;
  EXPECT_NE(stat((dir_ + "/mine.cache").c_str(), &st), 0);
  EXPECT_NE(stat((dir_ + "/region.cache").c_str(), &st), 0);
  // The environment may still make the policy stricter.
  unlink(region.c_str());
  Result f = Run({VGPU_PROG, "exact"}, With(With(BaseEnv(kOneGpu), {"LD_PRELOAD=" + lib}),
                                            {"GPU_CORE_UTILIZATION_POLICY=force"}));
  ASSERT_TRUE(f.Exited(0)) << f.out;
  ASSERT_TRUE(ReadRegion("armed", &reg));
  EXPECT_EQ(reg.hdr.policy, VGPU_POLICY_FORCE);
}

// A context is charged even when NVML lists more processes on the device than a fixed array holds.
TEST_F(VgpuE2e, ContextIsChargedWithMoreThan64ProcessesOnTheDevice) {
  const char* big = "NVIDIA A100-SXM4-80GB:81920:108";
  Env plain;  // the other processes: the fake driver only, no libvgpu
  for (const std::string& e : BaseEnv(big)) {
    if (e.rfind("LD_PRELOAD=", 0) != 0) plain.push_back(e);
  }
  const std::string flag = dir_ + "/release";
  std::vector<Proc> holders;
  for (int i = 0; i < 70; i++) {
    holders.push_back(Start({VGPU_PROG, "hold", flag + std::to_string(i)}, plain));
  }
  for (int i = 0; i < 70; i++) ASSERT_TRUE(WaitForFile(flag + std::to_string(i) + ".ready")) << i;
  Result r = Run({VGPU_PROG, "exact"}, With(BaseEnv(big), {"CUDA_DEVICE_MEMORY_LIMIT=1Gi"}));
  for (int i = 0; i < 70; i++) Touch(flag + std::to_string(i));
  for (Proc& p : holders) EXPECT_TRUE(Wait(p).Exited(0));
  ASSERT_TRUE(r.Exited(0)) << r.out;
  EXPECT_EQ(r.U("start_free"), kGi - kCtx) << "the context's 300 MiB must be charged";
}

// Virtual device memory (CUDA_OVERSUBSCRIBE, deviceMemoryScaling > 1): a 12 GiB limit on an 8 GiB
// card. Allocations within the limit succeed (beyond the card as managed memory, which the fake
// keeps in host memory), the limit still holds, and every report shows the virtual device.
TEST_F(VgpuE2e, OversubscribedLimitBeyondTheCardIsVirtualDeviceMemory) {
  const uint64_t limit = 12 * kGi;
  Result r =
      Run({VGPU_PROG, "exact"},
          With(BaseEnv(kOneGpu), {"CUDA_DEVICE_MEMORY_LIMIT=12Gi", "CUDA_OVERSUBSCRIBE=true"}));
  ASSERT_TRUE(r.Exited(0)) << r.out;
  EXPECT_EQ(r.U("start_total"), limit);
  EXPECT_EQ(r.U("start_devtotal"), limit);
  EXPECT_EQ(r.U("start_free"), limit - kCtx);
  EXPECT_EQ(r.I("alloc_free_rc"), 0) << "11.7 GiB on an 8 GiB card";
  EXPECT_EQ(r.I("alloc_one_more_rc"), 2);
  EXPECT_EQ(r.U("full_free"), 0u);
  EXPECT_EQ(r.I("alloc_over_rc"), 2);
  EXPECT_EQ(r.I("alloc_again_rc"), 0);
  EXPECT_EQ(r.U("end_free"), limit - kCtx);
  for (const char* tag : {"start", "full", "end"}) {
    std::string t = tag;
    EXPECT_EQ(r.U(t + "_nvml_total"), r.U(t + "_total")) << t;
    EXPECT_EQ(r.U(t + "_nvml_free"), r.U(t + "_free")) << t;
  }
  // As the device plugin arms it (limits file, as
  // AllocateEnvTest.LimitsFileMirrorsTheArmedEnvironment writes it for deviceMemoryScaling > 1):
  // the environment cannot turn it off.
  const std::string lib = ArmedLibrary(
      "CUDA_DEVICE_MEMORY_LIMIT_0=12288m\nCUDA_OVERSUBSCRIBE=true\n"
      "CUDA_DEVICE_MEMORY_SHARED_CACHE=" +
      dir_ + "/regionarmed.cache\n");
  ASSERT_FALSE(lib.empty());
  Result armed = Run({VGPU_PROG, "exact"},
                     With(BaseEnv(kOneGpu), {"LD_PRELOAD=" + lib, "CUDA_OVERSUBSCRIBE=false"}));
  ASSERT_TRUE(armed.Exited(0)) << armed.out;
  EXPECT_EQ(armed.U("start_total"), limit);
  EXPECT_EQ(armed.I("alloc_free_rc"), 0);
  EXPECT_EQ(armed.I("alloc_one_more_rc"), 2);
  // Without CUDA_OVERSUBSCRIBE the same limit is capped by the card.
  Result plain =
      Run({VGPU_PROG, "exact"}, With(BaseEnv(kOneGpu, "plain"), {"CUDA_DEVICE_MEMORY_LIMIT=12Gi"}));
  ASSERT_TRUE(plain.Exited(0)) << plain.out;
  EXPECT_EQ(plain.U("start_total"), 8192 * kMi);
}

// A process that only uses NVML (nvidia-smi in the container) sees the same virtual device.
TEST_F(VgpuE2e, NvmlOnlyProcessSeesTheVirtualDevice) {
  Result r =
      Run({VGPU_PROG, "nvmlinfo"},
          With(BaseEnv(kOneGpu), {"CUDA_DEVICE_MEMORY_LIMIT=12Gi", "CUDA_OVERSUBSCRIBE=true"}));
  ASSERT_TRUE(r.Exited(0)) << r.out;
  EXPECT_EQ(r.U("nvml_total"), 12 * kGi);
  EXPECT_EQ(r.U("nvml_free"), 12 * kGi);
}

// deviceMemoryScaling 2 (CUDA_DEVICE_MEMORY_SCALING=2): the container's physical share of an 8 GiB
// card is half its 12 GiB limit. Device memory the driver cannot move stays within the share (the
// context included); the rest of the limit is managed memory, which the fake keeps resident while
// the card has room and pages out to make room for device memory (a later context); the limit and
// every report hold as for plain memory.
TEST_F(VgpuE2e, VirtualDeviceMemoryBeyondThePhysicalShareIsManaged) {
  const uint64_t limit = 12 * kGi, share = 6 * kGi, chunk = 256 * kMi;
  Result r = Run({VGPU_PROG, "virtual", "256"},
                 With(BaseEnv(kOneGpu), {"CUDA_DEVICE_MEMORY_LIMIT=12Gi", "CUDA_OVERSUBSCRIBE=true",
                                         "CUDA_DEVICE_MEMORY_SCALING=2"}));
  ASSERT_TRUE(r.Exited(0)) << r.out;
  EXPECT_EQ(r.U("start_total"), limit);
  EXPECT_EQ(r.U("start_free"), limit - kCtx);
  EXPECT_EQ(r.I("chunks"), static_cast<int64_t>((limit - kCtx) / chunk)) << r.out;
  EXPECT_EQ(r.I("last_rc"), 2) << "the virtual limit holds";
  // What the process holds on the device that the driver cannot page: the context and the chunks
  // that fit in the share.
  const uint64_t plain = (share - kCtx) / chunk * chunk;
  EXPECT_EQ(r.U("nvml_proc"), kCtx + plain) << r.out;
  EXPECT_LE(r.U("resident_max"), 8192 * kMi) << "never more than the card";
  EXPECT_GT(r.U("resident_max"), kCtx + plain) << "managed memory is resident while it fits";
  EXPECT_EQ(r.U("full_free"), limit - kCtx - (limit - kCtx) / chunk * chunk);
  EXPECT_EQ(r.I("ctx_rc"), 0) << "the context pages managed memory out";
  EXPECT_EQ(r.U("ctx_charged"), kCtx) << "a context is charged though managed memory is held";
  EXPECT_EQ(r.I("managed_rc"), 0);
  EXPECT_EQ(r.I("managed_over_rc"), 2);
  EXPECT_EQ(r.U("managed_charged"), chunk);
  EXPECT_EQ(r.U("end_free"), limit - kCtx);
  for (const char* tag : {"start", "full", "end"}) {
    std::string t = tag;
    EXPECT_EQ(r.U(t + "_nvml_total"), r.U(t + "_total")) << t;
    EXPECT_EQ(r.U(t + "_nvml_free"), r.U(t + "_free")) << t;
    EXPECT_EQ(r.U(t + "_devtotal"), limit) << t;
  }
  // A scaling that cannot be read: one ERROR line, the share is the whole card (device memory until
  // the driver refuses it), the limit still holds.
  Result bad =
      Run({VGPU_PROG, "virtual", "256"},
          With(BaseEnv(kOneGpu, "bad"), {"CUDA_DEVICE_MEMORY_LIMIT=12Gi", "CUDA_OVERSUBSCRIBE=true",
                                         "CUDA_DEVICE_MEMORY_SCALING=two"}),
          /*with_stderr=*/true);
  ASSERT_TRUE(bad.Exited(0)) << bad.out;
  EXPECT_NE(bad.out.find("CUDA_DEVICE_MEMORY_SCALING=\"two\""), std::string::npos) << bad.out;
  EXPECT_EQ(bad.I("chunks"), static_cast<int64_t>((limit - kCtx) / chunk)) << bad.out;
  EXPECT_EQ(bad.U("nvml_proc"), kCtx + (8192 * kMi - kCtx) / chunk * chunk) << bad.out;
  EXPECT_EQ(bad.I("ctx_rc"), 2) << "the card is full of memory the driver cannot page";
  EXPECT_EQ(bad.U("end_free"), limit - kCtx);
}

}  // namespace
