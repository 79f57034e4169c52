// Informers against the fake API server: initial sync, incremental events, selectors, resync, and
// convergence after dropped watches, 410s, compaction and 5xx bursts.
#include "k8s/informer.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <regex>
#include <set>

#include "k8s/testing/fake_apiserver.h"
#include "k8s/testing/test_util.h"

namespace hami::k8s {
namespace {

using testing::Eventually;
using testing::FakeApiServer;
using testing::MakeNode;
using testing::MakePod;

// Rebuilds the collection from handler calls only, as the scheduler cache does.
struct Mirror {
  std::mutex mu;
  std::map<std::string, std::string> objects;  // key -> resourceVersion
  int adds = 0, updates = 0, deletes = 0, resyncs = 0;
  InformerHandlers Handlers() {
    InformerHandlers h;
    h.on_add = [this](const Json& o) {
      std::lock_guard<std::mutex> l(mu);
      ++adds;
      objects[Informer::KeyOf(o)] = o["metadata"]["resourceVersion"];
    };
    h.on_update = [this](const Json& old_obj, const Json& o) {
      std::lock_guard<std::mutex> l(mu);
      ++updates;
      if (old_obj == o) ++resyncs;
      objects[Informer::KeyOf(o)] = o["metadata"]["resourceVersion"];
    };
    h.on_delete = [this](const Json& o) {
      std::lock_guard<std::mutex> l(mu);
      ++deletes;
      objects.erase(Informer::KeyOf(o));
    };
    return h;
  }
  std::map<std::string, std::string> Snapshot() {
    std::lock_guard<std::mutex> l(mu);
    return objects;
  }
};

std::map<std::string, std::string> Truth(FakeApiServer& fake, const std::string& plural,
                                         const std::string& node = "") {
  std::map<std::string, std::string> out;
  for (const auto& o : fake.List(plural)) {
    if (!node.empty() && o["spec"].value("nodeName", "") != node) continue;
    out[Informer::KeyOf(o)] = o["metadata"]["resourceVersion"];
  }
  return out;
}

class InformerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::FakeApiServerOptions o;
    o.bookmark_interval = std::chrono::milliseconds(50);
    fake_ = std::make_unique<FakeApiServer>(o);
    ASSERT_TRUE(fake_->Start().ok());
    ClientConfig cfg;
    cfg.server = fake_->url();
    cfg.qps = 0;
    ClientOptions co;
    co.retry_backoff.initial_ns = 1'000'000;
    co.retry_backoff.max_ns = 20'000'000;
    auto c = Client::Create(cfg, co);
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
  }
  InformerOptions FastOptions(const Resource& r) {
    InformerOptions o;
    o.resource = r;
    o.backoff = {1'000'000, 50'000'000, 2.0, 0.2};
    o.relist_backoff = {1'000'000, 50'000'000, 2.0, 0.2};
    return o;
  }
  // Options whose waits between list rounds only move `clock` (and are recorded in `waits`), so
  // the rounds run as fast as the fake server answers while their rate is measured in fake time.
  InformerOptions FakeTimeOptions(FakeClock* clock, std::vector<int64_t>* waits,
                                  std::mutex* waits_mu) {
    InformerOptions o = FastOptions(kPods);
    o.relist_backoff = InformerOptions{}.relist_backoff;  // the production schedule
    o.backoff = {1, 1, 1.0, 0};                           // watch failures: none expected
    o.clock = clock;
    o.sleep = [clock, waits, waits_mu](int64_t ns) {
      std::lock_guard<std::mutex> l(*waits_mu);
      waits->push_back(ns);
      clock->AdvanceNanos(ns);
    };
    return o;
  }
  // The list requests (not watches) the fake server has answered.
  int64_t ListRequests(const std::string& path = "/api/v1/pods$") {
    int64_t n = 0;
    for (const auto& r : fake_->Requests())
      if (r.method == "GET" && std::regex_search(r.path, std::regex(path)) &&
          r.query.find("watch=") == std::string::npos)
        ++n;
    return n;
  }
  std::unique_ptr<FakeApiServer> fake_;
  std::unique_ptr<Client> client_;
};

