#include "deviceplugin/config.h"

#include <gtest/gtest.h>

namespace hami::deviceplugin {
namespace {

TEST(ConfigTest, DefaultsAreValid) {
  EXPECT_TRUE(Validate(PluginConfig{}).ok());
  PluginConfig mig;
  mig.mode = "mig";
  EXPECT_TRUE(Validate(mig).ok());
  PluginConfig mps;
  mps.mode = "mps";
  EXPECT_TRUE(Validate(mps).ok());
  mps.mps_shm_dir = "";  // the daemon's /dev/shm reaches pods some other way
  mps.device_id_strategy = "index";
  EXPECT_TRUE(Validate(mps).ok());
  for (const char* strategy : {"none", "single", "mixed"}) {
    PluginConfig c;
    c.mig_strategy = strategy;
    EXPECT_TRUE(Validate(c).ok()) << strategy;
  }
}

TEST(ConfigTest, ValidateNamesTheOption) {
  struct Case {
    const char* name;
    void (*mutate)(PluginConfig&);
    const char* want;
  };
  const Case cases[] = {
      {"split zero", [](PluginConfig& c) { c.split_count = 0; }, "split count"},
      {"split huge", [](PluginConfig& c) { c.split_count = 5000; }, "split count"},
      {"mem scaling", [](PluginConfig& c) { c.memory_scaling = 0; }, "memory scaling"},
      {"core scaling", [](PluginConfig& c) { c.core_scaling = -1; }, "core scaling"},
      {"mode", [](PluginConfig& c) { c.mode = "vgpu"; }, "operating mode"},
      {"mig mode by index",
       [](PluginConfig& c) {
         c.mode = "mig";
         c.device_id_strategy = "index";
       },
       "--device-id-strategy index cannot name MIG devices"},
      {"mps mode oversubscribed",
       [](PluginConfig& c) {
         c.mode = "mps";
         c.memory_scaling = 1.5;
       },
       "device memory scaling 1.5 > 1 oversubscribes memory, which operating mode mps cannot"},
      {"mps pipe dir relative",
       [](PluginConfig& c) {
         c.mode = "mps";
         c.mps_pipe_dir = "nvidia-mps";
       },
       "MPS pipe dir 'nvidia-mps' must be an absolute path"},
      {"mps pipe dir empty",
       [](PluginConfig& c) {
         c.mode = "mps";
         c.mps_pipe_dir = "";
       },
       "MPS pipe dir '' must be an absolute path"},
      {"mps pipe dir with comma",
       [](PluginConfig& c) {
         c.mode = "mps";
         c.mps_pipe_dir = "/tmp/a,b";
       },
       "without commas"},
      {"mps shm dir relative",
       [](PluginConfig& c) {
         c.mode = "mps";
         c.mps_shm_dir = "shm";
       },
       "MPS shm dir 'shm' must be an absolute path or empty"},
      {"mode mps is case sensitive", [](PluginConfig& c) { c.mode = "MPS"; },
       "operating mode 'MPS' must be hami-core, mig or mps"},
      {"mig strategy unknown", [](PluginConfig& c) { c.mig_strategy = "Mixed"; },
       "MIG strategy 'Mixed' (--mig-strategy, nodeconfig migstrategy) must be none, single or "
       "mixed"},
      {"mig strategy empty", [](PluginConfig& c) { c.mig_strategy = ""; },
       "MIG strategy '' (--mig-strategy"},
      {"static and dynamic MIG",
       [](PluginConfig& c) {
         c.mode = "mig";
         c.mig_strategy = "single";
       },
       "MIG strategy 'single' cannot be combined with operating mode mig"},
      {"static MIG by index",
       [](PluginConfig& c) {
         c.mig_strategy = "mixed";
         c.device_id_strategy = "index";
       },
       "--device-id-strategy index cannot name MIG devices (MIG strategy mixed): use uuid"},
      {"policy", [](PluginConfig& c) { c.core_policy = "always"; }, "core policy"},
      {"log level", [](PluginConfig& c) { c.libcuda_log_level = "9"; }, "log level"},
      {"resource", [](PluginConfig& c) { c.resource_name = "gpu"; }, "resource name"},
      {"socket", [](PluginConfig& c) { c.socket_name = "a/b.sock"; }, "socket name"},
      {"index", [](PluginConfig& c) { c.exclude_indices = {-1}; }, "index"},
      {"device list strategy", [](PluginConfig& c) { c.device_list_strategy = "cdi"; },
       "--device-list-strategy: device list strategy \"cdi\" is not one of envvar"},
      {"empty device list strategy", [](PluginConfig& c) { c.device_list_strategy = ""; },
       "--device-list-strategy: no device list strategy"},
      {"device id strategy", [](PluginConfig& c) { c.device_id_strategy = "serial"; },
       "--device-id-strategy"},
      {"cdi annotation prefix", [](PluginConfig& c) { c.cdi_annotation_prefix = "cdi"; },
       "--cdi-annotation-prefix"},
      {"cdi kind", [](PluginConfig& c) { c.cdi_kind = "gpu"; }, "--cdi-kind"},
      {"relative broker dir", [](PluginConfig& c) { c.host_pid_broker_dir = "run/hostpid"; },
       "--host-pid-broker-dir 'run/hostpid' must be an absolute host path"},
      {"socket path too long", [](PluginConfig& c) { c.plugin_dir = "/" + std::string(120, 'd'); },
       "107 bytes"},
  };
  for (const auto& tc : cases) {
    PluginConfig c;
    tc.mutate(c);
    Status s = Validate(c);
    EXPECT_FALSE(s.ok()) << tc.name;
    EXPECT_NE(std::string(s.message()).find(tc.want), std::string::npos)
        << tc.name << ": " << s.message();
  }
}

TEST(ConfigTest, AppliesOnlyThisNodesEntry) {
  const char* json = R"({"nodeconfig":[
    {"name":"other","devicesplitcount":3},
    {"name":"node1","operatingmode":"hami-core","devicememoryscaling":1.5,"devicecorescaling":2,
     "devicesplitcount":4,"preconfigureddevicememory":0,"enablenumatopology":true,"libcudaloglevel":"3",
     "migstrategy":"none","filterdevices":{"uuid":["GPU-x"],"index":[2]},
     "enablegetpreferredallocation":false}]})";
  PluginConfig c;
  ASSERT_TRUE(ApplyNodeConfig(json, "node1", &c).ok());
  EXPECT_EQ(c.split_count, 4);
  EXPECT_DOUBLE_EQ(c.memory_scaling, 1.5);
  EXPECT_DOUBLE_EQ(c.core_scaling, 2.0);
  EXPECT_TRUE(c.enable_numa_topology);
  EXPECT_FALSE(c.enable_preferred_allocation);
  EXPECT_EQ(c.libcuda_log_level, "3");
  EXPECT_EQ(c.exclude_uuids, std::vector<std::string>{"GPU-x"});
  EXPECT_EQ(c.exclude_indices, std::vector<int>{2});

  PluginConfig untouched;
  ASSERT_TRUE(ApplyNodeConfig(json, "node9", &untouched).ok());
  EXPECT_EQ(untouched.split_count, PluginConfig{}.split_count);
  ASSERT_TRUE(ApplyNodeConfig("{}", "node1", &untouched).ok());
}

