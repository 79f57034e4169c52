// Per-vendor rules and wire values. Values marked "upstream" are upstream HAMi's published wire
// values; values marked "constructed" follow those formats with made-up identifiers.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "nlohmann/json.hpp"
#include "vendors/config.h"
#include "vendors/registry.h"
#include "vendors/testing/defaults.h"
#include "yaml-cpp/yaml.h"

namespace hami::vendors {
namespace {

using testing::All;
using testing::ByWord;
nlohmann::json Limits(std::initializer_list<std::pair<const std::string, nlohmann::json>> l) {
  return {{"limits", nlohmann::json(std::map<std::string, nlohmann::json>(l))}};
}

// ---- Registration annotations ----
struct RegCase {
  const char* word;
  const char* key;
  const char* value;
  const char* source;
  int devices;
  const char* first_uuid;
  int64_t first_mem;
};
const RegCase kRegCases[] = {
    {"NVIDIA", "hami.io/node-nvidia-register",
     R"([{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","index":1,"count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"health":true,"mode":"hami-core"}])",
     "upstream", 1, "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448", 32768},
    {"DCU", "hami.io/node-dcu-register",
     "DCU-0a1b,4,16368,100,DCU-Z100L,0,true,0,:DCU-0a1c,4,16368,100,DCU-Z100L,1,true,1,:",
     "constructed (upstream's legacy CSV)", 2, "DCU-0a1b", 16368},
    {"MR-V100", "hami.io/node-MR-V100-register",
     "ILU-77,8,32768,100,MR-V100,0,true,0,:", "constructed (legacy CSV)", 1, "ILU-77", 32768},
    {"Ascend910B3", "hami.io/node-register-Ascend910B3",
     R"([{"id":"910B3-0","count":4,"devmem":65536,"devcore":100,"type":"Ascend910B3","health":true}])",
     "constructed (DeviceInfo JSON)", 1, "910B3-0", 65536},
    {"XPU", "hami.io/node-register-xpu",
     R"([{"id":"XPU-a","count":4,"devmem":98304,"devcore":100,"type":"P800","health":true}])",
     "constructed", 1, "XPU-a", 98304},
    {"AMD", "hami.io/node-amd-register",
     R"([{"id":"AMD-1","count":4,"devmem":196608,"devcore":100,"type":"MI300X","health":true}])",
     "constructed", 1, "AMD-1", 196608},
};

TEST(RegistrationTest, DecodesAndReEncodesByteForByte) {
  for (const RegCase& c : kRegCases) {
    SCOPED_TRACE(StrCat(c.word, " (", c.source, ")"));
    const Vendor& v = ByWord(c.word);
    EXPECT_EQ(v.keys().node_register, c.key);
    NodeView node;
    node.annotations[c.key] = c.value;
    auto devs = v.DecodeNode(node);
    ASSERT_TRUE(devs.ok()) << devs.status();
    ASSERT_EQ(static_cast<int>(devs->size()), c.devices);
    EXPECT_EQ((*devs)[0].uuid, c.first_uuid);
    EXPECT_EQ((*devs)[0].devmem_mib, c.first_mem);
    EXPECT_EQ((*devs)[0].vendor, c.word);
    NodeView out;
    ASSERT_TRUE(v.EncodeNode(*devs, &out).ok());
    EXPECT_EQ(out.annotations[c.key], c.value);
  }
}

TEST(RegistrationTest, CapacityVendorsCountDevicesFromCapacity) {
  struct Case {
    const char* word;
    const char* res;
    int64_t cap;
    int devices;
    int64_t mem;
  } cases[] = {
      {"MLU", "cambricon.com/mlu.smlu.vcore", 400, 4, 24576},
      {"Mthreads", "mthreads.com/sgpu-core", 32, 2, 49152},
      {"Metax-GPU", "metax-tech.com/gpu", 8, 8, 65536},
      {"GCU", "enflame.com/gcu", 8, 8, 100},  // upstream: a share, not MiB
      {"kunlun", "kunlunxin.com/xpu", 8, 8, 98304},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.word);
    NodeView node;
    node.capacity[c.res] = c.cap;
    auto devs = ByWord(c.word).DecodeNode(node);
    ASSERT_TRUE(devs.ok()) << devs.status();
    ASSERT_EQ(static_cast<int>(devs->size()), c.devices);
    EXPECT_EQ(devs->back().devmem_mib, c.mem);
  }
  NodeView bad;
  bad.capacity["cambricon.com/mlu.smlu.vcore"] = 200000;  // 2000 cards
  auto r = ByWord("MLU").DecodeNode(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("cambricon.com/mlu.smlu.vcore"),
            std::string::npos);
}

// An Ascend registration that claims MIG is refused (found by the registration fuzz target: with
// the hami-vnpu-core annotation it decoded as a hami-core device that kept its MIG profiles, which
// the encoder cannot write back).
TEST(RegistrationTest, AscendRefusesMig) {
  const Vendor& ascend = ByWord("Ascend310P");
  const std::string reg =
      R"([{"id":"NPU-a","count":7,"devmem":40960,"devcore":100,"type":"Ascend310P","health":true,)"
      R"("mode":"mig","migProfiles":[{"name":"1g.5gb","memoryMB":5120,"core":14,"sliceCount":1,)"
      R"("placements":[{"start":0,"size":1}]}]}])";
  for (const bool hami_core : {false, true}) {
    SCOPED_TRACE(hami_core);
    NodeView node;
    node.annotations[ascend.keys().node_register] = reg;
    if (hami_core) node.annotations["hami-vnpu-core"] = "true";
    auto devs = ascend.DecodeNode(node);
    ASSERT_FALSE(devs.ok());
    EXPECT_NE(std::string(devs.status().message()).find("MIG mode or profiles on an Ascend NPU"),
              std::string::npos)
        << devs.status();
  }
}

TEST(RegistrationTest, MalformedAnnotationsNameTheKey) {
  for (const RegCase& c : kRegCases) {
    NodeView node;
    node.annotations[c.key] = std::string(c.value).substr(0, 12);
    auto r = ByWord(c.word).DecodeNode(node);
    if (r.ok()) continue;  // a CSV prefix may still be a valid (shorter) list
    EXPECT_NE(std::string(r.status().message()).find(c.key), std::string::npos) << r.status();
  }
}

// ---- Decision annotations ----
TEST(DecisionTest, UpstreamNvidiaExampleRoundTrips) {
  const std::string v =  // docs/upstream-contract.md#decision-annotations-per-vendor, verbatim
      "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,3000,30:;GPU-0fc3eda5-e98b-a25b-5b0d-"
      "cf5c855d1448,NVIDIA,5000,0:;";
  const Vendor& n = ByWord("NVIDIA");
  auto a = n.DecodeDecision({{"hami.io/vgpu-devices-allocated", v}});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->containers.size(), 2u);
  EXPECT_EQ(a->containers[1][0].usedmem_mib, 5000);
  auto enc = n.EncodeDecision(*a, 0);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->at("hami.io/vgpu-devices-allocated"), v);
  EXPECT_EQ(enc->at("hami.io/vgpu-devices-to-allocate"), v);
}

