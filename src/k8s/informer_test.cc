// Informers against the fake API server: initial sync, incremental events, selectors, resync, and
// convergence after dropped watches, 410s, compaction and 5xx bursts.
#include "k8s/informer.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
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
    return o;
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
