#include "dra/driver.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <thread>

#include "dra/testing/builders.h"

namespace hami::dra {
namespace {

namespace fs = std::filesystem;
using testing::MakeClaim;
using testing::MapClaims;
using testing::TempDir;

class DriverTest : public ::testing::Test {
 protected:
  DriverOptions Options(const std::string& boot = "boot-1") {
    DriverOptions o;
    o.node_name = testing::kNode;
    o.plugin_dir = dir_.path() + "/plugin";
    o.cdi_root = dir_.path() + "/cdi";
    o.boot_id = boot;
    o.vgpu.region_root = dir_.path() + "/regions";
    o.vgpu.libvgpu_host_path = dir_.path() + "/libvgpu.so";
    return o;
  }
  std::unique_ptr<Driver> Start(const std::string& boot = "boot-1") {
    auto d = Driver::Create(Options(boot), {{"gpu-0", "GPU-0", 0, 16384, 100}}, &claims_);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *std::move(d) : nullptr;
  }
  // A 4 GiB / 30-core claim on the one GPU.
  ClaimRef Put(const std::string& name) {
    claims_.Put(MakeClaim("ns", name, "uid-" + name).Result("gpu", "gpu-0", "4Gi", "30").Json());
    return {"ns", name, "uid-" + name};
  }
  size_t Files(const std::string& sub) {
    std::error_code ec;
    if (!fs::exists(dir_.path() + sub)) return 0;
    return std::distance(fs::directory_iterator(dir_.path() + sub), fs::directory_iterator());
  }
  std::string Spec(const std::string& uid) {
    return dir_.path() + "/cdi/k8s.hami-core-gpu.project-hami.io-claim_" + uid + ".json";
  }