TEST_F(InformerTest, SyncsThenFollowsEvents) {
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(fake_->Upsert("nodes", MakeNode("n" + std::to_string(i))).ok());
  Informer inf(*client_, FastOptions(kNodes));
  Mirror m;
  inf.AddHandlers(m.Handlers());
  EXPECT_FALSE(inf.HasSynced());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(20)));
  EXPECT_EQ(inf.Size(), 5u);
  EXPECT_EQ(m.Snapshot(), Truth(*fake_, "nodes"));

  ASSERT_TRUE(fake_->Upsert("nodes", MakeNode("n9")).ok());
  ASSERT_TRUE(client_
                  ->Patch(kNodes, "", "n0", PatchType::kMerge,
                          {{"metadata", {{"labels", {{"gpu", "a100"}}}}}})
                  .ok());
  ASSERT_TRUE(fake_->Delete("nodes", "", "n1").ok());
  ASSERT_TRUE(Eventually([&] { return m.Snapshot() == Truth(*fake_, "nodes"); }));
  EXPECT_EQ(inf.Get("n0")->at("metadata").at("labels").at("gpu"), "a100");
  EXPECT_FALSE(inf.Get("n1").has_value());
  {
    std::lock_guard<std::mutex> l(m.mu);
    EXPECT_EQ(m.deletes, 1);
  }
  EXPECT_EQ(inf.lists(), 1);
  // Bookmarks move the resourceVersion forward.
  ASSERT_TRUE(
      Eventually([&] { return inf.LastResourceVersion() == fake_->CurrentResourceVersion(); }));
  inf.Stop();
  inf.Stop();  // idempotent
}

TEST_F(InformerTest, FieldSelectorTracksPodsOfOneNode) {
  ASSERT_TRUE(fake_->Upsert("pods", MakePod("a", "on-node", "node-1")).ok());
  ASSERT_TRUE(fake_->Upsert("pods", MakePod("a", "elsewhere", "node-2")).ok());
  ASSERT_TRUE(fake_->Upsert("pods", MakePod("b", "pending")).ok());
  InformerOptions o = FastOptions(kPods);
  o.field_selector = "spec.nodeName=node-1";
  Informer inf(*client_, o);
  Mirror m;
  inf.AddHandlers(m.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(20)));
  EXPECT_EQ(m.Snapshot(), Truth(*fake_, "pods", "node-1"));
  ASSERT_TRUE(client_->Bind("b", "pending", "", "node-1").ok());
  ASSERT_TRUE(Eventually([&] { return inf.Get("b/pending").has_value(); }));
  EXPECT_EQ(m.Snapshot(), Truth(*fake_, "pods", "node-1"));
  EXPECT_FALSE(inf.Get("a/elsewhere").has_value());
}

