// Codecs of upstream's annotations: upstream's example values (docs/upstream-contract.md) decode to
// what they say, encode back byte for byte, and malformed values fail with actionable errors.
#include <gtest/gtest.h>

#include "core/lock_codec.h"
#include "core/node_codec.h"
#include "core/pod_codec.h"
#include "core/text_util.h"

namespace hami::core {
namespace {

bool Contains(const Status& s, const char* part) {
  return std::string(s.message()).find(part) != std::string::npos;
}

// Upstream's example (docs/upstream-contract.md#node-registration-and-handshake), verbatim.
constexpr const char kUpstreamRegister[] =
    R"([{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","index":1,"count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"health":true,"mode":"hami-core"}])";

TEST(NodeDevicesTest, UpstreamJsonExampleDecodesAndEncodesByteForByte) {
  auto devs = DecodeNodeDevices(kUpstreamRegister);
  ASSERT_TRUE(devs.ok()) << devs.status();
  ASSERT_EQ(devs->size(), 1u);
  const DeviceInfo& d = (*devs)[0];
  EXPECT_EQ(d.uuid, "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448");
  EXPECT_EQ(d.index, 1);
  EXPECT_EQ(d.count, 10);
  EXPECT_EQ(d.devmem_mib, 32768);
  EXPECT_EQ(d.devcore, 100);
  EXPECT_EQ(d.type, "NVIDIA-Tesla V100-PCIE-32GB");
  EXPECT_EQ(d.numa, 1);
  EXPECT_TRUE(d.health);
  EXPECT_EQ(d.mode, "hami-core");
  EXPECT_EQ(d.vendor, "NVIDIA");
  EXPECT_EQ(EncodeNodeDevicesJson(*devs), kUpstreamRegister);
}

TEST(NodeDevicesTest, OmitemptyBothWays) {
  DeviceInfo d;
  d.uuid = "GPU-x";
  d.index = 0;
  d.count = 4;
  d.devmem_mib = 1000;
  d.devcore = 100;
  d.numa = 0;
  d.health = false;
  d.mode = "";
  const std::string text = EncodeNodeDevicesJson({d});
  EXPECT_EQ(text, R"([{"id":"GPU-x","count":4,"devmem":1000,"devcore":100}])");
  auto back = DecodeNodeDevices(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, std::vector<DeviceInfo>{d});
  // Absent means Go's zero value: unhealthy, devcore 0.
  auto bare = DecodeNodeDevices(R"([{"id":"GPU-y"}])");
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE((*bare)[0].health);
  EXPECT_EQ((*bare)[0].devcore, 0);
}

// A registration may declare at most kMaxNodeDevices devices, in either format; more is refused
// whole, with an error that says so.
TEST(NodeDevicesTest, DeviceCountIsCapped) {
  auto json_of = [](size_t n) {
    std::string t = "[";
    for (size_t i = 0; i < n; ++i)
      t +=
          StrCat(i ? "," : "", R"({"id":"GPU-)", i, R"(","count":10,"devmem":1000,"devcore":100})");
    return t + "]";
  };
  auto csv_of = [](size_t n) {
    std::string t;
    for (size_t i = 0; i < n; ++i) t += StrCat("GPU-", i, ",10,1000,100,T4,0,true:");
    return t;
  };
  struct Case {
    const char* name;
    std::string text;
    bool ok;
  };
  const Case cases[] = {
      {"json at the cap", json_of(kMaxNodeDevices), true},
      {"json one past", json_of(kMaxNodeDevices + 1), false},
      {"json 100k", json_of(100'000), false},
      {"csv at the cap", csv_of(kMaxNodeDevices), true},
      {"csv one past", csv_of(kMaxNodeDevices + 1), false},
      {"csv 100k", csv_of(100'000), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto got = DecodeNodeDevices(c.text);
    ASSERT_EQ(got.ok(), c.ok) << got.status();
    if (c.ok) {
      EXPECT_EQ(got->size(), kMaxNodeDevices);
    } else {
      EXPECT_NE(got.status().message().find("a node may register"), std::string::npos)
          << got.status();
    }
  }
}

// Upstream decodes the registration with Go's encoding/json, which matches keys to field names
// case-insensitively: a device plugin writing {"ID":..,"Devmem":..} registers there, so here too.
TEST(NodeDevicesTest, GoJsonKeysMatchFieldNamesCaseInsensitively) {
  struct Case {
    const char* name;
    const char* text;
    std::string uuid;
    int64_t devmem;
    bool health;
  } cases[] = {
      {"Go field names", R"([{"ID":"GPU-a","Count":10,"Devmem":1000,"Health":true}])", "GPU-a",
       1000, true},
      {"upper case", R"([{"ID":"GPU-b","DEVMEM":2000,"HEALTH":true}])", "GPU-b", 2000, true},
      {"exact spelling wins", R"([{"id":"GPU-c","ID":"GPU-x","devmem":3000}])", "GPU-c", 3000,
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto got = DecodeNodeDevices(c.text);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), 1u);
    EXPECT_EQ((*got)[0].uuid, c.uuid);
    EXPECT_EQ((*got)[0].devmem_mib, c.devmem);
    EXPECT_EQ((*got)[0].health, c.health);
  }
  // Folding does not relax types: a string where Go wants a number is still an error.
  EXPECT_FALSE(DecodeNodeDevices(R"([{"ID":"GPU-d","DevMem":"1000"}])").ok());
  auto mig = DecodeNodeDevices(
      R"([{"id":"GPU-m","Mode":"mig","MigProfiles":[{"Name":"1g.10gb","MemoryMB":9856,"SliceCount":1,)"
      R"("Placements":[{"Start":0,"Size":1}]}]}])");
  ASSERT_TRUE(mig.ok()) << mig.status();
  ASSERT_EQ((*mig)[0].mig_profiles.size(), 1u);
  EXPECT_EQ((*mig)[0].mig_profiles[0].memory_mib, 9856);
  ASSERT_EQ((*mig)[0].mig_profiles[0].placements.size(), 1u);
  EXPECT_EQ((*mig)[0].mig_profiles[0].placements[0].size, 1);
}

TEST(NodeDevicesTest, MigProfilesRoundTrip) {
  constexpr const char kMig[] =
      R"([{"id":"GPU-a","count":7,"devmem":81920,"devcore":100,"type":"NVIDIA-A100-SXM4-80GB","health":true,"mode":"mig","migProfiles":[{"name":"1g.10gb","memoryMB":9856,"core":15,"sliceCount":1,"placements":[{"start":0,"size":1},{"start":1,"size":1}]},{"name":"7g.80gb","memoryMB":80000,"core":100,"sliceCount":7,"placements":[{"start":0,"size":8}]}]}])";
  auto devs = DecodeNodeDevices(kMig);
  ASSERT_TRUE(devs.ok()) << devs.status();
  ASSERT_EQ((*devs)[0].mig_profiles.size(), 2u);
  EXPECT_EQ((*devs)[0].mig_profiles[0].placements[1], (MigPlacement{1, 1}));
  EXPECT_EQ((*devs)[0].mig_profiles[1].memory_mib, 80000);
  EXPECT_EQ(EncodeNodeDevicesJson(*devs), kMig);
}

TEST(NodeDevicesTest, LegacyCsv) {
  // Upstream's example (docs/upstream-contract.md#node-registration-and-handshake, UUID completed).
  constexpr const char kCsv[] =
      "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec,10,32768,100,NVIDIA-Tesla "
      "V100-PCIE-32GB,0,true,0,hami-core:";
  auto devs = DecodeNodeDevices(kCsv);
  ASSERT_TRUE(devs.ok()) << devs.status();
  ASSERT_EQ(devs->size(), 1u);
  EXPECT_EQ((*devs)[0].uuid, "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec");
  EXPECT_EQ((*devs)[0].count, 10);
  EXPECT_EQ((*devs)[0].devmem_mib, 32768);
  EXPECT_EQ((*devs)[0].mode, "hami-core");
  EXPECT_TRUE((*devs)[0].health);
  auto csv = EncodeNodeDevicesCsv(*devs);
  ASSERT_TRUE(csv.ok());
  EXPECT_EQ(*csv, kCsv);
  // 7-field form, two devices, no trailing ':'.
  auto seven = DecodeNodeDevices("GPU-a,2,1000,100,T4,1,false:GPU-b,2,1000,100,T4,0,1");
  ASSERT_TRUE(seven.ok()) << seven.status();
  ASSERT_EQ(seven->size(), 2u);
  EXPECT_FALSE((*seven)[0].health);
  EXPECT_EQ((*seven)[0].numa, 1);
  EXPECT_EQ((*seven)[1].index, 0);
  EXPECT_EQ((*seven)[1].mode, "");
  EXPECT_TRUE(DecodeNodeDevices("")->empty());
  // JSON and CSV of the same inventory decode to the same devices.
  auto from_json = DecodeNodeDevices(EncodeNodeDevicesJson(*seven));
  ASSERT_TRUE(from_json.ok());
  EXPECT_EQ(*from_json, *seven);
}

TEST(NodeDevicesTest, CsvEncodeRejectsWhatItCannotCarry) {
  DeviceInfo d;
  d.uuid = "GPU-a";
  d.type = "bad,type";
  EXPECT_FALSE(EncodeNodeDevicesCsv({d}).ok());
  d.type = "T4";
  d.mig_profiles.push_back(MigProfile{"1g.5gb", 4864, 14, 1, {}});
  EXPECT_TRUE(Contains(EncodeNodeDevicesCsv({d}).status(), "use JSON"));
}

TEST(NodeDevicesTest, ErrorsAreActionable) {
  struct Case {
    const char* text;
    const char* error;
  };
  const Case cases[] = {
      {"[", "node devices: invalid JSON"},
      {R"({"id":"x"})", "invalid JSON"},  // not '[' -> CSV path -> '{' entry without fields
      {R"([1])", "node devices[0]: expected a JSON object, got number"},
      {R"([{"id":"a","count":"10"}])",
       "node devices[0]: count: expected an integer, got JSON string"},
      {R"([{"id":"a","count":1.5}])", "count: expected an integer, got 1.5"},
      {R"([{"id":"a","index":-1}])", "index: -1 is below the minimum 0"},
      {R"([{"id":"a","devmem":3000000000}])", "devmem: 3000000000 is above the maximum 2147483647"},
      {R"([{"id":"a","health":"true"}])", "health: expected true or false"},
      {R"([{"id":"a","migProfiles":{}}])", "migProfiles: expected a JSON array"},
      {R"([{"id":"a","migProfiles":[{"placements":[{"start":-1}]}]}])",
       "migProfiles[0].placements[0].start"},
      {R"([{"count":1}])", "node devices[0]: id is empty"},
      {R"([{"id":"a"},{"id":"a"}])", "node devices[1]: id \"a\" appears twice"},
      {"GPU-a,2,1000", "has 3 fields, expected 7"},
      {"GPU-a,x,1000,100,T4,0,true", "count \"x\" is not an integer"},
      {"GPU-a,2,1000,100,T4,0,yes", "health \"yes\" is not true or false"},
      {"GPU-a,2,1000,100,T4,0,true,-3,hami-core", "index \"-3\" is not an integer"},
      {"GPU-\xff,2,1000,100,T4,0,true", "must be valid UTF-8"},  // found by the fuzz target
  };
  for (const auto& c : cases) {
    auto got = DecodeNodeDevices(c.text);
    ASSERT_FALSE(got.ok()) << c.text;
    if (std::string(c.text) == R"({"id":"x"})") continue;  // only that it fails
    EXPECT_TRUE(Contains(got.status(), c.error)) << c.text << " -> " << got.status();
  }
}

TEST(LinkScoresTest, RoundTripAndErrors) {
  constexpr const char kScores[] =
      R"([{"uuid":"GPU-a","score":{"GPU-b":600,"GPU-c":10}},{"uuid":"GPU-b","score":{"GPU-a":600}}])";
  auto s = DecodeLinkScores(kScores);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->at("GPU-a").at("GPU-b"), 600);
  EXPECT_EQ(s->at("GPU-a").at("GPU-c"), 10);
  EXPECT_EQ(EncodeLinkScores(*s), kScores);
  // Signed as upstream's Go int: a negative pair score (a link to avoid) is kept.
  auto neg = DecodeLinkScores(R"([{"uuid":"a","score":{"b":-1}}])");
  ASSERT_TRUE(neg.ok()) << neg.status();
  EXPECT_EQ(neg->at("a").at("b"), -1);
  EXPECT_TRUE(Contains(DecodeLinkScores(R"([{"uuid":"a","score":{"b":-2147483649}}])").status(),
                       "is below"));
  EXPECT_TRUE(Contains(DecodeLinkScores(R"([{"uuid":"a","score":{"b":1.5}}])").status(), "score"));
  EXPECT_TRUE(
      Contains(DecodeLinkScores(R"([{"uuid":"a"},{"uuid":"a"}])").status(), "appears twice"));
  EXPECT_TRUE(Contains(DecodeLinkScores(R"({})").status(), "expected a JSON array"));
  EXPECT_TRUE(Contains(DecodeLinkScores(R"([{"score":{}}])").status(), "uuid is empty"));
}

TEST(DeviceCordonTest, RoundTrip) {
  EXPECT_EQ(DecodeDeviceCordon(" GPU-a, GPU-b ,,"), (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_TRUE(DecodeDeviceCordon("").empty());
  const std::vector<std::string> ids = {"GPU-a", "GPU-b"};
  EXPECT_EQ(DecodeDeviceCordon(EncodeDeviceCordon(ids)), ids);
}

ContainerDevice CD(const char* uuid, int64_t mem, int cores) {
  ContainerDevice d;
  d.uuid = uuid;
  d.usedmem_mib = mem;
  d.usedcores = cores;
  return d;
}

TEST(PodDevicesTest, UpstreamExampleAndRoundTrips) {
  // docs/upstream-contract.md#decision-annotations-per-vendor, verbatim: two containers on the same
  // card.
  constexpr const char kUpstream[] =
      "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,3000,30:;GPU-0fc3eda5-e98b-a25b-5b0d-"
      "cf5c855d1448,NVIDIA,5000,0:;";
  auto a = DecodePodDevices(kUpstream);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->containers.size(), 2u);
  EXPECT_EQ(
      a->containers[0],
      (std::vector<ContainerDevice>{CD("GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448", 3000, 30)}));
  EXPECT_EQ(
      a->containers[1],
      (std::vector<ContainerDevice>{CD("GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448", 5000, 0)}));
  EXPECT_EQ(*EncodePodDevices(*a), kUpstream);

  struct Case {
    const char* text;
    std::vector<std::vector<ContainerDevice>> containers;
  };
  const Case cases[] = {
      {"", {}},
      {";", {{}}},
      {";;", {{}, {}}},  // all containers allocated: the to-allocate annotation erased
      {";GPU-a,NVIDIA,100,0:;",
       {{}, {CD("GPU-a", 100, 0)}}},  // init container without devices keeps its slot
      {"GPU-a,NVIDIA,100,10:GPU-b,NVIDIA,200,20:;", {{CD("GPU-a", 100, 10), CD("GPU-b", 200, 20)}}},
      {"GPU-a,NVIDIA,100,10:;;GPU-b,NVIDIA,0,100:;",
       {{CD("GPU-a", 100, 10)}, {}, {CD("GPU-b", 0, 100)}}},
  };
  for (const auto& c : cases) {
    auto got = DecodePodDevices(c.text);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.status();
    EXPECT_EQ(got->containers, c.containers) << c.text;
    PodAllocation alloc;
    alloc.containers = c.containers;
    auto enc = EncodePodDevices(alloc);
    ASSERT_TRUE(enc.ok()) << enc.status();
    EXPECT_EQ(*enc, c.text);
  }
  // Tolerated variants: missing final ';', blanks around, extra fields after the fourth.
  EXPECT_EQ(DecodePodDevices("GPU-a,NVIDIA,1,2:")->containers.size(), 1u);
  EXPECT_EQ(DecodePodDevices(" GPU-a,NVIDIA,1,2:;\n")->containers.size(), 1u);
  EXPECT_EQ(DecodePodDevices("GPU-a,NVIDIA,1,2,extra:;")->containers[0][0], CD("GPU-a", 1, 2));
  // Blanks around a uuid or type are not part of it, wherever the field is (found by the fuzz
  // target: a blank before the first uuid was kept, then trimmed with the whole value on the
  // next decode, so the value did not survive its own encoding).
  auto blanks = DecodePodDevices(":\n GPU-a ,NVIDIA\t,1,2;\tGPU-b,NVIDIA,3,4:;");
  ASSERT_TRUE(blanks.ok()) << blanks.status();
  EXPECT_EQ(blanks->containers,
            (std::vector<std::vector<ContainerDevice>>{{CD("GPU-a", 1, 2)}, {CD("GPU-b", 3, 4)}}));
  EXPECT_EQ(*EncodePodDevices(*blanks), "GPU-a,NVIDIA,1,2:;GPU-b,NVIDIA,3,4:;");
}

TEST(PodDevicesTest, ErrorsNameContainerAndDevice) {
  struct Case {
    const char* text;
    const char* error;
  };
  const Case cases[] = {
      {"GPU-a,NVIDIA,100:;",
       "container 0 device 0 \"GPU-a,NVIDIA,100\": has 3 fields, expected UUID,Type,MemMiB,Cores"},
      {";GPU-a,NVIDIA,x,0:;",
       "container 1 device 0 \"GPU-a,NVIDIA,x,0\": memory \"x\" is not an integer"},
      {"GPU-a,NVIDIA,1,0:GPU-b,NVIDIA,1,-5:;",
       "container 0 device 1 \"GPU-b,NVIDIA,1,-5\": cores \"-5\""},
      {",NVIDIA,1,0:;", "uuid is empty"},
      {"GPU-a,,1,0:;", "type is empty"},
      {"GPU-a,NVIDIA,99999999999,0:;", "memory \"99999999999\" is not an integer in 0..2147483647"},
  };
  for (const auto& c : cases) {
    auto got = DecodePodDevices(c.text);
    ASSERT_FALSE(got.ok()) << c.text;
    EXPECT_TRUE(Contains(got.status(), c.error)) << c.text << " -> " << got.status();
  }
  PodAllocation bad;
  bad.containers = {{CD("GPU;a", 1, 1)}};
  EXPECT_TRUE(Contains(EncodePodDevices(bad).status(), "holds ',', ':' or ';'"));
  bad.containers = {{CD(" GPU-a", 1, 1)}};  // would decode as "GPU-a"
  EXPECT_FALSE(EncodePodDevices(bad).ok());
  bad.containers = {{CD("GPU-a", -1, 1)}};
  EXPECT_FALSE(EncodePodDevices(bad).ok());
}

ContainerDevice Cambricon(ContainerDevice d) {
  d.vendor = "Cambricon";
  return d;
}

// Upstream's pkg/device/devices_test.go, case by case. Upstream's ContainerDevices codec is our
// DecodePodDevices of a single container (text without ';'); each row is named after upstream's.
TEST(CodecUpstream, TestDecodeContainerDevices) {
  struct Case {
    const char* name;
    const char* text;
    bool ok;
    std::vector<ContainerDevice> want;
  };
  const Case cases[] = {
      {"empty string returns empty ContainerDevices", "", true, {}},
      {"trailing delimiters only returns empty ContainerDevices", ":::", true, {}},
      {"valid single device",
       "GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76,NVIDIA,500,3:",
       true,
       {CD("GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76", 500, 3)}},
      {"valid single device with zero resources",
       "GPU-zero,NVIDIA,0,0:",
       true,
       {CD("GPU-zero", 0, 0)}},
      {"multiple valid devices",
       "GPU-1,NVIDIA,1000,10:GPU-2,Cambricon,2000,20:",
       true,
       {CD("GPU-1", 1000, 10), Cambricon(CD("GPU-2", 2000, 20))}},
      {"existing valid fields preserved with extra optional fields",
       "GPU-1,NVIDIA,1000,10,extra1,extra2:",
       true,
       {CD("GPU-1", 1000, 10)}},
      {"malformed segment without comma", "garbage", false, {}},
      {"malformed segment without comma and with delimiter", "garbage:", false, {}},
      {"missing required fields (only 2 fields)", "GPU-1,NVIDIA:", false, {}},
      {"missing required fields (only 3 fields)", "GPU-1,NVIDIA,1000:", false, {}},
      {"empty device ID / UUID", ",NVIDIA,1000,10:", false, {}},
      {"empty device type", "GPU-1,,1000,10:", false, {}},
      {"negative memory value", "GPU-1,NVIDIA,-500,10:", false, {}},
      {"negative cores value", "GPU-1,NVIDIA,500,-1:", false, {}},
      {"invalid non-numeric memory", "GPU-1,NVIDIA,invalid,10:", false, {}},
      {"invalid non-numeric core", "GPU-1,NVIDIA,500,invalid:", false, {}},
      {"memory integer overflow", "GPU-1,NVIDIA,99999999999999999999999999,10:", false, {}},
      {"core integer overflow", "GPU-1,NVIDIA,500,99999999999999999999999999:", false, {}},
      {"valid device followed by malformed device fails entire decode",
       "GPU-1,NVIDIA,1000,10:malformed_segment:",
       false,
       {}},
      {"malformed device followed by valid device fails entire decode",
       "malformed_segment:GPU-1,NVIDIA,1000,10:",
       false,
       {}},
      {"valid device followed by negative resource fails entire decode",
       "GPU-1,NVIDIA,1000,10:GPU-2,NVIDIA,-100,10:",
       false,
       {}},
      {"negative resource followed by valid device fails entire decode",
       "GPU-1,NVIDIA,1000,-5:GPU-2,NVIDIA,1000,10:",
       false,
       {}},
      // TestResourceAccounting_NegativeDecodedProtection
      {"TestResourceAccounting_NegativeDecodedProtection", "GPU-1,NVIDIA,-1000,-10:", false, {}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto got = DecodePodDevices(c.text);
    ASSERT_EQ(got.ok(), c.ok) << c.text << " -> " << got.status();
    if (!c.ok) continue;
    // One container at most: the text has no ';'.
    ASSERT_LE(got->containers.size(), 1u);
    const std::vector<ContainerDevice> devices =
        got->containers.empty() ? std::vector<ContainerDevice>{} : got->containers[0];
    EXPECT_EQ(devices, c.want);
    for (const auto& d : devices) EXPECT_EQ(d.index, -1);  // TestDecodeContainerDevices_IdxNot...
  }
}

// TestEmptyPodDeviceCoding, TestPodDevicesCoding, Test_DecodePodDevices,
// TestDecodePodDevices_BadAnnotation. Upstream's decode leaves an extra empty container after the
// final ';'; ours does not (the encoded text is the same, so the annotations read the same).
TEST(CodecUpstream, TestPodDevicesCoding) {
  using Containers = std::vector<std::vector<ContainerDevice>>;
  struct Case {
    const char* name;
    Containers containers;
    const char* text;
  };
  const Case cases[] = {
      {"TestEmptyPodDeviceCoding", {}, ""},
      {"one pod one container use zero device", {{}}, ";"},
      {"one pod one container use one device", {{CD("UUID1", 1000, 30)}}, "UUID1,NVIDIA,1000,30:;"},
      {"one pod two container, every container use one device",
       {{CD("UUID1", 1000, 30)}, {CD("UUID1", 1000, 30)}},
       "UUID1,NVIDIA,1000,30:;UUID1,NVIDIA,1000,30:;"},
      {"one pod one container use two devices",
       {{CD("UUID1", 1000, 30), CD("UUID2", 1000, 30)}},
       "UUID1,NVIDIA,1000,30:UUID2,NVIDIA,1000,30:;"},
      {"Test_DecodePodDevices/annos having two device",
       {{CD("GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76", 500, 3)},
        {CD("GPU-ebe7c3f7-303d-558d-435e-99a160631fe4", 500, 3)}},
       "GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76,NVIDIA,500,3:;GPU-ebe7c3f7-303d-558d-435e-"
       "99a160631fe4,NVIDIA,500,3:;"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    PodAllocation alloc;
    alloc.containers = c.containers;
    auto enc = EncodePodDevices(alloc);
    ASSERT_TRUE(enc.ok()) << enc.status();
    EXPECT_EQ(*enc, c.text);
    auto back = DecodePodDevices(*enc);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->containers, c.containers);
  }
  const char* bad[] = {
      "uuid,type,100:;",                             // missing required fields (only 3 fields)
      "malformed_annotation:;",                      // malformed non-empty segment without comma
      "GPU-1,NVIDIA,-500,10:;",                      // negative memory in first container
      "GPU-1,NVIDIA,500,10:;GPU-2,NVIDIA,500,-1:;",  // negative cores in second container
      ",NVIDIA,500,10:;",                            // empty UUID
      "GPU-1,,500,10:;",                             // empty type
  };
  for (const char* text : bad) EXPECT_FALSE(DecodePodDevices(text).ok()) << text;
}

// Test_DecodeNodeDevices (the legacy CSV registration) and Test_EncodeNodeDevices.
TEST(CodecUpstream, Test_DecodeNodeDevices) {
  struct Case {
    const char* name;
    const char* text;
    bool ok;
    size_t devices;
  };
  const Case cases[] = {
      // Upstream: an error ("missing device separator"); ours: no devices. Either way the node
      // registers nothing.
      {"args is empty", "", true, 0},
      {"args is only delimiter", ":", true, 0},
      {"args is multiple delimiters", "::", true, 0},
      {"args missing delimiter with comma", ",", false, 0},
      {"args has comma and delimiter but empty fields", ",:", false, 0},
      {"args is invalid format missing split symbol", "a", false, 0},
      {"str is old format",
       "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4,10,7680,100,NVIDIA-Tesla P4,0,true:", true, 1},
      {"str is new format",
       "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4,10,7680,100,NVIDIA-Tesla P4,0,true,1,hami-core:",
       true, 1},
      {"malformed segment without comma", "garbage:", false, 0},
      {"invalid count field", "GPU-e,notanint,7680,100,NVIDIA-Tesla P4,0,true:", false, 0},
      {"invalid memory field", "GPU-e,10,notanint,100,NVIDIA-Tesla P4,0,true:", false, 0},
      {"invalid core field", "GPU-e,10,7680,notanint,NVIDIA-Tesla P4,0,true:", false, 0},
      {"invalid numa field", "GPU-e,10,7680,100,NVIDIA-Tesla P4,notanint,true:", false, 0},
      {"invalid health field", "GPU-e,10,7680,100,NVIDIA-Tesla P4,0,notabool:", false, 0},
      {"unexpected field count", "GPU-e,10,7680,100,NVIDIA-Tesla P4:", false, 0},
      {"invalid index field in new format",
       "GPU-e,10,7680,100,NVIDIA-Tesla P4,0,true,notanint,hami-core:", false, 0},
      {"negative index field in new format",
       "GPU-e,10,7680,100,NVIDIA-Tesla P4,0,true,-1,hami-core:", false, 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto got = DecodeNodeDevices(c.text);
    ASSERT_EQ(got.ok(), c.ok) << c.text << " -> " << got.status();
    if (c.ok) {
      EXPECT_EQ(got->size(), c.devices);
    }
  }
  auto oldf = DecodeNodeDevices(cases[6].text);
  ASSERT_TRUE(oldf.ok());
  const DeviceInfo& d = (*oldf)[0];
  EXPECT_EQ(d.uuid, "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4");
  EXPECT_EQ(d.index, 0);
  EXPECT_EQ(d.count, 10);
  EXPECT_EQ(d.devmem_mib, 7680);
  EXPECT_EQ(d.devcore, 100);
  EXPECT_EQ(d.type, "NVIDIA-Tesla P4");
  EXPECT_TRUE(d.health);
  EXPECT_EQ((*DecodeNodeDevices(cases[7].text))[0].index, 1);
  // Test_EncodeNodeDevices: "old format" (index 0) and "test two" (index 1) encode to 9 fields.
  DeviceInfo e = d;
  e.mode = "hami-core";
  EXPECT_EQ(
      *EncodeNodeDevicesCsv({e}),
      "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4,10,7680,100,NVIDIA-Tesla P4,0,true,0,hami-core:");
  e.index = 1;
  EXPECT_EQ(
      *EncodeNodeDevicesCsv({e}),
      "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4,10,7680,100,NVIDIA-Tesla P4,0,true,1,hami-core:");
}

// TestMarshalNodeDevices / TestUnMarshalNodeDevices (the JSON registration).
TEST(CodecUpstream, TestUnMarshalNodeDevices) {
  auto two = DecodeNodeDevices(
      R"([{"index":1,"id":"id-1","count":1,"devmem":1024,"devcore":10,"type":"type","health":true},)"
      R"({"index":2,"id":"id-2","count":2,"devmem":4096,"devcore":20,"type":"type2","health":false}])");
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].index, 1);
  EXPECT_EQ((*two)[0].devcore, 10);
  EXPECT_TRUE((*two)[0].health);
  EXPECT_EQ((*two)[1].devmem_mib, 4096);
  EXPECT_EQ((*two)[1].numa, 0);
  EXPECT_FALSE((*two)[1].health);
  auto again = DecodeNodeDevices(EncodeNodeDevicesJson(*two));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *two);
  EXPECT_EQ(EncodeNodeDevicesJson({}), "[]");  // "test empty"
  EXPECT_TRUE(DecodeNodeDevices("[]")->empty());
  // TestGetNodeDevices_InvalidJSON (pkg/device/nvidia)
  EXPECT_FALSE(DecodeNodeDevices("not-valid-json").ok());
  // TestDecodeNodeDevices (pair scores) and TestGetNodeDevices_InvalidPairScores
  EXPECT_TRUE(
      DecodeLinkScores(R"([{"uuid":"GPU-0","score":{"GPU-1":50,"GPU-2":20,"GPU-3":20}}])").ok());
  EXPECT_FALSE(DecodeLinkScores("not-valid-json").ok());
}

TEST(HandshakeTest, RequestingRoundTrip) {
  const Handshake h{kHandshakeRequesting, 1796010860};
  EXPECT_EQ(EncodeHandshake(h), "Requesting_2026-11-30 03:54:20");
  auto back = DecodeHandshake("Requesting_2026-11-30 03:54:20");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, h);
  // Years below 1000 keep four digits (found by the fuzz target).
  auto early = DecodeHandshake("Requesting_0026-11-30 03:54:20");
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_EQ(EncodeHandshake(*early), "Requesting_0026-11-30 03:54:20");
  auto deleted = DecodeHandshake("Deleted_2024-01-02 03:04:05");
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->state, "Deleted");
  struct Case {
    const char* text;
    const char* error;
  };
  const Case cases[] = {
      {"Requesting", "expected \"<State>_<YYYY-MM-DD HH:MM:SS>\""},
      {"_2026-11-30 03:54:20", "is not a word"},
      {"Requesting_2026-11-30T03:54:20", "is not \"YYYY-MM-DD HH:MM:SS\""},
      {"Requesting_2026-13-30 03:54:20", "is not \"YYYY-MM-DD HH:MM:SS\""},
      {"Requesting_2026-1-30 03:54:200", "is not \"YYYY-MM-DD HH:MM:SS\""},
  };
  for (const auto& c : cases) {
    auto got = DecodeHandshake(c.text);
    ASSERT_FALSE(got.ok()) << c.text;
    EXPECT_TRUE(Contains(got.status(), c.error)) << c.text << " -> " << got.status();
  }
}

TEST(TextUtilTest, Utf8Validation) {
  struct Case {
    const char* text;
    bool valid;
  };
  const Case cases[] = {
      {"", true},
      {"GPU-a", true},
      {"\xc3\xa9", true},
      {"\xe2\x82\xac", true},
      {"\xf0\x9f\x98\x80", true},
      {"\xff", false},
      {"\xc3", false},
      {"\xc0\x80", false},
      {"\xed\xa0\x80", false},
      {"\xf4\x90\x80\x80", false},
      {"a\x80", false},
  };
  for (const auto& c : cases) EXPECT_EQ(text::IsValidUtf8(c.text), c.valid) << c.text;
}

}  // namespace
}  // namespace hami::core
