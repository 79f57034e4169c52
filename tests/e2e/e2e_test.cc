// End-to-end test of the whole slice, no GPU, no cluster (tests/e2e/README.md): the fake API server
// (in this process), the real `hami scheduler`, `hami device-plugin` and `hami monitor` as child
// processes, the fake kubelet (in this process) and a "container" process started with exactly what
// Allocate returned, under libvgpu.so with the fake libcuda / libnvidia-ml.
//
//   pod -> POST /webhook (AdmissionReview, JSONPatch applied) -> pod created in the fake API server
//       -> POST /filter (ExtenderArgs, NodeNames: nodeCacheCapable) -> POST /bind
//       (ExtenderBindingArgs)
//       -> kubelet: GetPreferredAllocation + Allocate over the plugin's unix socket
//       -> container process (env + emulated mounts) -> CUDA_ERROR_OUT_OF_MEMORY past its limit
//       -> GET /metrics of `hami monitor` reports its usage.
//
// Waits are bounded by generous deadlines (a loaded 2-core CI machine); nothing asserts on time.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "core/annotations.h"
#include "deviceplugin/testing/fake_kubelet.h"
#include "http/testing/raw_client.h"
#include "k8s/testing/fake_apiserver.h"
#include "k8s/testing/kubeconfig.h"
#include "k8s/testing/test_util.h"
#include "tests/testing/child.h"
#include "vendors/nvidia/annotations.h"

