// The one device-config.yaml reader (config_file.h): the old extender parser's cases (knobs,
// defaults, errors), the vendor loader's strictness, the shipped files, and the doc table.
#include "vendors/config_file.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace hami::vendors {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Message(const Status& s) {
  return std::string(s.message());
}

TEST(ConfigFile, Table) {
  struct Case {
    const char* name;
    const char* yaml;
    bool ok;
    const char* error_part;
    std::string count_name;
    int64_t factor;
    std::string policy;
  };
  const Case cases[] = {
      {"deploy default",
       "nvidia:\n  resourceCountName: nvidia.com/gpu\n  memoryFactor: 1\n  gpuCorePolicy: "
       "default\n  deviceSplitCount: 10\n",
       true, "", "nvidia.com/gpu", 1, "default"},
      {"renamed + factor",
       "nvidia:\n  resourceCountName: example.com/vgpu\n  memoryFactor: 1024\n  disableCoreLimit: "
       "true\n",
       true, "", "example.com/vgpu", 1024, "disable"},
      {"disableCoreLimit wins over gpuCorePolicy in any order",
       "nvidia:\n  disableCoreLimit: true\n  gpuCorePolicy: force\n", true, "", "nvidia.com/gpu", 1,
       "disable"},
      {"force", "nvidia:\n  gpuCorePolicy: force\n", true, "", "nvidia.com/gpu", 1, "force"},
      {"empty file", "", true, "", "nvidia.com/gpu", 1, "default"},
      {"chart's empty values keep defaults",
       "nvidia:\n  resourceCountName: \"\"\n  defaultMemory: ''\n  runtimeClassName: \"\"\n  "
       "memoryFactor:\n",
       true, "", "nvidia.com/gpu", 1, "default"},
      {"upstream keys we do not use", "nvidia:\n  knownMigGeometries: [{models: [A100]}]\n", true,
       "", "nvidia.com/gpu", 1, "default"},
      {"upstream vendor we lack", "awsneuron: {resourceCountName: aws.amazon.com/neuron}\n", true,
       "", "nvidia.com/gpu", 1, "default"},
      {"wrong type", "nvidia:\n  defaultCores: lots\n", false, "dc.yaml: nvidia.defaultCores: ", "",
       0, ""},
      {"bad policy", "nvidia:\n  gpuCorePolicy: sometimes\n", false,
       "dc.yaml: nvidia.gpuCorePolicy", "", 0, ""},
      {"mps is not a core policy", "nvidia:\n  gpuCorePolicy: mps\n", false,
       "nvidia.gpuCorePolicy: \"mps\" is not one of default, force, disable", "", 0, ""},
      {"invalid factor", "nvidia:\n  memoryFactor: 0\n", false, "nvidia.memoryFactor", "", 0, ""},
      {"negative default", "nvidia:\n  defaultMemory: -1\n", false, "nvidia.defaultMemory", "", 0,
       ""},
      {"not a resource name", "nvidia:\n  resourceCountName: gpu\n", false,
       "nvidia.resourceCountName", "", 0, ""},
      {"log level", "nvidia:\n  libCudaLogLevel: 9\n", false, "nvidia.libCudaLogLevel", "", 0, ""},
      {"split count", "nvidia:\n  deviceSplitCount: 0\n", false, "nvidia.deviceSplitCount", "", 0,
       ""},
      {"scaling", "nvidia:\n  deviceMemoryScaling: -1\n", false, "nvidia.deviceMemoryScaling", "",
       0, ""},
      {"cdi strategy", "nvidia:\n  deviceListStrategy: cdi-annotations\n", true, "",
       "nvidia.com/gpu", 1, "default"},
      {"unknown device list strategy", "nvidia:\n  deviceListStrategy: cdi\n", false,
       "dc.yaml: nvidia.deviceListStrategy: device list strategy \"cdi\" is not one of", "", 0, ""},
      {"device list strategy as a YAML list", "nvidia:\n  deviceListStrategy: [envvar]\n", false,
       "nvidia.deviceListStrategy: expected a string", "", 0, ""},
      {"device id strategy", "nvidia:\n  deviceIDStrategy: name\n", false,
       "nvidia.deviceIDStrategy: device ID strategy \"name\"", "", 0, ""},
      {"cdi prefix without slash", "nvidia:\n  cdiAnnotationPrefix: cdi.k8s.io\n", false,
       "nvidia.cdiAnnotationPrefix", "", 0, ""},
      {"cdi kind without class", "nvidia:\n  cdiKind: nvidia.com\n", false, "nvidia.cdiKind", "", 0,
       ""},
      {"a list where a scalar goes", "nvidia:\n  overwriteEnv: [true]\n", false,
       "nvidia.overwriteEnv: expected a bool", "", 0, ""},
      {"unknown nvidia key (was ignored by the scheduler)", "nvidia:\n  gpuCorePolcy: force\n",
       false, "dc.yaml: nvidia.gpuCorePolcy: unknown option", "", 0, ""},
      {"unknown key of another vendor", "hygon:\n  resourceCountNam: x/y\n", false,
       "dc.yaml: hygon.resourceCountNam: unknown option", "", 0, ""},
      {"unknown section", "nvida:\n  deviceSplitCount: 2\n", false,
       "dc.yaml: nvida: unknown section", "", 0, ""},
      {"nvidia not a mapping", "nvidia: [1]\n", false, "dc.yaml: nvidia: expected a mapping", "", 0,
       ""},
      {"not yaml", "nvidia: [\n", false, "dc.yaml: line", "", 0, ""},
      {"list at top", "- a\n", false, "top level", "", 0, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = ParseConfigFile(c.yaml, "dc.yaml");
    ASSERT_EQ(r.ok(), c.ok) << r.status();
    if (!c.ok) {
      EXPECT_NE(Message(r.status()).find(c.error_part), std::string::npos) << r.status();
      continue;
    }
    EXPECT_EQ(r->nvidia.resources.nvidia.count, c.count_name);
    EXPECT_EQ(r->nvidia.resources.memory_factor, c.factor);
    EXPECT_EQ(r->nvidia.gpu_core_policy, c.policy);
  }
}

// migProfileAllowlist: upstream's chart list by default; a list given replaces it; what cannot be
// a list of {models, profiles} with profile names fails, naming the option and the entry.
TEST(ConfigFile, MigProfileAllowlist) {
  auto none = ParseConfigFile("", "dc.yaml");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->nvidia.mig_profile_allowlist, nvidia::DefaultMigProfileAllowlist());
  EXPECT_TRUE(nvidia::ValidateMigProfileAllowlist(nvidia::DefaultMigProfileAllowlist()).ok());
  auto given = ParseConfigFile(
      "nvidia:\n  migProfileAllowlist:\n    - models: [\"A100-SXM4-40GB\"]\n"
      "      profiles: [\"1g.5gb\", \"4g.20gb\"]\n    - {models: [A30], profiles: [1g.6gb]}\n",
      "dc.yaml");
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->nvidia.mig_profile_allowlist,
            (std::vector<nvidia::MigAllowlistEntry>{{{"A100-SXM4-40GB"}, {"1g.5gb", "4g.20gb"}},
                                                    {{"A30"}, {"1g.6gb"}}}));
  auto empty = ParseConfigFile("nvidia:\n  migProfileAllowlist: []\n", "dc.yaml");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->nvidia.mig_profile_allowlist.empty());
  struct Bad {
    const char* yaml;
    const char* error_part;
  };
  for (const Bad& b : {
           Bad{"{models: [A100]}", "nvidia.migProfileAllowlist: expected a list"},
           Bad{"[A100]", "nvidia.migProfileAllowlist: [0]: expected a mapping"},
           Bad{"[{models: [A100]}]", "[0]: needs at least one model and one profile"},
           Bad{"[{models: A100, profiles: [1g.5gb]}]", "[0].models: expected a list of strings"},
           Bad{"[{models: [A100], profiles: [[1g.5gb]]}]", "[0].profiles: expected a list"},
           Bad{"[{models: [A100], profiles: [1g.5gb], geometry: x}]", "[0].geometry: unknown key"},
           Bad{"[{models: [A100], profiles: [5gb]}]", "\"5gb\" is not a MIG profile name"},
           Bad{"[{models: [A100], profiles: [xg.5gb]}]", "\"xg.5gb\" is not a MIG profile name"},
           Bad{"[{models: [A100], profiles: [1g.]}]", "\"1g.\" is not a MIG profile name"},
           Bad{"[{models: [\"\"], profiles: [1g.5gb]}]", "[0].models: a model name is empty"},
       }) {
    auto r = ParseConfigFile(StrCat("nvidia:\n  migProfileAllowlist: ", b.yaml, "\n"), "dc.yaml");
    ASSERT_FALSE(r.ok()) << b.yaml;
    EXPECT_NE(Message(r.status()).find(b.error_part), std::string::npos) << r.status();
  }
}