TEST(DecisionTest, KeysPerVendorAreUpstreams) {  // table in docs/upstream-contract.md
  struct Case {
    const char* word;
    const char* to;
    const char* done;
  } cases[] = {
      {"NVIDIA", "hami.io/vgpu-devices-to-allocate", "hami.io/vgpu-devices-allocated"},
      {"MLU", "hami.io/cambricon-mlu-devices-to-allocate",
       "hami.io/cambricon-mlu-devices-allocated"},
      {"DCU", "hami.io/dcu-devices-to-allocate", "hami.io/dcu-devices-allocated"},
      {"Mthreads", "", "hami.io/mthreads-vgpu-devices-allocated"},
      {"Metax-GPU", "hami.io/metax-gpu-devices-to-allocate", "hami.io/metax-gpu-devices-allocated"},
      {"Metax-SGPU", "hami.io/metax-sgpu-devices-to-allocate",
       "hami.io/metax-sgpu-devices-allocated"},
      {"GCU", "hami.io/enflame-gcu-devices-to-allocate", "hami.io/enflame-gcu-devices-allocated"},
      {"Enflame", "", "hami.io/enflame-vgpu-devices-allocated"},
      {"XPU", "hami.io/xpu-devices-to-allocate", "hami.io/xpu-devices-allocated"},
      {"kunlun", "", "hami.io/kunlun-allocated"},
      {"AMD", "hami.io/amd-devices-to-allocate", "hami.io/amd-devices-allocated"},
      {"Ascend910B3", "hami.io/Ascend910B3-devices-to-allocate",
       "hami.io/Ascend910B3-devices-allocated"},
      {"MR-V100", "hami.io/MR-V100-devices-to-allocate", "hami.io/MR-V100-devices-allocated"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ByWord(c.word).keys().to_allocate, c.to) << c.word;
    EXPECT_EQ(ByWord(c.word).keys().allocated, c.done) << c.word;
  }
}

TEST(DecisionTest, CambriconWritesProfileAndLock) {
  core::PodAllocation a;
  a.containers = {{{"MLU-2", "MLU", 4096, 25, 2}}};
  auto enc = ByWord("MLU").EncodeDecision(a, 1700000000);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->at("hami.io/cambricon-mlu-devices-allocated"), "MLU-2,MLU,4096,25:;");
  EXPECT_EQ(enc->at("CAMBRICON_DSMLU_PROFILE"), "2_25_16");  // <idx>_<cores>_<mem/256>
  EXPECT_EQ(enc->at("cambricon.com/dsmlu.lock"), "2023-11-14T22:13:20Z");
}

TEST(DecisionTest, AscendWritesTheTemplateChoice) {
  core::PodAllocation a;
  a.containers = {{{"910B3-0", "Ascend910B3", 16384, 25, 0}}};
  auto enc = ByWord("Ascend910B3").EncodeDecision(a, 0);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->at("huawei.com/Ascend910B3"),
            R"([{"UUID":"910B3-0","core":25,"memory":16384,"temp":"vir05_1c_16g"}])");
}