namespace hami::e2e {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using k8s::testing::Eventually;
using std::chrono::seconds;

constexpr int64_t kMiB = 1 << 20;
constexpr int kCudaErrorOutOfMemory = 2;
constexpr char kNode[] = "node1";
constexpr char kNamespace[] = "default";
// The node's "hardware": one T4 in the fake driver's shared state, shared by every container. One
// GPU, because the fakes cannot hide a node's other GPUs from a container as the NVIDIA runtime
// does: on a two-GPU fake node, libvgpu would place the container's GPU at its node index
// (README.md, limits).
constexpr char kDevices[] = "Tesla T4:15360:40";
constexpr int kGpus = 1;
constexpr int kSplitCount = 4;

// ---------------------------------------------------------------------------------------------
// Child processes. Each one dies with this process (PR_SET_PDEATHSIG) and is stopped (SIGTERM,
// then SIGKILL) when its handle goes away, so a failed assertion never leaves a process behind.

using testprocess::Child;

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

using http::testing::FreeLoopbackPort;

// Value of the first sample of `metric` whose labels contain every `label="value"` given.
std::optional<double> Sample(const std::string& exposition, const std::string& metric,
                             const std::map<std::string, std::string>& labels) {
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(metric + "{", 0) != 0) continue;
    const size_t close = line.rfind('}');
    if (close == std::string::npos) continue;
    const std::string set = line.substr(metric.size() + 1, close - metric.size() - 1);
    bool match = true;
    for (const auto& [k, v] : labels)
      match = match && set.find(k + "=\"" + v + "\"") != std::string::npos;
    if (!match) continue;
    try {
      return std::stod(line.substr(close + 1));
    } catch (...) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// A pod as a user writes it: one container asking for one GPU and `gpumem` MiB.
Json UserPod(const std::string& name, int gpumem) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", kNamespace}}},
          {"spec",
           {{"containers",
             {{{"name", "cuda"},
               {"image", "nvidia/cuda:12.4.0-base-ubuntu22.04"},
               {"resources",
                {{"limits",
                  {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", std::to_string(gpumem)}}}}}}}}}}};
}

// ---------------------------------------------------------------------------------------------

class SliceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hami-e2e-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    region_root_ = dir_ + "/regions";
    fs::create_directories(region_root_);
    fs::create_directories(dir_ + "/vgpulock");
    state_ = dir_ + "/fakegpu.state";
    // The host file mounted as the container's /etc/ld.so.preload (deploy installs it on the node).
    ld_preload_ = dir_ + "/ld.so.preload";
    std::ofstream(ld_preload_) << "/usr/local/vgpu/libvgpu.so\n";

    // The cluster: one node, as kubelet registered it; the device plugin adds the GPU annotations.
    ASSERT_TRUE(api_.Start().ok());
    Json node = {
        {"apiVersion", "v1"},
        {"kind", "Node"},
        {"metadata",
         {{"name", kNode},
          {"annotations", {{vendors::nvidia::kNodeHandshake, "Requesting_2026-11-30 05:00:00"}}}}},
        {"status",
         {{"allocatable", {{"nvidia.com/gpu", std::to_string(kGpus * kSplitCount)}}},
          {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
    ASSERT_TRUE(api_.Upsert("nodes", node).ok());
    kubeconfig_ = k8s::testing::WriteTokenKubeconfig(dir_ + "/kubeconfig", api_.url());

    // kubelet and the device plugin.
    kubelet_ = std::make_unique<deviceplugin::testing::FakeKubelet>(dir_ + "/device-plugins");
    ASSERT_TRUE(kubelet_->Start().ok());
    // kubelet's PodResources API: how the plugin tells apart pods waiting for the same device
    // count.
    const std::string pod_resources = dir_ + "/pod-resources.sock";
    ASSERT_TRUE(kubelet_->ServePodResources(pod_resources).ok());
    device_plugin_ = Spawn("device-plugin",
                           {E2E_HAMI,
                            "device-plugin",
                            "--kubeconfig",
                            kubeconfig_,
                            "--node-name",
                            kNode,
                            "--plugin-dir",
                            dir_ + "/device-plugins",
                            "--split-count",
                            std::to_string(kSplitCount),
                            "--libvgpu-path",
                            E2E_LIBVGPU,
                            "--ld-preload-path",
                            ld_preload_,
                            "--region-root",
                            region_root_,
                            "--lock-dir",
                            dir_ + "/vgpulock",
                            "--pod-resources-socket",
                            pod_resources,
                            "--register-interval",
                            "1",
                            "--fail-on-init-error",
                            "--log-level",
                            "info"},
                           NodeEnv(), false, ExtraPluginArgs());
    ASSERT_NE(device_plugin_, nullptr);
    ASSERT_TRUE(kubelet_->WaitForRegistrations(1, seconds(60))) << Logs();
    ASSERT_TRUE(kubelet_->WaitForDevices(
        [](const auto& d) { return d.size() == kGpus * kSplitCount; }, seconds(60)))
        << Logs();
    ASSERT_TRUE(Eventually(
        [&] {
          auto n = api_.Get("nodes", "", kNode);
          return n && !(*n)["metadata"]["annotations"]
                           .value(vendors::nvidia::kNodeNvidiaRegister, "")
                           .empty();
        },
        seconds(60)))
        << Logs();

    // The control plane. Started after the node registered, so that its first list has the GPUs.
    const int sched_port = FreeLoopbackPort(), extender_port = FreeLoopbackPort();
    ASSERT_GT(sched_port, 0);
    ASSERT_GT(extender_port, 0);
    scheduler_ = Spawn("scheduler",
                       {E2E_HAMI, "scheduler", "--kubeconfig", kubeconfig_, "--http-bind",
                        "127.0.0.1:" + std::to_string(sched_port), "--extender-bind",
                        "127.0.0.1:" + std::to_string(extender_port), "--leader-elect=false",
                        "--metrics-bind", "", "--threads", "4", "--log-level", "info"},
                       BaseEnv());
    ASSERT_NE(scheduler_, nullptr);
    sched_http_ = std::make_unique<httplib::Client>("127.0.0.1", sched_port);
    sched_http_->set_connection_timeout(5);
    sched_http_->set_read_timeout(60);
    extender_http_ = std::make_unique<httplib::Client>("127.0.0.1", extender_port);
    extender_http_->set_connection_timeout(5);
    extender_http_->set_read_timeout(60);
    ASSERT_TRUE(Eventually(
        [&] {
          auto r = sched_http_->Get("/readyz");
          return r && r->status == 200;
        },
        seconds(60)))
        << Logs();

    // The node exporter.
    const int monitor_port = FreeLoopbackPort();
    ASSERT_GT(monitor_port, 0);
    monitor_ = Spawn("monitor",
                     {E2E_HAMI, "monitor", "--metrics-bind",
                      "127.0.0.1:" + std::to_string(monitor_port), "--region-root", region_root_,
                      "--node-name", kNode, "--kubeconfig", kubeconfig_, "--log-level", "info"},
                     NodeEnv());
    ASSERT_NE(monitor_, nullptr);
    monitor_http_ = std::make_unique<httplib::Client>("127.0.0.1", monitor_port);
    monitor_http_->set_connection_timeout(5);
    monitor_http_->set_read_timeout(60);
    ASSERT_TRUE(Eventually(
        [&] {
          auto r = monitor_http_->Get("/healthz");
          return r && r->status == 200;
        },
        seconds(60)))
        << Logs();
  }

  void TearDown() override {
    for (auto& c : containers_) c->Stop();
    if (monitor_) monitor_->Stop();
    if (scheduler_) scheduler_->Stop();
    if (device_plugin_) device_plugin_->Stop();
    if (kubelet_) kubelet_->Stop();
    if (HasFailure()) {
      std::fprintf(stderr, "%s", Logs().c_str());
      std::fprintf(stderr, "(temp dir kept: %s)\n", dir_.c_str());
    } else if (!dir_.empty()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }

  std::vector<std::string> BaseEnv() const { return {"PATH=/usr/bin:/bin", "HOME=" + dir_}; }
  // What a process on the node sees of the GPUs: the fake driver and its shared state.
  std::vector<std::string> NodeEnv() const {
    auto env = BaseEnv();
    env.push_back(std::string("LD_LIBRARY_PATH=") + E2E_FAKES_DIR);
    env.push_back(std::string("FAKEGPU_DEVICES=") + kDevices);
    env.push_back("FAKEGPU_STATE=" + state_);
    return env;
  }

  // Device plugin flags a test adds (node settings such as deviceMemoryScaling).
  virtual std::vector<std::string> ExtraPluginArgs() const { return {}; }

  std::unique_ptr<Child> Spawn(const std::string& name, std::vector<std::string> argv,
                               const std::vector<std::string>& env, bool pipes = false,
                               const std::vector<std::string>& extra_args = {}) {
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    auto c = Child::Start(name, argv, env, dir_ + "/" + name + ".log", pipes);
    if (c) logs_.push_back({name, dir_ + "/" + name + ".log"});
    return c;
  }

  std::string Logs() const {
    std::string out;
    for (const auto& [name, path] : logs_) {
      std::string text = ReadFile(path);
      if (text.size() > 12000) text = "...\n" + text.substr(text.size() - 12000);
      out += "---- " + name + " (" + path + ") ----\n" + text + "\n";
    }
    return out;
  }

  // --- kube-apiserver's admission + kube-scheduler's extender calls ------------------------------

  // POST /webhook; returns the pod with the JSONPatch applied (null on denial or error).
  Json Admit(const Json& pod) {
    Json review = {{"apiVersion", "admission.k8s.io/v1"},
                   {"kind", "AdmissionReview"},
                   {"request",
                    {{"uid", "e2e-" + pod["metadata"]["name"].get<std::string>()},
                     {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                     {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                     {"namespace", kNamespace},
                     {"operation", "CREATE"},
                     {"object", pod}}}};
    auto r = sched_http_->Post("/webhook", review.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : httplib::to_string(r.error()));
    if (!r || r->status != 200) return nullptr;
    Json resp = Json::parse(r->body, nullptr, false);
    EXPECT_EQ(resp.value("kind", ""), "AdmissionReview") << r->body;
    const Json& response = resp["response"];
    EXPECT_EQ(response.value("uid", ""), review["request"]["uid"]) << r->body;
    EXPECT_TRUE(response.value("allowed", false)) << r->body;
    if (!response.value("allowed", false)) return nullptr;
    if (!response.contains("patch")) return pod;
    EXPECT_EQ(response.value("patchType", ""), "JSONPatch") << r->body;
    std::string patch;
    EXPECT_TRUE(absl::Base64Unescape(response["patch"].get<std::string>(), &patch)) << r->body;
    Json ops = Json::parse(patch, nullptr, false);
    EXPECT_TRUE(ops.is_array()) << patch;
    if (!ops.is_array()) return nullptr;
    return pod.patch(ops);
  }

  // POST /filter as kube-scheduler with nodeCacheCapable: true (NodeNames, no Nodes).
  Json Filter(const Json& pod) {
    Json args = {{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", {kNode}}};
    auto r = extender_http_->Post("/filter", args.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : httplib::to_string(r.error()));
    if (!r || r->status != 200) return nullptr;
    return Json::parse(r->body, nullptr, false);
  }

  // POST /bind; returns the Error field ("" = bound).
  std::string Bind(const Json& pod, const std::string& node) {
    Json args = {{"PodName", pod["metadata"]["name"]},
                 {"PodNamespace", pod["metadata"]["namespace"]},
                 {"PodUID", pod["metadata"]["uid"]},
                 {"Node", node}};
    auto r = extender_http_->Post("/bind", args.dump(), "application/json");
    if (!r || r->status != 200)
      return r ? "HTTP " + std::to_string(r->status) : httplib::to_string(r.error());
    Json res = Json::parse(r->body, nullptr, false);
    return res.is_object() ? res.value("Error", "") : "unparsable: " + r->body;
  }

  // webhook -> create -> filter -> bind. Returns the pod as stored (with uid), null on failure.
  Json Schedule(const Json& user_pod) {
    const std::string name = user_pod["metadata"]["name"];
    Json admitted = Admit(user_pod);
    EXPECT_FALSE(admitted.is_null()) << name;
    if (admitted.is_null()) return nullptr;
    EXPECT_EQ(admitted["spec"].value("schedulerName", ""), "hami-scheduler") << admitted.dump();
    auto created = api_.Upsert("pods", admitted);
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return nullptr;

    Json filtered = Filter(*created);
    EXPECT_TRUE(filtered.is_object()) << name;
    if (!filtered.is_object()) return nullptr;
    EXPECT_EQ(filtered.value("Error", ""), "") << filtered.dump();
    EXPECT_EQ(filtered["NodeNames"], Json::array({kNode})) << filtered.dump();
    if (filtered["NodeNames"] != Json::array({kNode})) return nullptr;
    // The decision reaches the pod, in upstream's annotation, written after /filter has answered
    // (the extender's decision writer; /bind waits for it).
    std::optional<Json> after_filter;
    EXPECT_TRUE(Eventually([&] {
      after_filter = api_.Get("pods", kNamespace, name);
      if (!after_filter) return false;
      const Json& ann = (*after_filter)["metadata"]["annotations"];
      return ann.is_object() && !ann.value(vendors::nvidia::kNvidiaDevicesToAllocate, "").empty();
    })) << (after_filter ? after_filter->dump() : "pod gone");

    std::string err = Bind(*created, kNode);
    EXPECT_EQ(err, "") << name;
    if (!err.empty()) return nullptr;
    auto bound = api_.Get("pods", kNamespace, name);
    EXPECT_EQ((*bound)["spec"].value("nodeName", ""), kNode) << bound->dump();
    EXPECT_EQ((*bound)["metadata"]["annotations"].value(core::kBindPhase, ""),
              core::kBindPhaseAllocating)
        << bound->dump();
    return *bound;
  }

  // --- kubelet: admission of one container with one GPU replica -----------------------------

  // kubelet admits container `container` of pod `pod`: it lists the pod (PodResources), asks the
  // plugin's preference among the free healthy replicas, then calls Allocate with it.
  StatusOr<::v1beta1::ContainerAllocateResponse> KubeletAllocate(
      const std::string& pod, const std::string& container = "cuda") {
    auto r = kubelet_->AdmitPreferred(kNamespace, pod, container, 1);
    if (!r.ok()) return r.status();
    if (r->response.container_responses_size() != 1)
      return absl::InternalError("Allocate: not one container response");
    return r->response.container_responses(0);
  }

  // --- the container runtime ---------------------------------------------------------------

  // Host path of a container path under the response's mounts (longest container-path prefix).
  static std::string HostPath(const ::v1beta1::ContainerAllocateResponse& a,
                              const std::string& path) {
    const ::v1beta1::Mount* best = nullptr;
    for (const auto& m : a.mounts()) {
      const std::string& cp = m.container_path();
      if ((path == cp || path.rfind(cp + "/", 0) == 0) &&
          (!best || cp.size() > best->container_path().size()))
        best = &m;
    }
    return best ? best->host_path() + path.substr(best->container_path().size()) : path;
  }

  // Starts the container's process with exactly the environment Allocate returned (paths inside
  // the container mapped onto their mounts' host paths) and the preload its /etc/ld.so.preload
  // mount names. The GPUs it sees are NVIDIA_VISIBLE_DEVICES, as the NVIDIA container runtime does.
  Child* RunContainer(const std::string& name, const ::v1beta1::ContainerAllocateResponse& a) {
    std::vector<std::string> env = NodeEnv();
    for (const auto& [k, v] : a.envs())
      env.push_back(k + "=" + (v.rfind('/', 0) == 0 ? HostPath(a, v) : v));
    if (a.envs().count("NVIDIA_VISIBLE_DEVICES"))
      env.push_back("CUDA_VISIBLE_DEVICES=" + a.envs().at("NVIDIA_VISIBLE_DEVICES"));
    std::string preload;
    for (const auto& m : a.mounts()) {
      if (m.container_path() != "/etc/ld.so.preload") continue;
      std::istringstream lines(ReadFile(m.host_path()));
      std::string line;
      while (std::getline(lines, line))
        if (!line.empty() && line[0] != '#')
          preload += (preload.empty() ? "" : ":") + HostPath(a, line);
    }
    EXPECT_FALSE(preload.empty()) << "no /etc/ld.so.preload mount";
    env.push_back("LD_PRELOAD=" + preload);
    auto c = Spawn(name, {E2E_CONTAINER_PROG, "256"}, env, /*pipes=*/true);
    if (!c) return nullptr;
    containers_.push_back(std::move(c));
    return containers_.back().get();
  }

  // What the exporter reports for a container, once it reports it at all.
  std::optional<double> Scraped(const std::string& metric, const std::string& pod,
                                const std::string& container, double at_least) {
    std::optional<double> v;
    Eventually(
        [&] {
          auto r = monitor_http_->Get("/metrics");
          if (!r || r->status != 200) return false;
          last_scrape_ = r->body;
          v = Sample(r->body, metric,
                     {{"namespace", kNamespace}, {"pod", pod}, {"container", container}});
          return v && *v >= at_least;
        },
        seconds(60));
    return v;
  }

  // Runs the container of `response`, checks its limit of `limit_mib` from inside and returns it
  // (holding its memory until its stdin closes).
  Child* RunAndCheckLimit(const std::string& pod,
                          const ::v1beta1::ContainerAllocateResponse& response, int64_t limit_mib,
                          int64_t* held) {
    Child* c = RunContainer(pod, response);
    if (c == nullptr) {
      ADD_FAILURE() << "cannot start the container of " << pod;
      return nullptr;
    }
    std::map<std::string, std::string> kv;
    const bool ready = c->ReadUntil("ready", &kv, seconds(120));
    EXPECT_TRUE(ready) << pod << ":\n" << c->output() << Logs();
    if (!ready) return nullptr;
    const std::string& out = c->output();
    EXPECT_EQ(kv["total"], std::to_string(limit_mib * kMiB)) << out;
    EXPECT_EQ(kv["over_rc"], std::to_string(kCudaErrorOutOfMemory))
        << out;  // a single allocation past the limit
    int chunks = 0;
    for (const auto& [k, v] : kv) {
      if (k.rfind("chunk_rc_", 0) != 0) continue;
      ++chunks;
      EXPECT_EQ(v, "0") << k << "\n" << out;  // every allocation up to the limit succeeds
    }
    EXPECT_GT(chunks, 0) << out;
    EXPECT_EQ(kv["fill_rc"], "0") << out;  // ... exactly up to it
    EXPECT_EQ(kv["one_more_rc"], std::to_string(kCudaErrorOutOfMemory))
        << out;  // and not a MiB more
    *held = kv.count("held") ? std::stoll(kv["held"]) : 0;
    EXPECT_GT(*held, (limit_mib / 2) * kMiB) << out;
    EXPECT_LE(*held, limit_mib * kMiB) << out;
    return c;
  }

  void CheckExported(const std::string& pod, int64_t limit_mib, int64_t held) {
    auto used = Scraped("hami_vgpu_memory_used_bytes", pod, "cuda", static_cast<double>(held));
    ASSERT_TRUE(used.has_value()) << pod << "\n" << last_scrape_ << Logs();
    EXPECT_GE(*used, static_cast<double>(held)) << last_scrape_;
    EXPECT_LE(*used, static_cast<double>(limit_mib * kMiB)) << last_scrape_;
    auto dev =
        Scraped("hami_container_device_memory_bytes", pod, "cuda", static_cast<double>(held));
    ASSERT_TRUE(dev.has_value()) << pod << "\n" << last_scrape_;
    EXPECT_EQ(*dev, *used) << last_scrape_;
    auto limit = Sample(last_scrape_, "hami_vgpu_memory_limit_bytes",
                        {{"namespace", kNamespace}, {"pod", pod}, {"container", "cuda"}});
    ASSERT_TRUE(limit.has_value()) << last_scrape_;
    EXPECT_EQ(*limit, static_cast<double>(limit_mib * kMiB)) << last_scrape_;
  }

  static std::string DecidedUuid(const Json& pod) {
    const std::string a =
        pod["metadata"]["annotations"].value(vendors::nvidia::kNvidiaDevicesToAllocate, "");
    return a.substr(0, a.find(','));
  }

  k8s::testing::FakeApiServer api_;
  std::string dir_, region_root_, state_, ld_preload_, kubeconfig_;
  std::unique_ptr<deviceplugin::testing::FakeKubelet> kubelet_;
  std::unique_ptr<Child> device_plugin_, scheduler_, monitor_;
  std::vector<std::unique_ptr<Child>> containers_;
  std::vector<std::pair<std::string, std::string>> logs_;
  std::unique_ptr<httplib::Client> sched_http_, extender_http_, monitor_http_;
  std::string last_scrape_;
};

TEST_F(SliceTest, PodGetsItsLimitEnforcedAndExported) {
  Json pod = Schedule(UserPod("vec-add", 3000));
  ASSERT_FALSE(pod.is_null()) << Logs();
  const std::string uid = pod["metadata"]["uid"];
  const std::string uuid = DecidedUuid(pod);
  ASSERT_EQ(uuid.rfind("GPU-", 0), 0u) << pod.dump();

  auto alloc = KubeletAllocate("vec-add");
  ASSERT_TRUE(alloc.ok()) << alloc.status() << Logs();
  EXPECT_EQ(alloc->envs().at("NVIDIA_VISIBLE_DEVICES"), uuid);
  EXPECT_EQ(alloc->envs().at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
  // The region directory is this pod's container's, under the monitor's root.
  const std::string region = HostPath(*alloc, alloc->envs().at("CUDA_DEVICE_MEMORY_SHARED_CACHE"));
  EXPECT_EQ(fs::path(region).parent_path(), fs::path(region_root_) / (uid + "_cuda")) << region;
  ASSERT_TRUE(Eventually(
      [&] {
        auto p = api_.Get("pods", kNamespace, "vec-add");
        return p && (*p)["metadata"]["annotations"].value(core::kBindPhase, "") ==
                        core::kBindPhaseSuccess;
      },
      seconds(30)));

  int64_t held = 0;
  Child* c = RunAndCheckLimit("vec-add", *alloc, 3000, &held);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(fs::exists(region)) << region;  // libvgpu created its region where the monitor looks
  CheckExported("vec-add", 3000, held);

  c->CloseStdin();
  std::map<std::string, std::string> kv;
  EXPECT_TRUE(c->ReadUntil("done", &kv, seconds(60))) << c->output();
  ASSERT_TRUE(c->WaitExit(seconds(60)));
  EXPECT_TRUE(WIFEXITED(c->status()) && WEXITSTATUS(c->status()) == 0) << c->status();
}

TEST_F(SliceTest, TwoPodsBoundTogetherEachGetTheirOwnLimits) {
  // Both pods are bound before kubelet admits either (kubelet's Allocate names only replica IDs).
  const std::map<std::string, int64_t> limits = {{"small", 3000}, {"large", 5000}};
  std::map<std::string, Json> pods;
  for (const auto& [name, mib] : limits) {
    pods[name] = Schedule(UserPod(name, static_cast<int>(mib)));
    ASSERT_FALSE(pods[name].is_null()) << name << Logs();
  }

  // kubelet admits them in the other order than they were bound (the newest first).
  std::map<std::string, ::v1beta1::ContainerAllocateResponse> got;
  for (auto it = limits.rbegin(); it != limits.rend(); ++it) {
    const std::string& name = it->first;
    auto alloc = KubeletAllocate(name);
    ASSERT_TRUE(alloc.ok()) << "kubelet admitting " << name << ": " << alloc.status() << Logs();
    // Whose allocation is it? Its region directory names the pod UID; its limits must be that
    // pod's.
    const std::string region =
        HostPath(*alloc, alloc->envs().at("CUDA_DEVICE_MEMORY_SHARED_CACHE"));
    std::string owner;
    for (const auto& [n, p] : pods)
      if (fs::path(region).parent_path().filename() ==
          p["metadata"]["uid"].get<std::string>() + "_cuda")
        owner = n;
    ASSERT_FALSE(owner.empty()) << region;
    EXPECT_EQ(owner, name) << "kubelet admitted " << name << " but got " << owner
                           << "'s allocation";
    EXPECT_EQ(got.count(owner), 0u) << owner << " allocated twice";
    EXPECT_EQ(alloc->envs().at("CUDA_DEVICE_MEMORY_LIMIT_0"),
              std::to_string(limits.at(owner)) + "m")
        << owner;
    EXPECT_EQ(alloc->envs().at("NVIDIA_VISIBLE_DEVICES"), DecidedUuid(pods[owner])) << owner;
    got[owner] = *alloc;
  }
  ASSERT_EQ(got.size(), 2u);
  for (const auto& [name, mib] : limits) {
    ASSERT_TRUE(Eventually(
        [&, n = name] {
          auto p = api_.Get("pods", kNamespace, n);
          return p && (*p)["metadata"]["annotations"].value(core::kBindPhase, "") ==
                          core::kBindPhaseSuccess;
        },
        seconds(30)))
        << name;
  }

  // Both containers run at the same time, each held to its own limit, each exported on its own.
  std::map<std::string, int64_t> held;
  std::vector<Child*> running;
  for (const auto& [name, mib] : limits) {
    Child* c = RunAndCheckLimit(name, got[name], mib, &held[name]);
    ASSERT_NE(c, nullptr) << name;
    running.push_back(c);
  }
  for (const auto& [name, mib] : limits) CheckExported(name, mib, held[name]);
  for (Child* c : running) {
    c->CloseStdin();
    ASSERT_TRUE(c->WaitExit(seconds(60))) << c->name();
    EXPECT_TRUE(WIFEXITED(c->status()) && WEXITSTATUS(c->status()) == 0)
        << c->name() << " " << c->status();
  }
}

// Virtual device memory through the device plugin: with deviceMemoryScaling 2 the node's T4 (15360
// MiB) registers 30720 MiB, a pod granted 20000 MiB gets CUDA_OVERSUBSCRIBE and the scaling from
// Allocate, and its process under libvgpu allocates its whole limit: past its physical share (10000
// MiB) and past the card itself, as managed memory; the limit holds and the exporter reports it.
class OversubscribedSliceTest : public SliceTest {
 protected:
  std::vector<std::string> ExtraPluginArgs() const override {
    return {"--device-memory-scaling", "2"};
  }
};

TEST_F(OversubscribedSliceTest, PodAllocatesBeyondTheCard) {
  constexpr int64_t kLimitMiB = 20000, kCardMiB = 15360;
  Json pod = Schedule(UserPod("big", kLimitMiB));
  ASSERT_FALSE(pod.is_null()) << Logs();
  auto alloc = KubeletAllocate("big");
  ASSERT_TRUE(alloc.ok()) << alloc.status() << Logs();
  EXPECT_EQ(alloc->envs().at("CUDA_DEVICE_MEMORY_LIMIT_0"), "20000m");
  EXPECT_EQ(alloc->envs().at("CUDA_OVERSUBSCRIBE"), "true");
  EXPECT_EQ(alloc->envs().at("CUDA_DEVICE_MEMORY_SCALING"), "2");
  int64_t held = 0;
  Child* c = RunAndCheckLimit("big", *alloc, kLimitMiB, &held);
  ASSERT_NE(c, nullptr);
  EXPECT_GT(held, kCardMiB * kMiB) << c->output();
  CheckExported("big", kLimitMiB, held);
  c->CloseStdin();
  ASSERT_TRUE(c->WaitExit(seconds(60)));
  EXPECT_TRUE(WIFEXITED(c->status()) && WEXITSTATUS(c->status()) == 0) << c->status();
}

}  // namespace
}  // namespace hami::e2e