// Upstream's readFromConfigFile: the node's operatingmode becomes the plugin's mode; an entry in
// mode mps that oversubscribes memory is refused with the entry named (MPS pins device memory).
TEST(ConfigTest, OperatingModeMpsFromTheNodesEntry) {
  PluginConfig c;
  ASSERT_TRUE(
      ApplyNodeConfig(R"({"nodeconfig":[{"name":"n","operatingmode":"mps"}]})", "n", &c).ok());
  EXPECT_EQ(c.mode, "mps");
  PluginConfig d;
  Status s = ApplyNodeConfig(
      R"({"nodeconfig":[{"name":"n","operatingmode":"mps","devicememoryscaling":2}]})", "n", &d,
      "cfg.json");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("cfg.json: nodeconfig[0] (n)"), std::string::npos)
      << s.message();
  EXPECT_NE(std::string(s.message()).find("operating mode mps cannot"), std::string::npos)
      << s.message();
  EXPECT_EQ(d.mode, "hami-core");  // nothing applied
}

TEST(ConfigTest, IntegerLogLevelAccepted) {
  PluginConfig c;
  ASSERT_TRUE(
      ApplyNodeConfig(R"({"nodeconfig":[{"name":"n","libcudaloglevel":4}]})", "n", &c).ok());
  EXPECT_EQ(c.libcuda_log_level, "4");
  ASSERT_TRUE(
      ApplyNodeConfig(R"({"nodeconfig":[{"name":"n","migstrategy":"mixed"}]})", "n", &c).ok());
  EXPECT_EQ(c.mig_strategy, "mixed");
}