// One parse gives both: the vendor set and the knobs, from the same section.
TEST(ConfigFile, OneParseYieldsVendorsAndKnobs) {
  auto r = ParseConfigFile(
      "nvidia:\n  resourceCountName: example.com/vgpu\n  overwriteEnv: true\n"
      "  runtimeClassName: nvidia\nhygon: {}\n",
      "dc.yaml");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->vendors.size(), 3u);  // NVIDIA, Hygon DCU and HCU
  EXPECT_EQ(r->vendors[0]->resources().count, "example.com/vgpu");
  EXPECT_EQ(r->nvidia.resources.nvidia.count, "example.com/vgpu");
  EXPECT_EQ(r->vendors[1]->common_word(), "DCU");
  EXPECT_TRUE(r->nvidia.overwrite_env);
  EXPECT_EQ(r->nvidia.runtime_class_name, "nvidia");
  auto off = ParseConfigFile("nvidia:\n  enabled: false\nhygon: {}\n", "dc.yaml");
  ASSERT_TRUE(off.ok()) << off.status();
  ASSERT_EQ(off->vendors.size(), 2u);
  EXPECT_EQ(off->vendors[0]->common_word(), "DCU");
  EXPECT_EQ(off->vendors[1]->common_word(), "HCU");
}

TEST(ConfigFile, DevicePluginKnobs) {
  auto c = ParseConfigFile(
      "nvidia:\n  deviceSplitCount: 7\n  deviceMemoryScaling: 1.5\n  deviceCoreScaling: 2\n"
      "  preConfiguredDeviceMemory: 0\n  enableNumaTopology: true\n  libCudaLogLevel: 3\n",
      "dc.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  const auto& k = c->nvidia.plugin;
  EXPECT_EQ(k.device_split_count, 7);
  EXPECT_EQ(k.device_memory_scaling, 1.5);
  EXPECT_EQ(k.device_core_scaling, 2.0);
  EXPECT_EQ(k.preconfigured_memory, 0);
  EXPECT_EQ(k.enable_numa_topology, true);
  EXPECT_EQ(k.lib_cuda_log_level, "3");
  // Absent or rendered empty: unset, so the device plugin keeps its flag or default.
  auto none = ParseConfigFile(
      "nvidia:\n  deviceSplitCount: \"\"\n  resourceCountName: nvidia.com/gpu\n", "dc.yaml");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->nvidia.plugin.device_split_count.has_value());
  EXPECT_FALSE(none->nvidia.plugin.device_memory_scaling.has_value());
  EXPECT_FALSE(none->nvidia.plugin.lib_cuda_log_level.has_value());
  EXPECT_FALSE(none->nvidia.plugin.device_list_strategy.has_value());
  EXPECT_FALSE(none->nvidia.plugin.cdi_annotation_prefix.has_value());
  // The CDI knobs; the strategy list is kept in its canonical spelling.
  auto cdi = ParseConfigFile(
      "nvidia:\n  deviceListStrategy: cdi-cri, cdi-annotations\n  deviceIDStrategy: index\n"
      "  cdiAnnotationPrefix: example.com/\n  cdiKind: k8s.device-plugin.nvidia.com/gpu\n",
      "dc.yaml");
  ASSERT_TRUE(cdi.ok()) << cdi.status();
  EXPECT_EQ(cdi->nvidia.plugin.device_list_strategy, "cdi-annotations,cdi-cri");
  EXPECT_EQ(cdi->nvidia.plugin.device_id_strategy, "index");
  EXPECT_EQ(cdi->nvidia.plugin.cdi_annotation_prefix, "example.com/");
  EXPECT_EQ(cdi->nvidia.plugin.cdi_kind, "k8s.device-plugin.nvidia.com/gpu");
  auto bad = ParseConfigFile("nvidia:\n  deviceSplitCount: many\n", "dc.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(Message(bad.status()).find("nvidia.deviceSplitCount"), std::string::npos)
      << bad.status();
}

// The shipped files parse: upstream chart's default device-config.yaml and the kustomize base's
// ConfigMap (the Helm chart's rendered ones: tests/deploy, deploy_rendered_args).
TEST(ConfigFile, ShippedFilesParse) {
  auto up = LoadConfigFile("src/vendors/testdata/upstream-device-config.yaml", "--device-config");
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(up->nvidia.resources.nvidia.count, "nvidia.com/gpu");
  EXPECT_EQ(up->nvidia.resources.nvidia.memory, "nvidia.com/gpumem");
  EXPECT_EQ(up->nvidia.plugin.device_split_count, 10);
  const std::string cm = Read("deploy/base/device-config.yaml");
  ASSERT_FALSE(cm.empty());
  const YAML::Node doc = YAML::Load(cm);
  auto base = ParseConfigFile(doc["data"]["device-config.yaml"].as<std::string>(), "base");
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_EQ(base->nvidia.plugin.lib_cuda_log_level, "1");
}

TEST(ConfigFile, FileErrorsNameTheFlag) {
  auto r = LoadConfigFile("/nonexistent/device-config.yaml", "--device-config-file");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(Message(r.status()).find("--device-config-file"), std::string::npos);
  const std::string path = ::testing::TempDir() + "/hami-big-device-config.yaml";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    const std::string line = "# " + std::string(1000, 'x') + "\n";
    for (int i = 0; i < 3000; ++i) std::fputs(line.c_str(), f);  // ~3 MB of comments
    std::fclose(f);
  }
  auto c = LoadConfigFile(path, "--device-config-file");
  std::remove(path.c_str());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(Message(c.status()).find("larger than"), std::string::npos) << c.status();
}