// ---- Request parsing and webhook ----
struct ReqCase {
  const char* word;
  nlohmann::json resources;
  std::map<std::string, std::string> annotations;
  bool asks;
  int nums;
  int64_t mem;
  int pct;
  int cores;
};
TEST(RequestTest, DefaultingPerVendor) {
  const ReqCase cases[] = {
      // bare count = whole exclusive device
      {"DCU", Limits({{"hygon.com/dcunum", 1}}), {}, true, 1, 0, 100, 100},
      {"DCU", Limits({{"hygon.com/dcumem", 2000}}), {}, true, 1, 2000, 0, 0},
      {"DCU", Limits({{"cpu", "2"}}), {}, false, 0, 0, 0, 0},
      // Moore Threads: 512 MiB memory units, 16 core units per GPU
      {"Mthreads",
       Limits({{"mthreads.com/vgpu", 1},
               {"mthreads.com/sgpu-memory", 8},
               {"mthreads.com/sgpu-core", 4}}),
       {},
       true,
       1,
       4096,
       0,
       4},  // core units, as upstream
      // Iluvatar: 256 MiB units, per-chip names
      {"BI-V150",
       Limits({{"iluvatar.ai/BI-V150-vgpu", 1}, {"iluvatar.ai/BI-V150.vMem", 16}}),
       {},
       true,
       1,
       4096,
       0,
       0},
      // whole-device vendors ignore partial sizes
      {"kunlun", Limits({{"kunlunxin.com/xpu", 2}}), {}, true, 2, 0, 100, 100},
      {"Metax-GPU", Limits({{"metax-tech.com/gpu", 1}}), {}, true, 1, 0, 100, 100},
      // Template vNPU: the request is the template that will be allocated (upstream's
      // GenerateResourceRequests trims it), so a spec the webhook rewrote parses the same.
      {"Ascend910B3",
       Limits({{"huawei.com/Ascend910B3", 1}, {"huawei.com/Ascend910B3-memory", 10000}}),
       {},
       true,
       1,
       16384,
       0,
       0},
      {"Ascend910B3",
       Limits({{"huawei.com/Ascend910B3-memory", 10000}, {"huawei.com/Ascend910B3-core", 30}}),
       {{"huawei.com/vnpu-mode", "hami-core"}},
       true,
       1,
       10000,
       0,
       30},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(StrCat(c.word, " ", c.resources.dump()));
    auto r = ByWord(c.word).ParseRequest(c.resources, c.annotations);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->has_value(), c.asks);
    if (!c.asks) continue;
    EXPECT_EQ((*r)->vendor, c.word);
    EXPECT_EQ((*r)->nums, c.nums);
    EXPECT_EQ((*r)->memreq_mib, c.mem);
    EXPECT_EQ((*r)->mem_percentage, c.pct);
    EXPECT_EQ((*r)->coresreq, c.cores);
  }
}

TEST(WebhookTest, DefaultsEnvAndDenials) {
  auto m = ByWord("DCU").Mutate(Limits({{"hygon.com/dcumem", 2000}}), {});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->add_limits, (std::map<std::string, int64_t>{{"hygon.com/dcunum", 1}}));
  m = ByWord("DCU").Mutate(Limits({{"hygon.com/dcunum", 1}}), {});
  EXPECT_EQ(m->add_limits, (std::map<std::string, int64_t>{{"hygon.com/dcucores", 100}}));
  m = ByWord("Mthreads").Mutate(Limits({{"mthreads.com/vgpu", 1}}), {});
  EXPECT_EQ(m->add_limits, (std::map<std::string, int64_t>{{"mthreads.com/sgpu-core", 16},
                                                           {"mthreads.com/sgpu-memory", 96}}));
  m = ByWord("NVIDIA").Mutate(Limits({{"nvidia.com/gpu", 1}, {"nvidia.com/priority", 1}}), {});
  EXPECT_EQ(m->env.at("CUDA_TASK_PRIORITY"), "1");
  EXPECT_EQ(m->add_limits.at("nvidia.com/gpucores"), 100);

  struct Deny {
    const char* word;
    nlohmann::json res;
    std::map<std::string, std::string> ann;
    const char* part;
  } denies[] = {
      {"Ascend910B3",
       Limits({{"huawei.com/Ascend910B3", 2}, {"huawei.com/Ascend910B3-memory", 8000}}),
       {},
       "cannot split memory across more than 1"},
      {"Ascend910B3",
       Limits({{"huawei.com/Ascend910B3", 1}, {"huawei.com/Ascend910B3-core", 10}}),
       {},
       "huawei.com/vnpu-mode: hami-core"},
      // Upstream v2.11's ENPU backend (its enpu_test.go modes enpu, vcann-rt, ubs-virt): not
      // scheduled here yet, so denied rather than placed as template vNPU.
      {"Ascend910B3",
       Limits({{"huawei.com/Ascend910B3", 1}, {"huawei.com/Ascend910B3-memory", 20480}}),
       {{"huawei.com/vnpu-mode", "enpu"}},
       "ENPU soft split) is not supported"},
      {"Ascend910B3",
       Limits({{"huawei.com/Ascend910B3", 1}}),
       {{"huawei.com/vnpu-mode", " UBS-virt"}},
       "is not supported by hami-cpp yet"},
      // Memory above the largest template is not denied: it takes a whole card where the card
      // holds it (AscendUpstream.TestFitMemoryAboveTheLargestTemplate).
      {"kunlun", Limits({{"kunlunxin.com/xpu", 3}}), {}, "allows only 1, 2, 4, 8"},
      {"Metax-SGPU",
       Limits({{"metax-tech.com/sgpu", 1}}),
       {{"metax-tech.com/sgpu-qos-policy", "fast"}},
       "best-effort|fixed-share|burst-share"},
  };
  for (const auto& d : denies) {
    auto r = ByWord(d.word).Mutate(d.res, d.ann);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->denials.size(), 1u) << d.word << " " << d.res.dump();
    EXPECT_NE(r->denials[0].find(d.part), std::string::npos) << r->denials[0];
  }
  // hami-core mode lifts the template rules.
  auto ok =
      ByWord("Ascend910B3")
          .Mutate(Limits({{"huawei.com/Ascend910B3", 2}, {"huawei.com/Ascend910B3-memory", 8000}}),
                  {{"huawei.com/vnpu-mode", "hami-core"}});
  EXPECT_TRUE(ok->denials.empty());
}