TEST_F(InformerTest, ConvergesAfterFaults) {
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(fake_->Upsert("pods", MakePod("ns", "p" + std::to_string(i))).ok());
  Informer inf(*client_, FastOptions(kPods));
  Mirror m;
  inf.AddHandlers(m.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(20)));

  struct Fault {
    std::string name;
    std::function<void()> inject;
  };
  int next = 100;
  auto churn = [&] {
    for (int i = 0; i < 5; ++i)
      ASSERT_TRUE(fake_->Upsert("pods", MakePod("ns", "p" + std::to_string(next++))).ok());
    auto all = fake_->List("pods");
    ASSERT_TRUE(fake_->Delete("pods", "ns", all.front()["metadata"]["name"]).ok());
    auto changed = all.back();
    changed["metadata"]["labels"]["v"] = std::to_string(next);
    ASSERT_TRUE(fake_->Upsert("pods", changed).ok());
  };
  std::vector<Fault> faults = {
      {"dropped watch",
       [&] {
         fake_->DropWatches();
         churn();
       }},
      {"compaction while disconnected",
       [&] {
         fake_->InjectErrors("GET", "/api/v1/pods$", 503, 3);  // the re-watch fails a few times
         fake_->DropWatches();
         churn();
         fake_->Compact();  // our resourceVersion is now too old: 410, re-list
       }},
      {"forced 410",
       [&] {
         fake_->ForceGone(2);
         fake_->DropWatches();
         churn();
       }},
      {"5xx burst on list",
       [&] {
         fake_->ForceGone(1);
         fake_->InjectErrors("GET", "/api/v1/pods$", 500, 20);
         fake_->DropWatches();
         churn();
       }},
      {"events while watching",
       [&] {
         churn();
         churn();
       }},
  };
  for (const auto& f : faults) {
    SCOPED_TRACE(f.name);
    f.inject();
    ASSERT_TRUE(Eventually([&] {
      auto truth = Truth(*fake_, "pods");
      return m.Snapshot() == truth && inf.Size() == truth.size();
    })) << "mirror "
        << m.Snapshot().size() << " vs truth " << Truth(*fake_, "pods").size();
  }
  EXPECT_GE(inf.lists(), 3);  // initial + the 410s
  EXPECT_GE(inf.watches(), 5);
}

