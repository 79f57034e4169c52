// The shipped ConfigMap (deploy/base/device-config.yaml) configures each binary it claims to: for
// every key of its `nvidia:` section, and every binary the option table says that key configures,
// a non-default value changes what that binary does (table test). The binaries are observed
// through the wiring their mains use (config_wiring.h): the extender's pod parse, the webhook's
// admission response, the device plugin's node registration and Allocate answer.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cmd/config_wiring.h"
#include "common/log.h"
#include "core/node_codec.h"
#include "deviceplugin/allocate_env.h"
#include "deviceplugin/node_devices.h"
#include "nlohmann/json.hpp"

namespace hami::cmd {
namespace {

using Json = nlohmann::json;

// The device-config.yaml text of the kustomize base's ConfigMap.
std::string ShippedConfig() {
  std::ifstream in("deploy/base/device-config.yaml");
  std::stringstream s;
  s << in.rdbuf();
  const YAML::Node doc = YAML::Load(s.str());
  return doc["data"]["device-config.yaml"].as<std::string>();
}

// `text` with nvidia.<key> set to `value`.
std::string WithKey(const std::string& text, const std::string& key, const std::string& value) {
  YAML::Node root = YAML::Load(text);
  root["nvidia"][key] = value;
  YAML::Emitter out;
  out << root;
  return out.c_str();
}

// Containers that together use every resource name, both the shipped and the renamed ones, and
// every defaulting path (count only, memory only, memory + count, percentage, cores, priority).
Json ProbePod() {
  auto ctr = [](const std::string& name, const Json& limits) {
    return Json{{"name", name}, {"image", "cuda"}, {"resources", {{"limits", limits}}}};
  };
  Json containers = Json::array({
      ctr("count", {{"nvidia.com/gpu", "1"}}),
      ctr("mem", {{"nvidia.com/gpumem", "1000"}}),
      ctr("mem-count", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "2000"}}),
      ctr("pct", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "50"}}),
      ctr("cores", {{"nvidia.com/gpu", "1"},
                    {"nvidia.com/gpumem", "3000"},
                    {"nvidia.com/gpucores", "30"},
                    {"nvidia.com/priority", "1"}}),
      ctr("renamed", {{"example.com/gpu", "2"},
                      {"example.com/mem", "4000"},
                      {"example.com/pct", "25"},
                      {"example.com/cores", "40"},
                      {"example.com/prio", "0"}}),
      ctr("cpu", {{"cpu", "1"}}),
  });
  return Json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "p"}, {"namespace", "ml"}, {"uid", "u1"}}},
              {"spec", {{"containers", containers}}}};
}

// hami scheduler (extender): the devices it books for the probe pod.
std::string ObserveScheduler(vendors::ConfigFile file) {
  vendors::VendorSet set(std::move(file.vendors));
  auto pod = set.ParsePod(ProbePod());
  if (!pod.ok()) return StrCat("error: ", pod.status().message());
  std::string out;
  for (const auto& c : pod->containers)
    for (const auto& d : c.devices)
      out += StrCat(c.name, ":", d.nums, ",", d.memreq_mib, ",", d.mem_percentage, ",", d.coresreq,
                    ",", d.priority, ";");
  return out;
}