  TempDir dir_;
  MapClaims claims_;
};

TEST_F(DriverTest, SharesOneGpuUntilFullAndRefusesWithoutSideEffects) {
  auto d = Start();
  struct Step {
    const char* claim;
    bool ok;
    int used_mib;
  };
  const Step steps[] = {{"a", true, 4096},
                        {"b", true, 8192},
                        {"c", true, 12288},
                        {"d", false, 12288}};  // cores 120 > 100
  for (const auto& s : steps) {
    const ClaimRef ref = Put(s.claim);
    auto r = d->Prepare({ref});
    EXPECT_EQ(r[ref.uid].status.ok(), s.ok) << s.claim << ": " << r[ref.uid].status;
    EXPECT_EQ(d->Used("gpu-0").memory_mib, s.used_mib) << s.claim;
    EXPECT_EQ(fs::exists(Spec(ref.uid)), s.ok) << s.claim;
  }
  EXPECT_EQ(Files("/cdi"), 3u);
  EXPECT_EQ(Files("/regions"), 6u);  // a directory and a limits file per claim
  auto r = d->Prepare({{"ns", "a", "uid-a"}});
  ASSERT_EQ(r["uid-a"].devices.size(), 1u);
  const PreparedDevice& dev = r["uid-a"].devices[0];
  EXPECT_EQ(dev.pool, "node-a");
  EXPECT_EQ(dev.device, "gpu-0");
  EXPECT_EQ(dev.request_names, std::vector<std::string>{"gpu"});
  EXPECT_EQ(dev.cdi_device_ids,
            std::vector<std::string>{"k8s.hami-core-gpu.project-hami.io/claim=uid-a"});
  EXPECT_EQ(dev.share_id, "share-1");
}

TEST_F(DriverTest, PrepareIsIdempotentAndUnprepareRemovesEverything) {
  auto d = Start();
  const ClaimRef a = Put("a");
  ASSERT_TRUE(d->Prepare({a})[a.uid].status.ok());
  const int gets = claims_.gets();
  ASSERT_TRUE(d->Prepare({a})[a.uid].status.ok());
  EXPECT_EQ(claims_.gets(), gets) << "a prepared claim is answered from the checkpoint";
  EXPECT_EQ(d->Used("gpu-0").memory_mib, 4096) << "booked twice";
  EXPECT_TRUE(d->Unprepare({a})[a.uid].ok());
  EXPECT_TRUE(d->Unprepare({a})[a.uid].ok()) << "unknown claim is success";
  EXPECT_EQ(Files("/cdi"), 0u);
  EXPECT_EQ(Files("/regions"), 0u);
  EXPECT_EQ(d->Used("gpu-0"), Usage{});
}

TEST_F(DriverTest, RestartThenUnprepareAClaimThatIsGone) {
  ClaimRef a, b;
  {
    auto d = Start();
    a = Put("a");
    b = Put("b");
    ASSERT_TRUE(d->Prepare({a, b})[b.uid].status.ok());
  }
  claims_.Delete("ns", "a");
  auto d = Start();
  EXPECT_EQ(d->Used("gpu-0").memory_mib, 8192) << "ledger rebuilt from the checkpoint";
  EXPECT_EQ(d->Prepare({a})[a.uid].devices.size(), 1u) << "answered from the checkpoint";
  EXPECT_TRUE(d->Unprepare({a})[a.uid].ok());
  EXPECT_FALSE(fs::exists(Spec(a.uid)));
  EXPECT_TRUE(fs::exists(Spec(b.uid)));
  EXPECT_EQ(d->Used("gpu-0").memory_mib, 4096);
}

TEST_F(DriverTest, AnotherBootForgetsEverything) {
  {
    auto d = Start("boot-1");
    ASSERT_TRUE(d->Prepare({Put("a")})["uid-a"].status.ok());
  }
  auto d = Start("boot-2");
  EXPECT_EQ(d->Prepared(), 0u);
  EXPECT_EQ(d->Used("gpu-0"), Usage{});
  EXPECT_EQ(Files("/cdi"), 0u);
}

TEST_F(DriverTest, AClaimLeftStartedIsRolledBack) {
  {
    auto d = Start();
    ASSERT_TRUE(d->Prepare({Put("a")})["uid-a"].status.ok());
  }
  // The plugin died between the two phases: rewrite the checkpoint's state.
  const std::string cp_path = dir_.path() + "/plugin/checkpoint.json";
  auto cp = DecodeCheckpoint(*ReadWholeFile(cp_path));
  ASSERT_TRUE(cp.ok());
  cp->claims["uid-a"].state = PrepareState::kStarted;
  ASSERT_TRUE(WriteFileAtomic(cp_path, EncodeCheckpoint(*cp)).ok());
  auto d = Start();
  EXPECT_EQ(d->Prepared(), 0u);
  EXPECT_FALSE(fs::exists(Spec("uid-a")));
  EXPECT_TRUE(d->Prepare({{"ns", "a", "uid-a"}})["uid-a"].status.ok()) << "the retry prepares it";
}

TEST_F(DriverTest, RefusalsPerClaim) {
  auto d = Start();
  claims_.Put(
      MakeClaim("ns", "other", "uid-other").Result("g", "gpu-0", "1Gi", "1", "node-b").Json());
  claims_.Put(MakeClaim("ns", "none", "uid-none").Unallocated().Json());
  claims_.Put(MakeClaim("ns", "replaced", "uid-new").Result("g", "gpu-0", "1Gi", "1").Json());
  const ClaimRef good = Put("good");
  auto r = d->Prepare({{"ns", "other", "uid-other"},
                       {"ns", "none", "uid-none"},
                       {"ns", "replaced", "uid-old"},
                       {"ns", "missing", "uid-missing"},
                       good});
  ASSERT_EQ(r.size(), 5u);
  EXPECT_NE(r["uid-other"].status.message().find("pool 'node-b'"), std::string::npos);
  EXPECT_NE(r["uid-none"].status.message().find("not allocated"), std::string::npos);
  EXPECT_NE(r["uid-old"].status.message().find("replaced"), std::string::npos);
  EXPECT_TRUE(absl::IsNotFound(r["uid-missing"].status)) << r["uid-missing"].status;
  EXPECT_TRUE(r[good.uid].status.ok()) << "one claim's failure touches no other";
  EXPECT_EQ(Files("/cdi"), 1u);
}

// A pod whose containers use claims by object name ("ctr" -> claim names), each entry reserved.
nlohmann::json PodUsing(const std::string& name, const std::string& uid,
                        const std::vector<std::pair<std::string, std::vector<std::string>>>& ctrs) {
  nlohmann::json pod = {
      {"metadata", {{"namespace", "ns"}, {"name", name}, {"uid", uid}}},
      {"spec",
       {{"resourceClaims", nlohmann::json::array()}, {"containers", nlohmann::json::array()}}}};
  std::set<std::string> entries;
  for (const auto& [ctr, claims] : ctrs) {
    nlohmann::json refs = nlohmann::json::array();
    for (const auto& c : claims) {
      refs.push_back({{"name", "e-" + c}});
      if (entries.insert(c).second)
        pod["spec"]["resourceClaims"].push_back({{"name", "e-" + c}, {"resourceClaimName", c}});
    }
    pod["spec"]["containers"].push_back({{"name", ctr}, {"resources", {{"claims", refs}}}});
  }
  return pod;
}

TEST_F(DriverTest, ClaimsOneContainerUsesTogetherAreRefused) {
  // a, b: 4 GiB / 30 cores each on the one GPU; c likewise. Pod p: container "both" uses a and b,
  // container "alone" uses c. Pod q (another pod) uses a alone.
  auto reserve = [&](const std::string& name, const std::vector<std::string>& pods) {
    auto j = MakeClaim("ns", name, "uid-" + name).Result("gpu", "gpu-0", "4Gi", "30").Json();
    for (const auto& p : pods)
      j["status"]["reservedFor"].push_back(
          {{"resource", "pods"}, {"name", p}, {"uid", "uid-" + p}});
    claims_.Put(j);
    return ClaimRef{"ns", name, "uid-" + name};
  };
  const ClaimRef a = reserve("a", {"p", "q"}), b = reserve("b", {"p"}), c = reserve("c", {"p"});
  claims_.PutPod(PodUsing("p", "uid-p", {{"both", {"a", "b"}}, {"alone", {"c"}}}));
  claims_.PutPod(PodUsing("q", "uid-q", {{"main", {"a"}}}));
  auto d = Start();
  struct Case {
    const char* what;
    std::vector<ClaimRef> call;
    std::map<std::string, bool> ok;  // claim uid -> prepared
    int64_t used_mib;                // on gpu-0 after the call
  };
  const Case cases[] = {
      {"pod q's call: a alone is fine", {a}, {{a.uid, true}}, 4096},
      {"pod p's call: a and b share a container, c does not",
       {a, b, c},
       {{a.uid, false}, {b.uid, false}, {c.uid, true}},
       8192},
  };
  for (const auto& cs : cases) {
    auto r = d->Prepare(cs.call);
    for (const auto& [uid, ok] : cs.ok) {
      EXPECT_EQ(r[uid].status.ok(), ok) << cs.what << ": " << uid << ": " << r[uid].status;
      if (!ok) {
        EXPECT_NE(r[uid].status.message().find("container both uses claims a, b"),
                  std::string::npos)
            << r[uid].status;
      }
    }
    EXPECT_EQ(d->Used("gpu-0").memory_mib, cs.used_mib) << cs.what;
  }
  EXPECT_TRUE(fs::exists(Spec(a.uid))) << "pod q's preparation of a is left as it was";
  EXPECT_FALSE(fs::exists(Spec(b.uid))) << "a refused claim writes nothing";
  // Once the pod uses a and b in different containers, the same call prepares all three.
  claims_.PutPod(PodUsing("p", "uid-p", {{"one", {"a"}}, {"two", {"b"}}, {"alone", {"c"}}}));
  auto r = d->Prepare({a, b, c});
  for (const auto& ref : {a, b, c}) EXPECT_TRUE(r[ref.uid].status.ok()) << r[ref.uid].status;
  EXPECT_EQ(d->Used("gpu-0").memory_mib, 12288);
  // A pod replaced under the same name (another uid) is not the pod the claims are reserved for.
  auto d2 = Driver::Create(Options("boot-2"), {{"gpu-0", "GPU-0", 0, 16384, 100}}, &claims_);
  ASSERT_TRUE(d2.ok());
  claims_.PutPod(PodUsing("p", "uid-p2", {{"both", {"a", "b"}}}));
  r = (*d2)->Prepare({a, b});
  EXPECT_TRUE(r[a.uid].status.ok() && r[b.uid].status.ok()) << r[a.uid].status;
}

TEST_F(DriverTest, ConcurrentPrepareAndUnprepareStayConsistent) {
  auto d = Start();
  std::vector<ClaimRef> refs;
  for (int i = 0; i < 50; ++i) refs.push_back(Put(StrCat("c", i)));
  std::vector<std::thread> threads;
  std::atomic<int> prepared{0};
  for (int i = 0; i < 50; ++i) {
    threads.emplace_back([&, i] {
      if (d->Prepare({refs[i]})[refs[i].uid].status.ok()) ++prepared;
      if (i % 2 == 0) (void)d->Unprepare({refs[i]});
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_GE(prepared.load(), 3);
  // Whatever interleaving: the ledger, the checkpoint and the files agree, and never over 100%.
  const Usage used = d->Used("gpu-0");
  EXPECT_LE(used.cores, 100);
  EXPECT_EQ(used.memory_mib, static_cast<int64_t>(d->Prepared()) * 4096);
  EXPECT_EQ(Files("/cdi"), d->Prepared());
  auto restarted = Start();
  EXPECT_EQ(restarted->Used("gpu-0"), used);
}

}  // namespace
}  // namespace hami::dra