// An API server (or proxy) that answers every watch with 410 Expired gets a list at a falling
// rate, as from client-go's reflector (0.8 s doubling to 30 s, jittered), not a list storm: within
// 60 s of fake time at most 10 lists, whatever the seed; the waits are jittered, capped and the
// same for the same seed.
TEST_F(InformerTest, RelistsBackOffWhenEveryWatchExpires) {
  ASSERT_TRUE(fake_->Upsert("pods", MakePod("default", "p0")).ok());
  fake_->ForceGone(1'000'000);
  const InformerOptions defaults;
  std::map<uint64_t, std::vector<int64_t>> by_seed;
  for (uint64_t seed : {1, 2, 3, 1}) {
    SCOPED_TRACE(seed);
    FakeClock clock;
    std::vector<int64_t> waits;
    std::mutex waits_mu;
    InformerOptions o = FakeTimeOptions(&clock, &waits, &waits_mu);
    o.seed = seed;
    Informer inf(*client_, o);
    inf.Start();
    // Until 60 s of fake time have passed, or far more lists than a backoff allows.
    ASSERT_TRUE(
        Eventually([&] { return clock.MonotonicNanos() >= 60'000'000'000 || inf.lists() >= 50; }));
    inf.Stop();
    std::lock_guard<std::mutex> l(waits_mu);
    for (int64_t w : waits) {
      EXPECT_GE(w, defaults.relist_backoff.initial_ns / 2);
      EXPECT_LE(w, defaults.relist_backoff.max_ns);
    }
    // List k (from 0) starts after the first k waits.
    int64_t t = 0, in_window = 0;
    for (int64_t k = 0; k < inf.lists(); ++k) {
      if (k > 0 && static_cast<size_t>(k - 1) < waits.size()) t += waits[k - 1];
      if (t < 60'000'000'000) ++in_window;
    }
    std::printf("seed %llu: %lld lists in the first 60 s of fake time\n",
                static_cast<unsigned long long>(seed), static_cast<long long>(in_window));
    EXPECT_GE(in_window, 3);
    EXPECT_LE(in_window, 10) << inf.lists() << " lists, " << waits.size() << " waits";
    if (by_seed.count(seed)) {
      const std::vector<int64_t>& before = by_seed[seed];
      const size_t n = std::min(before.size(), waits.size());
      EXPECT_EQ(std::vector<int64_t>(before.begin(), before.begin() + n),
                std::vector<int64_t>(waits.begin(), waits.begin() + n));
    }
    by_seed[seed] = waits;
  }
  EXPECT_NE(by_seed[1], by_seed[2]);  // jittered
}

// The wait between list rounds grows while rounds follow each other and starts over once a round
// lasted longer than relist_backoff_reset_ns (its watch was healthy that long).
TEST_F(InformerTest, RelistBackoffResetsAfterAHealthyWatch) {
  ASSERT_TRUE(fake_->Upsert("pods", MakePod("default", "p0")).ok());
  FakeClock clock;
  std::vector<int64_t> waits;
  std::mutex waits_mu;
  InformerOptions o = FakeTimeOptions(&clock, &waits, &waits_mu);
  o.relist_backoff.jitter = 0;
  o.watch_timeout_seconds = 1;
  fake_->ForceGone(3);
  Informer inf(*client_, o);
  inf.Start();
  ASSERT_TRUE(Eventually([&] { return inf.lists() == 4; }));
  clock.AdvanceNanos(o.relist_backoff_reset_ns);  // the fourth round's watch is healthy that long
  fake_->ForceGone(1);
  ASSERT_TRUE(Eventually([&] { return inf.lists() == 5; }));
  inf.Stop();
  std::lock_guard<std::mutex> l(waits_mu);
  EXPECT_EQ(waits, (std::vector<int64_t>{800'000'000, 1'600'000'000, 3'200'000'000, 800'000'000}));
}

// Lists go in pages of page_size; a continue token the server has expired (410) restarts the
// list, and the store ends up whole either way.
TEST_F(InformerTest, ListsInPagesAndRestartsOnAnExpiredContinue) {
  for (int i = 0; i < 25; ++i)
    ASSERT_TRUE(fake_->Upsert("pods", MakePod("default", "p" + std::to_string(i))).ok());
  struct Case {
    const char* name;
    int expired;            // continue tokens the server refuses
    int64_t list_requests;  // pages asked for
  };
  const Case cases[] = {
      {"no expiry", 0, 3},                // 10 + 10 + 5
      {"second page expired", 1, 2 + 3},  // page 1, page 2 refused, then 3 pages
      {"expired twice", 2, 2 + 2 + 3},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const int64_t before = ListRequests();
    fake_->ExpireContinueTokens(c.expired);
    InformerOptions o = FastOptions(kPods);
    o.page_size = 10;
    Informer inf(*client_, o);
    Mirror m;
    inf.AddHandlers(m.Handlers());
    inf.Start();
    ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(20)));
    EXPECT_EQ(inf.Size(), 25u);
    EXPECT_EQ(m.Snapshot(), Truth(*fake_, "pods"));
    EXPECT_EQ(m.adds, 25) << "a restarted list delivers each object once";
    inf.Stop();
    EXPECT_EQ(ListRequests() - before, c.list_requests);
    EXPECT_EQ(inf.lists(), 1);
  }
  for (const auto& r : fake_->Requests()) {
    if (r.query.find("watch=") == std::string::npos && r.path == "/api/v1/pods") {
      EXPECT_NE(r.query.find("limit=10"), std::string::npos) << r.query;
    }
  }
}

// The transform runs on every object, listed or watched, before it is stored or handed on.
TEST_F(InformerTest, TransformTrimsListedAndWatchedObjects) {
  auto fat = [](const std::string& name) {
    Json p = MakePod("default", name);
    p["metadata"]["managedFields"] = Json::array({{{"manager", "kubectl"}}});
    return p;
  };
  ASSERT_TRUE(fake_->Upsert("pods", fat("listed")).ok());
  InformerOptions o = FastOptions(kPods);
  o.transform = [](Json& obj) { obj["metadata"].erase("managedFields"); };
  Informer inf(*client_, o);
  std::mutex mu;
  std::vector<Json> seen;
  InformerHandlers h;
  h.on_add = [&](const Json& obj) {
    std::lock_guard<std::mutex> l(mu);
    seen.push_back(obj);
  };
  inf.AddHandlers(h);
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(20)));
  ASSERT_TRUE(fake_->Upsert("pods", fat("watched")).ok());
  ASSERT_TRUE(Eventually([&] { return inf.Size() == 2; }));
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> l(mu);
    return seen.size() == 2;
  }));
  for (const char* key : {"default/listed", "default/watched"}) {
    SCOPED_TRACE(key);
    ASSERT_TRUE(inf.Get(key).has_value());
    EXPECT_FALSE(inf.Get(key)->at("metadata").contains("managedFields"));
    EXPECT_TRUE(inf.Get(key)->at("metadata").contains("resourceVersion"));
  }
  std::lock_guard<std::mutex> l(mu);
  for (const Json& obj : seen) EXPECT_FALSE(obj["metadata"].contains("managedFields"));
}