// hami scheduler (webhook): the admission response for the probe pod.
std::string ObserveWebhook(vendors::ConfigFile file) {
  vendors::VendorSet set(std::move(file.vendors));
  webhook::WebhookOptions o;
  ConfigureWebhook(file.nvidia, &set, &o);
  webhook::Webhook wh(o);
  const Json review{{"apiVersion", "admission.k8s.io/v1"},
                    {"kind", "AdmissionReview"},
                    {"request",
                     {{"uid", "705ab4f5"},
                      {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                      {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                      {"namespace", "ml"},
                      {"operation", "CREATE"},
                      {"userInfo", {{"username", "admin"}}},
                      {"object", ProbePod()}}}};
  return wh.Handle(review.dump());
}

// hami device-plugin, no flags given: the advertised resource, the node registration of one GPU and
// the Allocate answer (environment and limits file) of one container.
std::string ObserveDevicePlugin(vendors::ConfigFile file) {
  deviceplugin::PluginConfig cfg;
  ConfigureDevicePlugin(
      file.nvidia, [](std::string_view) { return false; }, &cfg);
  gpu::GpuInfo g;
  g.uuid = "GPU-0";
  g.model = "Tesla T4";
  g.memory_mib = 16000;
  g.numa_node = 0;
  std::string out =
      StrCat(cfg.resource_name, "\n",
             core::EncodeNodeDevicesJson(deviceplugin::BuildNodeDevices({g}, {}, cfg)), "\n");
  deviceplugin::PendingPod pod;
  pod.uid = "u1";
  pod.namespace_ = "ml";
  pod.name = "p";
  deviceplugin::PendingContainer ctr;
  ctr.name = "c";
  core::ContainerDevice d;
  d.uuid = "GPU-0";
  d.vendor = "NVIDIA";
  d.usedmem_mib = 1000;
  d.usedcores = 30;
  ctr.devices = {d};
  auto a = deviceplugin::BuildContainerAllocation(pod, ctr, cfg, "x.cache", {{"GPU-0", 0}});
  if (!a.ok()) return StrCat(out, "error: ", a.status().message());
  for (const auto& [k, v] : a->envs) out += StrCat(k, "=", v, "\n");
  for (const auto& m : a->mounts) out += StrCat("mount ", m.container_path, "\n");
  for (const auto& [k, v] : a->annotations) out += StrCat("annotation ", k, "=", v, "\n");
  for (const auto& n : a->cdi_devices) out += StrCat("cdi ", n, "\n");
  return out + a->limits_file;
}

struct Row {
  const char* key;
  const char* value;  // not the shipped one
  vendors::ConfiguredBinary binary;
};

TEST(ConfigEffect, EveryShippedKeyChangesEachBinaryItConfigures) {
  spdlog::set_level(spdlog::level::warn);
  const Row rows[] = {
      {"resourceCountName", "example.com/gpu", vendors::kScheduler},
      {"resourceCountName", "example.com/gpu", vendors::kWebhook},
      {"resourceCountName", "example.com/gpu", vendors::kDevicePlugin},
      {"resourceMemoryName", "example.com/mem", vendors::kScheduler},
      {"resourceMemoryName", "example.com/mem", vendors::kWebhook},
      {"resourceMemoryPercentageName", "example.com/pct", vendors::kScheduler},
      {"resourceMemoryPercentageName", "example.com/pct", vendors::kWebhook},
      {"resourceCoreName", "example.com/cores", vendors::kScheduler},
      {"resourceCoreName", "example.com/cores", vendors::kWebhook},
      {"resourcePriorityName", "example.com/prio", vendors::kScheduler},
      {"resourcePriorityName", "example.com/prio", vendors::kWebhook},
      {"overwriteEnv", "true", vendors::kWebhook},
      {"defaultMemory", "5000", vendors::kScheduler},
      {"defaultCores", "20", vendors::kScheduler},
      {"defaultGPUNum", "2", vendors::kScheduler},
      {"defaultGPUNum", "2", vendors::kWebhook},
      {"memoryFactor", "2", vendors::kScheduler},
      {"deviceSplitCount", "4", vendors::kDevicePlugin},
      {"deviceMemoryScaling", "2", vendors::kDevicePlugin},
      {"deviceCoreScaling", "2", vendors::kDevicePlugin},
      {"gpuCorePolicy", "force", vendors::kWebhook},
      {"gpuCorePolicy", "force", vendors::kDevicePlugin},
      {"libCudaLogLevel", "3", vendors::kDevicePlugin},
      {"deviceListStrategy", "cdi-annotations", vendors::kDevicePlugin},
      {"deviceListStrategy", "cdi-cri", vendors::kDevicePlugin},
      {"deviceListStrategy", "volume-mounts", vendors::kDevicePlugin},
      {"deviceIDStrategy", "index", vendors::kDevicePlugin},
  };
  const std::string shipped = ShippedConfig();
  ASSERT_FALSE(shipped.empty());
  auto parse = [](const std::string& text) {
    auto f = vendors::ParseConfigFile(text, "device-config.yaml");
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? std::move(*f) : vendors::ConfigFile{};
  };
  auto observe = [&](vendors::ConfiguredBinary b, const std::string& text) {
    switch (b) {
      case vendors::kScheduler:
        return ObserveScheduler(parse(text));
      case vendors::kWebhook:
        return ObserveWebhook(parse(text));
      case vendors::kDevicePlugin:
        return ObserveDevicePlugin(parse(text));
      case vendors::kNotUsed:
        break;
    }
    return std::string();
  };
  std::set<std::pair<std::string, unsigned>> covered;
  for (const Row& r : rows) {
    SCOPED_TRACE(StrCat(r.key, "=", r.value, " binary ", static_cast<unsigned>(r.binary)));
    const std::string base = observe(r.binary, shipped);
    const std::string changed = observe(r.binary, WithKey(shipped, r.key, r.value));
    EXPECT_EQ(base.find("error"), std::string::npos) << base;
    EXPECT_EQ(changed.find("error"), std::string::npos) << changed;
    EXPECT_NE(base, changed);
    covered.insert({r.key, r.binary});
  }
  // Every key the ConfigMap ships, for every binary the option table says it configures, has a row:
  // a key read by no one, or a claimed binary that ignores it, fails here.
  const YAML::Node nvidia = YAML::Load(shipped)["nvidia"];
  ASSERT_TRUE(nvidia.IsMap());
  for (const auto& kv : nvidia) {
    const std::string key = kv.first.Scalar();
    const vendors::Option* option = nullptr;
    for (const auto& o : vendors::NvidiaOptions())
      if (key == o.key) option = &o;
    ASSERT_NE(option, nullptr) << key;
    EXPECT_NE(option->binaries, 0u) << key << " is shipped but configures no binary";
    for (unsigned bit : {vendors::kScheduler, vendors::kWebhook, vendors::kDevicePlugin}) {
      if (option->binaries & bit) {
        EXPECT_TRUE(covered.count({key, bit})) << key << " claims binary " << bit << ": add a row";
      }
    }
  }
}

// Flag > file > default for the device plugin; the node's config.json entry over both.
TEST(ConfigEffect, DevicePluginPrecedence) {
  auto file = vendors::ParseConfigFile(
      "nvidia:\n  deviceSplitCount: 4\n  libCudaLogLevel: 3\n  gpuCorePolicy: force\n", "dc.yaml");
  ASSERT_TRUE(file.ok()) << file.status();
  deviceplugin::PluginConfig defaults;
  deviceplugin::PluginConfig from_file = defaults;
  ConfigureDevicePlugin(
      file->nvidia, [](std::string_view) { return false; }, &from_file);
  EXPECT_EQ(from_file.split_count, 4);
  EXPECT_EQ(from_file.libcuda_log_level, "3");
  EXPECT_EQ(from_file.core_policy, "force");
  EXPECT_EQ(from_file.memory_scaling, defaults.memory_scaling);  // not in the file: default
  deviceplugin::PluginConfig flagged = defaults;
  flagged.split_count = 7;  // as --split-count=7 left it
  ConfigureDevicePlugin(
      file->nvidia, [](std::string_view f) { return f == "--split-count"; }, &flagged);
  EXPECT_EQ(flagged.split_count, 7);
  EXPECT_EQ(flagged.libcuda_log_level, "3");
  ASSERT_TRUE(deviceplugin::ApplyNodeConfig(
                  R"({"nodeconfig":[{"name":"n1","devicesplitcount":2}]})", "n1", &flagged)
                  .ok());
  EXPECT_EQ(flagged.split_count, 2);
  // The device list knobs: file under flag, as the others.
  auto cdi = vendors::ParseConfigFile(
      "nvidia:\n  deviceListStrategy: cdi-annotations\n  cdiAnnotationPrefix: example.com/\n"
      "  cdiKind: example.com/gpu\n  deviceIDStrategy: index\n",
      "dc.yaml");
  ASSERT_TRUE(cdi.ok()) << cdi.status();
  deviceplugin::PluginConfig c = defaults;
  ConfigureDevicePlugin(
      cdi->nvidia, [](std::string_view f) { return f == "--device-id-strategy"; }, &c);
  EXPECT_EQ(c.device_list_strategy, "cdi-annotations");
  EXPECT_EQ(c.cdi_annotation_prefix, "example.com/");
  EXPECT_EQ(c.cdi_kind, "example.com/gpu");
  EXPECT_EQ(c.device_id_strategy, "uuid") << "the flag (here its default) wins over the file";
}

}  // namespace
}  // namespace hami::cmd