// Every option of the table reads its default back (an option whose default text and behaviour
// disagree fails here), and every key is documented.
TEST(ConfigFile, EveryOptionAcceptsItsDocumentedDefault) {
  const auto none = ParseConfigFile("", "dc.yaml");
  ASSERT_TRUE(none.ok());
  for (const Option& o : NvidiaOptions()) {
    SCOPED_TRACE(o.key);
    EXPECT_NE(std::string(o.doc), "");
    if (o.set == nullptr || std::string(o.default_text).find(' ') != std::string::npos ||
        std::string(o.default_text) == "(unset)")
      continue;
    std::string value = o.default_text;
    auto r = ParseConfigFile(StrCat("nvidia:\n  ", o.key, ": ", value, "\n"), "dc.yaml");
    ASSERT_TRUE(r.ok()) << r.status();
    const DeviceConfig& c = r->nvidia;
    EXPECT_EQ(c.resources.nvidia.count, none->nvidia.resources.nvidia.count);
    EXPECT_EQ(c.resources.default_gpu_num, none->nvidia.resources.default_gpu_num);
    EXPECT_EQ(c.resources.memory_factor, none->nvidia.resources.memory_factor);
    EXPECT_EQ(c.gpu_core_policy, none->nvidia.gpu_core_policy);
    EXPECT_EQ(c.overwrite_env, none->nvidia.overwrite_env);
    EXPECT_EQ(c.runtime_class_name, none->nvidia.runtime_class_name);
  }
}

// docs/install.md carries RenderOptionTable's output between its markers.
TEST(ConfigFile, DocTableMatchesTheOptionTable) {
  const std::string doc = Read("docs/install.md");
  const std::string begin = "<!-- nvidia-options:begin";
  const std::string end = "<!-- nvidia-options:end -->";
  const size_t b = doc.find(begin);
  ASSERT_NE(b, std::string::npos) << "docs/install.md lacks " << begin;
  const size_t body = doc.find('\n', b) + 1;
  const size_t e = doc.find(end, body);
  ASSERT_NE(e, std::string::npos);
  EXPECT_EQ(doc.substr(body, e - body), RenderOptionTable())
      << "regenerate the table in docs/install.md from vendors::RenderOptionTable()";
}

}  // namespace
}  // namespace hami::vendors