TEST(SelectorTest, UseNouseKeysPerVendor) {
  auto s = ByWord("DCU").ParseSelectors(
      {{"hygon.com/use-dcutype", "Z100, K100"}, {"hygon.com/nouse-gpuuuid", "DCU-1"}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->use_types, (std::vector<std::string>{"Z100", "K100"}));
  EXPECT_EQ(s->nouse_uuids, (std::vector<std::string>{"DCU-1"}));
  s = ByWord("XPU").ParseSelectors({{"hami.io/use-xpu-uuid", "XPU-a"}});
  EXPECT_EQ(s->use_uuids, (std::vector<std::string>{"XPU-a"}));
  s = ByWord("Ascend910B3").ParseSelectors({{"hami.io/no-use-Ascend910B3-uuid", "x"}});
  EXPECT_EQ(s->nouse_uuids, (std::vector<std::string>{"x"}));
  // Upstream's assertNuma: a value that is not a boolean leaves NUMA binding off (not an error).
  auto numa = ByWord("NVIDIA").ParseSelectors({{"nvidia.com/numa-bind", "maybe"}});
  ASSERT_TRUE(numa.ok()) << numa.status();
  EXPECT_FALSE(numa->numa_bind);
  EXPECT_FALSE(ByWord("NVIDIA").ParseSelectors({{"nvidia.com/vgpu-mode", "maybe"}}).ok());
}

// ---- Fit rules ----
std::vector<core::DeviceInfo> Devs(const Vendor& v, int n, int64_t mem,
                                   const std::string& mode = "") {
  std::vector<core::DeviceInfo> out;
  for (int i = 0; i < n; ++i)
    out.push_back({StrCat(v.common_word(), "-", i),
                   i,
                   4,
                   mem,
                   100,
                   "model",
                   v.common_word(),
                   0,
                   true,
                   mode,
                   {}});
  return out;
}

TEST(FitTest, AscendRoundsUpToTheSmallestTemplate) {
  const Vendor& v = ByWord("Ascend910B3");
  auto devs = Devs(v, 2, 65536);
  std::vector<core::DeviceUsage> usage(2);
  struct Case {
    int64_t mem;
    int64_t granted;
    int cores;
  } cases[] = {{1, 16384, 25}, {16384, 16384, 25}, {16385, 32768, 50}};
  for (const auto& c : cases) {
    auto r = v.ParseRequest(
        Limits({{"huawei.com/Ascend910B3", 1}, {"huawei.com/Ascend910B3-memory", c.mem}}), {});
    ASSERT_TRUE(r.ok() && *r);
    auto fit = v.Fit(**r, devs, usage, {}, {});
    ASSERT_TRUE(fit.ok()) << fit.Summary(2);
    EXPECT_EQ(fit.devices[0].usedmem_mib, c.granted) << c.mem;
    EXPECT_EQ(fit.devices[0].usedcores, c.cores) << c.mem;
  }
  // hami-core pods only on hami-core nodes, and vice versa.
  auto r = v.ParseRequest(Limits({{"huawei.com/Ascend910B3-memory", 1000}}),
                          {{"huawei.com/vnpu-mode", "hami-core"}});
  auto sel = v.ParseSelectors({{"huawei.com/vnpu-mode", "hami-core"}});
  auto fit = v.Fit(**r, devs, usage, *sel, {});
  EXPECT_FALSE(fit.ok());
  EXPECT_EQ(fit.refusals[0].reason, scheduler::Reason::kCardTypeMismatch);
  auto soft = Devs(v, 2, 65536, "hami-core");
  fit = v.Fit(**r, soft, usage, *sel, {});
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit.devices[0].usedmem_mib, 1000);  // no template rounding in soft split
}