TEST(ConfigTest, ErrorsNameFileEntryAndField) {
  struct Case {
    const char* json;
    const char* want;
  };
  const Case cases[] = {
      {"not json", "cfg.json: not valid JSON"},
      {"[]", "top level must be an object"},
      {R"({"nodeconfig":{}})", "nodeconfig must be an array"},
      {R"({"nodeconfig":[1]})", "nodeconfig[0]: must be an object"},
      {R"({"nodeconfig":[{"devicesplitcount":2}]})", "nodeconfig[0]: name must be a string"},
      {R"({"nodeconfig":[{"name":"n","devicesplitcount":"ten"}]})",
       "devicesplitcount must be an integer"},
      {R"({"nodeconfig":[{"name":"n","devicesplitcount":0}]})",
       "devicesplitcount 0 must be in 1..1000"},
      {R"({"nodeconfig":[{"name":"n","devicememoryscaling":true}]})",
       "devicememoryscaling must be a number"},
      {R"({"nodeconfig":[{"name":"n","devicememoryscaling":-2}]})", "memory scaling"},
      {R"({"nodeconfig":[{"name":"n","operatingmode":"x"}]})", "operating mode 'x'"},
      {R"({"nodeconfig":[{"name":"n","enablenumatopology":"yes"}]})",
       "enablenumatopology must be true or false"},
      {R"({"nodeconfig":[{"name":"n","migstrategy":"all"}]})", "migstrategy 'all'"},
      {R"({"nodeconfig":[{"name":"n","filterdevices":[]}]})", "filterdevices must be an object"},
      {R"({"nodeconfig":[{"name":"n","filterdevices":{"uuid":[1]}}]})",
       "filterdevices.uuid entries"},
      {R"({"nodeconfig":[{"name":"n","filterdevices":{"index":[-1]}}]})",
       "filterdevices.index entries"},
      {R"({"nodeconfig":[{"name":"n","filterdevices":{"name":[]}}]})",
       "unknown key filterdevices.name"},
      {R"({"nodeconfig":[{"name":"n","devicesplitcnt":2}]})",
       "nodeconfig[0] (n): unknown key 'devicesplitcnt'"},
      {R"({"nodeconfig":[{"name":"other","devicesplitcount":-1}]})", "nodeconfig[0] (other)"},
      {R"({"nodeconfig":[{"name":"n"},{"name":"n"}]})", "has several entries"},
  };
  for (const auto& tc : cases) {
    PluginConfig c;
    Status s = ApplyNodeConfig(tc.json, "n", &c, "cfg.json");
    EXPECT_FALSE(s.ok()) << tc.json;
    EXPECT_NE(std::string(s.message()).find(tc.want), std::string::npos)
        << tc.json << " -> " << s.message();
  }
}

