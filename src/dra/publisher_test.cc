// SlicePublisher and K8sClaimSource against the fake API server's resource.k8s.io/v1 (with the
// real server's dropping of gated fields).
#include "dra/publisher.h"

#include <gtest/gtest.h>

#include "dra/testing/builders.h"
#include "k8s/testing/fake_apiserver.h"

namespace hami::dra {
namespace {

using Json = nlohmann::json;

gpu::GpuInfo Gpu(int index) {
  gpu::GpuInfo g;
  g.index = index;
  g.uuid = StrCat("GPU-", index);
  g.model = "NVIDIA A16";
  g.memory_mib = 16384;
  return g;
}

class PublisherTest : public ::testing::Test {
 protected:
  void Serve(k8s::testing::FakeApiServerOptions o = {}) {
    api_ = std::make_unique<k8s::testing::FakeApiServer>(o);
    ASSERT_TRUE(api_->Start().ok());
    auto node = api_->Upsert(
        "nodes",
        {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", testing::kNode}}}});
    ASSERT_TRUE(node.ok());
    node_uid_ = (*node)["metadata"]["uid"];
    k8s::ClientConfig cfg;
    cfg.server = api_->url();
    auto c = k8s::Client::Create(cfg);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
  }
  SliceOptions Opts() {
    SliceOptions o;
    o.node_name = testing::kNode;
    return o;
  }
  std::optional<Json> Slice() {
    return api_->Get("resourceslices", "", SliceName(testing::kNode, kDefaultDriverName));
  }

  std::unique_ptr<k8s::testing::FakeApiServer> api_;
  std::unique_ptr<k8s::Client> client_;
  std::string node_uid_;
};

TEST_F(PublisherTest, CreatesKeepsBumpsAndRecreates) {
  Serve();
  SlicePublisher one(client_.get(), Opts(), {Gpu(0)});
  using A = SlicePublisher::Action;
  struct Step {
    SlicePublisher* p;
    bool delete_first;
    A action;
    int64_t generation;
  };
  SlicePublisher two(client_.get(), Opts(), {Gpu(0), Gpu(1)});
  const Step steps[] = {
      {&one, false, A::kCreated, 1}, {&one, false, A::kNone, 1},   {&two, false, A::kUpdated, 2},
      {&two, false, A::kNone, 2},    {&two, true, A::kCreated, 1},  // the kubelet wiped it
  };
  int i = 0;
  for (const auto& s : steps) {
    if (s.delete_first) {
      ASSERT_TRUE(
          api_->Delete("resourceslices", "", SliceName(testing::kNode, kDefaultDriverName)).ok());
    }
    auto o = s.p->Reconcile();
    ASSERT_TRUE(o.ok()) << i << ": " << o.status();
    EXPECT_EQ(o->action, s.action) << i;
    EXPECT_EQ(o->generation, s.generation) << i;
    EXPECT_TRUE(o->shared) << i;
    auto stored = Slice();
    ASSERT_TRUE(stored.has_value()) << i;
    EXPECT_EQ((*stored)["spec"]["pool"]["generation"], s.generation) << i;
    EXPECT_EQ((*stored)["metadata"]["ownerReferences"][0]["uid"], node_uid_) << i;
    EXPECT_EQ((*stored)["spec"]["devices"][0]["allowMultipleAllocations"], true) << i;
    ++i;
  }
}

TEST_F(PublisherTest, GateOffFallsBackToExclusiveDevices) {
  k8s::testing::FakeApiServerOptions o;
  o.kube_minor = 35;  // DRAConsumableCapacity alpha, off
  Serve(o);
  SlicePublisher p(client_.get(), Opts(), {Gpu(0)});
  auto out = p.Reconcile();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE(out->shared);
  EXPECT_FALSE(p.shared());
  auto stored = Slice();
  ASSERT_TRUE(stored.has_value());
  const Json& d = (*stored)["spec"]["devices"][0];
  EXPECT_FALSE(d.contains("allowMultipleAllocations"));
  EXPECT_FALSE(d["capacity"]["memory"].contains("requestPolicy"));
  // Later passes keep it exclusive and unchanged.
  auto again = p.Reconcile();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->action, SlicePublisher::Action::kNone);
  EXPECT_FALSE(again->shared);
}

TEST_F(PublisherTest, GateOnIn135KeepsSharing) {
  k8s::testing::FakeApiServerOptions o;
  o.kube_minor = 35;
  o.feature_gates["DRAConsumableCapacity"] = true;
  Serve(o);
  SlicePublisher p(client_.get(), Opts(), {Gpu(0)});
  auto out = p.Reconcile();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->shared);
}

TEST_F(PublisherTest, ClaimSourceReadsClaims) {
  Serve();
  ASSERT_TRUE(
      api_->Upsert("resourceclaims",
                   testing::MakeClaim("ns", "c1", "x").Result("gpu", "gpu-0", "4Gi", "30").Json())
          .ok());
  K8sClaimSource src(client_.get());
  auto c = src.GetClaim("ns", "c1");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"]["memory"],
            "4Gi");
  EXPECT_TRUE(absl::IsNotFound(src.GetClaim("ns", "none").status()));
}

}  // namespace
}  // namespace hami::dra