TEST(FitTest, KunlunKeepsGroupsTogetherAndScoresThem) {
  const Vendor& v = ByWord("kunlun");
  NodeView node;
  node.name = "n";
  node.capacity["kunlunxin.com/xpu"] = 8;
  auto devs = *v.DecodeNode(node);
  std::vector<core::DeviceUsage> usage(8);
  usage[0].used = usage[1].used = 1;  // half 0 has 2 free cards, half 1 has 4
  auto two = v.ParseRequest(Limits({{"kunlunxin.com/xpu", 2}}), {});
  auto fit = v.Fit(**two, devs, usage, {}, node);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit.devices[0].uuid, "n-kunlun-2");  // the half with exactly two free
  EXPECT_EQ(fit.devices[1].uuid, "n-kunlun-3");
  auto four = v.ParseRequest(Limits({{"kunlunxin.com/xpu", 4}}), {});
  fit = v.Fit(**four, devs, usage, {}, node);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit.devices[0].uuid, "n-kunlun-4");
  usage[5].used = 1;  // no half has 4 free cards: the cross group 2-3-6-7
  fit = v.Fit(**four, devs, usage, {}, node);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit.devices[0].uuid, "n-kunlun-2");
  EXPECT_EQ(fit.devices[3].uuid, "n-kunlun-7");
  usage[6].used = 1;  // free 2, 3, 4, 7: no cross group
  fit = v.Fit(**four, devs, usage, {}, node);
  EXPECT_FALSE(fit.ok());
  EXPECT_EQ(fit.refusals.back().reason, scheduler::Reason::kNumaNotFit);
  EXPECT_NE(fit.refusals.back().detail.find("no allowed group"), std::string::npos);
  // Polarity: one half scores above a split.
  const int same[] = {4, 5}, split[] = {3, 4};
  EXPECT_GT(v.ScoreNode(devs, same, node), v.ScoreNode(devs, split, node));
}

TEST(ScoreTest, MetaxLossesAndAscendNetworkIdRespectPolarity) {
  const Vendor& m = ByWord("Metax-GPU");
  NodeView node;
  node.capacity["metax-tech.com/gpu"] = 4;
  node.annotations["metax-tech.com/gpu.topology.losses"] =
      R"({"0,1":0,"0,2":1500,"1,2":1500})";  // constructed
  auto devs = *m.DecodeNode(node);
  const int near[] = {0, 1}, far[] = {0, 2};
  EXPECT_EQ(m.ScoreNode(devs, near, node), 100);
  EXPECT_EQ(m.ScoreNode(devs, far, node), 25);

  const Vendor& a = ByWord("Ascend910B3");
  NodeView an;
  an.annotations["hami.io/node-register-Ascend910B3"] =  // constructed: customInfo.NetworkID per
                                                         // device
      R"([{"id":"a0","count":1,"devmem":65536,"devcore":100,"health":true,"customInfo":{"NetworkID":1}},)"
      R"({"id":"a1","count":1,"devmem":65536,"devcore":100,"health":true,"customInfo":{"NetworkID":1}},)"
      R"({"id":"a2","count":1,"devmem":65536,"devcore":100,"health":true,"customInfo":{"NetworkID":2}}])";
  auto ad = a.DecodeNode(an);
  ASSERT_TRUE(ad.ok()) << ad.status();
  const int same[] = {0, 1}, mixed[] = {1, 2};
  EXPECT_EQ(a.ScoreNode(*ad, same, an), 100);
  EXPECT_EQ(a.ScoreNode(*ad, mixed, an), 50);
}

TEST(AllocateEnvTest, NvidiaArmsLibvgpu) {
  auto env = ByWord("NVIDIA").AllocateEnv(
      {{"GPU-a", "NVIDIA", 3000, 30, 0}, {"GPU-b", "NVIDIA", 5000, 30, 1}});
  EXPECT_EQ(env.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
  EXPECT_EQ(env.at("CUDA_DEVICE_MEMORY_LIMIT_1"), "5000m");
  EXPECT_EQ(env.at("CUDA_DEVICE_SM_LIMIT"), "30");
  EXPECT_EQ(env.at("NVIDIA_VISIBLE_DEVICES"), "GPU-a,GPU-b");
  EXPECT_EQ(env.count("CUDA_DEVICE_SM_LIMIT_0"), 0u);  // equal limits: upstream's one value
  auto differ = ByWord("NVIDIA").AllocateEnv(
      {{"GPU-a", "NVIDIA", 3000, 30, 0}, {"GPU-b", "NVIDIA", 5000, 60, 1}});
  EXPECT_EQ(differ.at("CUDA_DEVICE_SM_LIMIT"), "30");
  EXPECT_EQ(differ.at("CUDA_DEVICE_SM_LIMIT_0"), "30");
  EXPECT_EQ(differ.at("CUDA_DEVICE_SM_LIMIT_1"), "60");
  EXPECT_TRUE(ByWord("NVIDIA").AllocateEnv({}).empty());
  EXPECT_TRUE(ByWord("DCU").AllocateEnv({{"DCU-0", "DCU", 1, 1, 0}}).empty());
}

TEST(RefusalTest, ParsesOnlyKnownReasons) {
  auto r = ParseRefusal("CardInsufficientMemory: GPU-a: needs 5 MiB, 3 free");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->reason, scheduler::Reason::kCardInsufficientMemory);
  EXPECT_EQ(r->detail, "GPU-a: needs 5 MiB, 3 free");
  EXPECT_FALSE(ParseRefusal("Nope: x").ok());
  // The reasons vendors used to have of their own are no scheduler reason.
  for (const char* gone :
       {"CardTemplateNotFound", "DeviceCountNotAllowed", "CardTopologyInfeasible"})
    EXPECT_FALSE(ParseRefusal(StrCat(gone, ": x")).ok()) << gone;
  FitResult f;
  using scheduler::Reason;
  f.refusals = {{Reason::kCardInsufficientMemory, "a", false},
                {Reason::kCardInsufficientMemory, "b", false},
                {Reason::kCardNotHealth, "c", false}};
  EXPECT_EQ(f.Summary(8), "2/8 CardInsufficientMemory, 1/8 CardNotHealth");
}