// A pod of the shape the scheduler keeps once trimmed: identity, labels, the decision
// annotations, an owner, one container's resources, the phase.
Json TrimmedPod(int i) {
  Json p = MakePod("ns-" + std::to_string(i % 50), "run-" + std::to_string(i), "node-7",
                   {{"app", "app-" + std::to_string(i % 500)}});
  p["metadata"]["uid"] = "5f2b9c1e-3a4d-4e8f-9b1c-" + std::to_string(100000000000 + i);
  p["metadata"]["creationTimestamp"] = "2026-12-03T10:00:00Z";
  p["metadata"]["ownerReferences"] = Json::array({{{"kind", "ReplicaSet"}, {"controller", true}}});
  p["metadata"]["annotations"] = {
      {"hami.io/vgpu-node", "node-7"},
      {"hami.io/bind-phase", "success"},
      {"hami.io/vgpu-devices-allocated", "node-7-gpu3,NVIDIA,10240,0:;"}};
  p["spec"]["schedulerName"] = "hami-scheduler";
  p["spec"]["containers"][0] = {
      {"name", "main"},
      {"resources",
       {{"requests", {{"cpu", "100m"}, {"memory", "128Mi"}}},
        {"limits", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "10240"}}}}}};
  p["status"] = {{"phase", "Running"}};
  return p;
}

// Heap bytes in use, every arena (glibc); 0 where the allocator does not tell (sanitizers).
int64_t HeapInUse() {
  const struct mallinfo2 mi = mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
}

// The store keeps each object packed, not as a parsed DOM: 3,000 trimmed pods (each about 3 KB
// as a DOM, 0.5 KB packed) cost the informer at most 1.2 KB apiece of heap once synced.
TEST_F(InformerTest, StoreKeepsObjectsCompact) {
  constexpr int kCount = 3000;
  for (int i = 0; i < kCount; ++i) ASSERT_TRUE(fake_->Upsert("pods", TrimmedPod(i)).ok());
  InformerOptions o = FastOptions(kPods);
  o.page_size = 500;
  auto inf = std::make_unique<Informer>(*client_, o);
  ASSERT_TRUE(inf->WaitForSync(std::chrono::milliseconds(0)) == false);
  malloc_trim(0);
  const int64_t before = HeapInUse();
  if (before == 0) GTEST_SKIP() << "mallinfo2 reports nothing under this allocator";
  inf->Start();
  ASSERT_TRUE(inf->WaitForSync(std::chrono::seconds(60)));
  ASSERT_EQ(inf->Size(), static_cast<size_t>(kCount));
  const int64_t per_pod = (HeapInUse() - before) / kCount;
  std::printf("heap per stored pod: %lld bytes\n", static_cast<long long>(per_pod));
  EXPECT_LT(per_pod, 1200);
  inf->Stop();
}