// Upstream's selectNodeConfigs (PR #3173): the entry naming the node; else every entry whose
// nodelabelselector matches the node's labels, in file order, each changing only what it sets
// (enablegetpreferredallocation a pointer upstream: a later entry cannot clear an earlier false);
// else the entry named "*". Labels are read only when a selector has to be evaluated.
TEST(ConfigTest, NodeLabelSelectorAndFallback) {
  const char* file = R"({"nodeconfig":[
    {"name":"*","devicesplitcount":2},
    {"name":"pool-a","nodelabelselector":{"matchLabels":{"pool":"a"}},"devicesplitcount":3,
     "enablegetpreferredallocation":false,"filterdevices":{"index":[1]}},
    {"nodelabelselector":{"matchExpressions":[{"key":"gpu","operator":"In","values":["h100","h200"]}]},
     "devicememoryscaling":2,"filterdevices":{"index":[0]}},
    {"nodelabelselector":{"matchExpressions":[{"key":"drain","operator":"DoesNotExist"}],
                          "matchLabels":{"gpu":"h200"}},"devicesplitcount":7},
    {"name":"n-named","devicesplitcount":9}]})";
  struct Case {
    const char* name;
    const char* node;
    const char* labels;  // nullptr: no labels function (dry run)
    int split;
    double mem_scaling;
    bool preferred;
    std::vector<int> excluded;
    int label_reads;
  };
  const Case cases[] = {
      {"named entry wins over selectors and *, labels not read",
       "n-named",
       R"({"pool":"a"})",
       9,
       1.0,
       true,
       {},
       0},
      {"no selector matches: the * entry", "n1", R"({"pool":"b"})", 2, 1.0, true, {}, 1},
      {"one selector matches", "n1", R"({"pool":"a"})", 3, 1.0, false, {1}, 1},
      {"In matches, the * entry not applied", "n1", R"({"gpu":"h100"})", 10, 2.0, true, {0}, 1},
      {"three match in file order: later split, earlier preferred kept, last filter",
       "n1",
       R"({"pool":"a","gpu":"h200"})",
       7,
       2.0,
       false,
       {0},
       1},
      {"DoesNotExist fails on a draining node",
       "n1",
       R"({"gpu":"h200","drain":"x"})",
       10,
       2.0,
       true,
       {0},
       1},
      {"dry run: no labels, the * entry", "n1", nullptr, 2, 1.0, true, {}, 0},
  };
  for (const auto& tc : cases) {
    PluginConfig c;
    int reads = 0;
    NodeLabelsFn fn;
    if (tc.labels != nullptr)
      fn = [&]() -> StatusOr<nlohmann::json> {
        ++reads;
        return nlohmann::json::parse(tc.labels);
      };
    Status s = ApplyNodeConfig(file, tc.node, &c, "cfg.json", fn);
    ASSERT_TRUE(s.ok()) << tc.name << ": " << s.message();
    EXPECT_EQ(c.split_count, tc.split) << tc.name;
    EXPECT_DOUBLE_EQ(c.memory_scaling, tc.mem_scaling) << tc.name;
    EXPECT_EQ(c.enable_preferred_allocation, tc.preferred) << tc.name;
    EXPECT_EQ(c.exclude_indices, tc.excluded) << tc.name;
    EXPECT_EQ(reads, tc.label_reads) << tc.name;
  }
  // An empty selector selects every node; a node the API server cannot read fails the start.
  PluginConfig c;
  ASSERT_TRUE(ApplyNodeConfig(R"({"nodeconfig":[{"nodelabelselector":{},"devicesplitcount":5}]})",
                              "n", &c, "cfg.json", nullptr)
                  .ok());
  EXPECT_EQ(c.split_count, 5);
  Status s = ApplyNodeConfig(R"({"nodeconfig":[{"nodelabelselector":{},"devicesplitcount":5}]})",
                             "n", &c, "cfg.json",
                             []() -> StatusOr<nlohmann::json> { return NotFound("nodes \"n\""); });
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s.message();
  // A selector that is not well formed is an error on every node, naming the entry.
  for (
      const char* bad :
      {R"({"nodeconfig":[{"nodelabelselector":[]}]})",
       R"({"nodeconfig":[{"name":"x","nodelabelselector":{"matchExpressions":[{"key":"a","operator":"Gt"}]}}]})"}) {
    PluginConfig d;
    Status e = ApplyNodeConfig(bad, "n-named", &d, "cfg.json", nullptr);
    EXPECT_FALSE(e.ok()) << bad;
    EXPECT_NE(std::string(e.message()).find("nodeconfig[0]"), std::string::npos) << e.message();
    EXPECT_NE(std::string(e.message()).find("nodelabelselector"), std::string::npos) << e.message();
  }
}

TEST(ConfigTest, MissingFileIsAClearError) {
  PluginConfig c;
  Status s = ApplyNodeConfigFile("/nonexistent/config.json", "n", &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(s.message()).find("/nonexistent/config.json"), std::string::npos);
}

}  // namespace
}  // namespace hami::deviceplugin