TEST(HandshakeTest, UpstreamCheckHealthRules) {
  const int64_t now = 1700000000;  // 2023-11-14 22:13:20 UTC
  struct Case {
    const char* value;
    int64_t now;
    int64_t allocatable;
    HandshakeDecision want;
  } cases[] = {
      {"", now, 8, {Handshake::kWriteRequest, "Requesting_2023-11-14 22:13:20"}},
      // pkg/device/devices_test.go Test_CheckHealth "Deleted state": healthy but no update, so
      // no new request, and the devices the cleanup dropped stay out until the plugin reports.
      {"Deleted", now, 0, {Handshake::kCleanedUp, ""}},
      {"Deleted_2023-11-14 22:00:00", now, 8, {Handshake::kCleanedUp, ""}},
      {"Reported_2023-11-14 22:13:00",
       now,
       0,
       {Handshake::kWriteRequest, "Requesting_2023-11-14 22:13:20"}},
      {"Requesting_2023-11-14 22:13:00", now, 0, {Handshake::kHealthy, ""}},  // 20 s: still waiting
      {"Requesting_2023-11-14 22:12:00",
       now,
       4,
       {Handshake::kHealthy, ""}},  // old, but allocatable
      {"Requesting_2023-11-14 22:12:00",
       now,
       0,
       {Handshake::kUnhealthy, ""}},  // 80 s and nothing allocatable
      // Upstream's CheckHealth: a request whose time does not parse is healthy and not renewed.
      {"Requesting_garbage", now, 0, {Handshake::kHealthy, ""}},
      {"Requesting", now, 0, {Handshake::kHealthy, ""}},
      // pkg/device/devices_test.go Test_CheckHealth, the other rows.
      {"Requesting_2128-12-02 00:00:00", now, 0, {Handshake::kHealthy, ""}},  // in the future
      {"Requesting_not-a-timestamp", now, 0, {Handshake::kHealthy, ""}},
      // Healthy (the devices stay); not a request, so a new one is written, as upstream's
      // registration round writes Requesting_<now> after the device plugin's report.
      {"Unknown", now, 0, {Handshake::kWriteRequest, "Requesting_2023-11-14 22:13:20"}},
  };
  for (const auto& c : cases)
    EXPECT_EQ(CheckHandshake(c.value, c.now, c.allocatable), c.want) << c.value;
}

// ---- Config ----
TEST(ConfigTest, SectionsEnableVendorsAndRenameResources) {
  auto none = LoadVendors("");
  ASSERT_TRUE(none.ok());
  ASSERT_EQ(none->size(), 1u);  // NVIDIA only; disabled vendors are never built
  EXPECT_EQ((*none)[0]->common_word(), "NVIDIA");
  auto some = LoadVendors(R"(
nvidia:
  resourceCountName: example.com/gpu
  deviceSplitCount: 10
hygon:
  resourceMemoryName: hygon.com/mem
kunlun:
  enabled: false
vnpus:
- chipName: 910B4
  commonWord: Ascend910B4
  resourceName: huawei.com/Ascend910B4
  resourceMemoryName: huawei.com/Ascend910B4-memory
  memoryAllocatable: 32768
  memoryCapacity: 32768
  aiCore: 20
  aiCPU: 7
  templates:
  - {name: vir05_1c_8g, memory: 8192, aiCore: 5, aiCPU: 1}
)");
  ASSERT_TRUE(some.ok()) << some.status();
  std::vector<std::string> words;
  for (const auto& v : *some) words.push_back(v->common_word());
  EXPECT_EQ(words, (std::vector<std::string>{"NVIDIA", "Ascend910B4", "DCU", "HCU"}));
  EXPECT_EQ((*some)[0]->resources().count, "example.com/gpu");
  EXPECT_EQ((*some)[2]->resources().memory, "hygon.com/mem");
  EXPECT_EQ((*some)[1]->rules().templates, (std::vector<Template>{{"vir05_1c_8g", 8192, 25}}));
  auto r = (*some)[0]->ParseRequest(Limits({{"example.com/gpu", 1}}), {});
  ASSERT_TRUE(r.ok() && *r);
}