// Objects read back from the store equal the objects delivered, value for value and type for
// type (signed, unsigned and floating numbers, null, nested arrays, escapes and UTF-8).
TEST_F(InformerTest, StoredObjectsReadBackExactly) {
  const Json odd[] = {
      {{"n", -7}, {"u", 18446744073709551615ULL}, {"f", 0.1}, {"g", -2.5e300}},
      {{"null", nullptr}, {"t", true}, {"e", Json::object()}, {"a", Json::array({1, "x", {}})}},
      {{"s", "tab\t quote\" \u00e9\u4e2d \xF0\x9F\x98\x80"}, {"big", std::string(70000, 'z')}},
  };
  for (int i = 0; i < 3; ++i) {
    Json p = MakePod("default", "odd-" + std::to_string(i));
    p["spec"]["x"] = odd[i];
    ASSERT_TRUE(fake_->Upsert("pods", p).ok());
  }
  Informer inf(*client_, FastOptions(kPods));
  std::mutex mu;
  std::map<std::string, Json> delivered;
  InformerHandlers h;
  h.on_add = [&](const Json& obj) {
    std::lock_guard<std::mutex> l(mu);
    delivered[Informer::KeyOf(obj)] = obj;
  };
  h.on_update = [&](const Json&, const Json& obj) {
    std::lock_guard<std::mutex> l(mu);
    delivered[Informer::KeyOf(obj)] = obj;
  };
  inf.AddHandlers(h);
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(20)));
  Json watched = MakePod("default", "odd-watched");
  watched["spec"]["x"] = odd[0];
  ASSERT_TRUE(fake_->Upsert("pods", watched).ok());
  ASSERT_TRUE(Eventually([&] { return inf.Size() == 4; }));
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(delivered.size(), 4u);
  for (const auto& [key, obj] : delivered) {
    SCOPED_TRACE(key);
    ASSERT_TRUE(inf.Get(key).has_value());
    EXPECT_EQ(*inf.Get(key), obj);
    EXPECT_EQ(inf.Get(key)->dump(), obj.dump());  // number types too
    EXPECT_EQ(*inf.Find(key), obj);
  }
  EXPECT_EQ(inf.List().size(), 4u);
}

// The first list's objects are handed on page by page as they are read, not after the last page:
// a large list never holds every object parsed at once (at most one page read ahead).
TEST_F(InformerTest, ListedObjectsAreDeliveredPageByPage) {
  for (int i = 0; i < 25; ++i)
    ASSERT_TRUE(fake_->Upsert("pods", MakePod("default", "p" + std::to_string(i))).ok());
  InformerOptions o = FastOptions(kPods);
  o.page_size = 10;
  Informer inf(*client_, o);
  std::mutex mu;
  std::vector<int64_t> pages_read_at_add;  // list requests answered when each add arrived
  InformerHandlers h;
  h.on_add = [&](const Json&) {
    const int64_t n = ListRequests();
    std::lock_guard<std::mutex> l(mu);
    pages_read_at_add.push_back(n);
  };
  inf.AddHandlers(h);
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(20)));
  inf.Stop();
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(pages_read_at_add.size(), 25u);
  // The client asks for the next page while it parses one (Client::ListPages), so page 2 may be
  // read already when page 1's objects arrive; page 3 must not be.
  EXPECT_LE(pages_read_at_add.front(), 2) << "the first page's objects come before page 3 is read";
  EXPECT_EQ(pages_read_at_add.back(), 3);
}

TEST_F(InformerTest, ResyncRedeliversObjects) {
  ASSERT_TRUE(fake_->Upsert("nodes", MakeNode("n1")).ok());
  InformerOptions o = FastOptions(kNodes);
  o.resync_period = std::chrono::milliseconds(20);
  Informer inf(*client_, o);
  Mirror m;
  inf.AddHandlers(m.Handlers());
  inf.Start();
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> l(m.mu);
    return m.resyncs >= 2;
  }));
  inf.Stop();
}

TEST_F(InformerTest, StopsWhileServerIsDown) {
  fake_->InjectErrors("", ".", 503, 1000000);
  Informer inf(*client_, FastOptions(kPods));
  inf.Start();
  ASSERT_TRUE(Eventually([&] { return fake_->CountRequests("GET", "/pods") > 3; }));
  EXPECT_FALSE(inf.HasSynced());
  EXPECT_FALSE(inf.WaitForSync(std::chrono::milliseconds(1)));
  inf.Stop();
}

}  // namespace
}  // namespace hami::k8s