TEST(ConfigTest, ErrorsNameTheOption) {
  struct Case {
    const char* yaml;
    const char* part;
  } cases[] = {
      {"hygon:\n  resourceMemoryNam: x\n", "hygon.resourceMemoryNam: unknown option"},
      {"nvidia:\n  defaultMemory: lots\n", "nvidia.defaultMemory: expected an integer"},
      {"vnpus:\n- chipName: x\n  aiCore: 0\n", "vnpus[0]: chipName and aiCore > 0 are required"},
      {"vnpus: 5\n", "vnpus: expected a list of chips or a mapping"},
      {"vnpus:\n  configs: {}\n", "vnpus.configs: expected a list"},
      {"vnpus:\n  hamiVnpuCore: maybe\n", "vnpus.hamiVnpuCore: expected true or false"},
      {"vnpus:\n  hamiVnpuCore: true\n  config: []\n", "vnpus.config: unknown option"},
      // Upstream v2.11's VNPUs.mode() and vnpuDeviceSplitCount (a positive integer).
      {"vnpus:\n  hamiVnpuMode: soft\n", "vnpus.hamiVnpuMode: must be template, hami-core"},
      {"vnpus:\n  hamiVnpuMode: enpu\n", "vnpus.hamiVnpuMode: enpu (Ascend's ENPU soft split)"},
      {"vnpus:\n  hamiVnpuMode: [template]\n", "vnpus.hamiVnpuMode: expected a string"},
      {"vnpus:\n  vnpuDeviceSplitCount: -1\n", "vnpus.vnpuDeviceSplitCount: must be >= 0"},
      {"vnpus:\n  vnpuDeviceSplitCount: ten\n", "vnpus.vnpuDeviceSplitCount: expected an integer"},
      {"vnpus:\n  configs:\n  - {chipName: x, aiCore: 1, superPodd: 1}\n",
       "vnpus.configs[0].superPodd: unknown"},
      {"nvidia:\n  resourceCountNmae: x\n", "nvidia.resourceCountNmae: unknown option"},
      {"metax:\n  resourceVCountName: [a]\n", "metax.resourceVCountName: expected a string"},
      {"mthreads:\n  memoryPerCards: [1]\n", "mthreads.memoryPerCards: unknown option"},
      {"enflame:\n  resourceNameGCUCores: x\n", "enflame.resourceNameGCUCores: unknown option"},
      {"kunlun:\n  enabled: maybe\n", "kunlun.enabled"},
      {"nvidia: [\n", "line"},
      {"- a\n", "expected a mapping"},
      {"foo: 1\n", "foo: unknown section"},  // upstream's awsneuron, vastai, biren are accepted
      // Two backends claiming one resource refuse to start (upstream's v2.11 startup validation).
      {"hygon:\n  resourceCountName: nvidia.com/gpu\n",
       "nvidia.com/gpu is the device count of both nvidia (NVIDIA) and hygon (DCU)"},
      {"vnpus:\n- {chipName: A, commonWord: X, aiCore: 1}\n- {chipName: B, commonWord: X, aiCore: "
       "1}\n",
       "is the device count of both ascend (X) and ascend (X)"},
      {"vnpus:\n- {chipName: A, commonWord: X, aiCore: 1}\n"
       "- {chipName: B, commonWord: X, aiCore: 1, resourceName: huawei.com/B}\n",
       "X is the Type keyword of both ascend (X) and ascend (X)"},
  };
  for (const auto& c : cases) {
    auto r = LoadVendors(c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_NE(std::string(r.status().message()).find(c.part), std::string::npos) << r.status();
  }
}

// Upstream's chart-rendered device-config.yaml (testdata, chart defaults) loads as is, in both
// vnpus forms, and names exactly the resources our defaults use.
std::string UpstreamConfig(bool vnpus_as_list) {
  std::ifstream in("src/vendors/testdata/upstream-device-config.yaml");
  std::stringstream text;
  text << in.rdbuf();
  if (!vnpus_as_list) return text.str();
  YAML::Node root = YAML::Load(text.str());
  root["vnpus"] = YAML::Clone(root["vnpus"]["configs"]);  // older upstream: a plain list of chips
  YAML::Emitter out;
  out << root;
  return out.c_str();
}

TEST(ConfigTest, UpstreamDefaultFileLoadsAsIs) {
  const std::vector<std::string> want = {
      "NVIDIA",     "Ascend910B3", "Ascend310P", "DCU",    "HCU",       "MLU",     "Metax-GPU",
      "Metax-SGPU", "Mthreads",    "MR-V100",    "MR-V50", "BI-V150",   "BI-V100", "GCU",
      "Enflame",    "kunlun",      "XPU",        "AMD",    "AWSNeuron", "Vastai",  "Biren"};
  struct Case {
    const char* name;
    bool vnpus_as_list;
  } cases[] = {{"vnpus map", false}, {"vnpus list", true}};
  for (const auto& c : cases) {
    const std::string text = UpstreamConfig(c.vnpus_as_list);
    ASSERT_NE(text.find("vnpus"), std::string::npos) << c.name;
    ASSERT_EQ(YAML::Load(text)["vnpus"].IsSequence(), c.vnpus_as_list) << c.name;
    auto got = LoadVendors(text);
    ASSERT_TRUE(got.ok()) << c.name << ": " << got.status();
    std::vector<std::string> words;
    for (const auto& v : *got) {
      words.push_back(v->common_word());
      const Vendor& d = ByWord(v->common_word());
      EXPECT_EQ(v->resources().count, d.resources().count) << c.name << " " << v->common_word();
      EXPECT_EQ(v->resources().memory, d.resources().memory) << c.name << " " << v->common_word();
      EXPECT_EQ(v->resources().memory_percentage, d.resources().memory_percentage) << c.name;
      EXPECT_EQ(v->resources().cores, d.resources().cores) << c.name << " " << v->common_word();
      EXPECT_EQ(v->resources().priority, d.resources().priority) << c.name;
      EXPECT_EQ(v->rules().templates, d.rules().templates) << c.name << " " << v->common_word();
    }
    EXPECT_EQ(words, want) << c.name;
    EXPECT_EQ((*got)[1]->resources().count, "huawei.com/Ascend910B3");
    EXPECT_EQ((*got)[1]->rules().templates,
              (std::vector<Template>{{"vir05_1c_16g", 16384, 25}, {"vir10_3c_32g", 32768, 50}}));
  }
}

TEST(ConfigTest, EmptyValuesKeepDefaultsAndUpstreamVendorsWeLackAreIgnored) {
  struct Case {
    const char* name;
    const char* yaml;
    std::vector<std::string> words;
  } cases[] = {
      {"unset values",
       "hygon:\n  resourceCountName:\n  resourceMemoryName: \"\"\nnvidia:\n  defaultMemory: \"\"\n"
       "  resourceCoreName: ''\n  overwriteEnv: \"\"\n",
       {"NVIDIA", "DCU", "HCU"}},
      {"the newer vendors' sections build them",
       "awsneuron: {resourceCountName: aws.amazon.com/neuron}\nvastai:\nbiren: {}\n",
       {"NVIDIA", "AWSNeuron", "Vastai", "Biren"}},
      {"vnpus map, no configs",
       "vnpus:\n  hamiVnpuCore: true\n",
       {"NVIDIA", "Ascend910B3", "Ascend310P"}},
      {"vnpus map of upstream v2.11 (hamiVnpuMode, enpuPolicy, vnpuDeviceSplitCount, ...)",
       "vnpus:\n  hamiVnpuMode: \" HamiCore\"\n  enpuPolicy: elastic\n  overwriteEnv: false\n"
       "  runtimeClassName: \"\"\n  vnpuDeviceSplitCount: 10\n  configs: []\n",
       {"NVIDIA", "Ascend910B3", "Ascend310P"}},
      {"vnpus hamiVnpuMode template",
       "vnpus:\n  hamiVnpuMode: template\n",
       {"NVIDIA", "Ascend910B3", "Ascend310P"}},
      {"vnpus empty list",
       "vnpus: []\nnvidia:\n  enabled: \"\"\n",
       {"NVIDIA", "Ascend910B3", "Ascend310P"}},
  };
  for (const auto& c : cases) {
    auto got = LoadVendors(c.yaml);
    ASSERT_TRUE(got.ok()) << c.name << ": " << got.status();
    std::vector<std::string> words;
    for (const auto& v : *got) {
      words.push_back(v->common_word());
      const Vendor& d = ByWord(v->common_word());
      EXPECT_EQ(v->resources().count, d.resources().count) << c.name;
      EXPECT_EQ(v->resources().memory, d.resources().memory) << c.name;
      EXPECT_EQ(v->resources().cores, d.resources().cores) << c.name;
    }
    EXPECT_EQ(words, c.words) << c.name;
  }
}

TEST(RegistryTest, EveryRowBuildsWithDefaultsAndNamesAreUnique) {
  std::set<std::string> words, counts;
  for (const auto& v : All()) {
    EXPECT_TRUE(words.insert(v->common_word()).second) << v->common_word();
    EXPECT_TRUE(counts.insert(v->resources().count).second) << v->resources().count;
    EXPECT_FALSE(v->keys().allocated.empty()) << v->common_word();
  }
  EXPECT_EQ(All().size(), 25u);  // nvidia 1, ascend 2, hygon 2 (DCU, HCU), cambricon, metax 2,
                                 // mthreads, iluvatar 4, enflame 2, enflamevgcu, kunlun 2, amd,
                                 // awsneuron, vastai, biren, intel 2, remotegpu
}

}  // namespace
}  // namespace hami::vendors
