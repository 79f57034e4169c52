// Leader election between candidates sharing one Lease in the fake API server.
#include "k8s/leader_election.h"

#include <gtest/gtest.h>

#include <atomic>

#include "k8s/testing/fake_apiserver.h"
#include "k8s/testing/test_util.h"

namespace hami::k8s {
namespace {

using testing::Eventually;
using testing::FakeApiServer;

class LeaderElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_ = std::make_unique<FakeApiServer>();
    ASSERT_TRUE(fake_->Start().ok());
    ClientConfig cfg;
    cfg.server = fake_->url();
    cfg.qps = 0;
    auto c = Client::Create(cfg);
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
  }
  LeaderElectionConfig Cfg(const std::string& id, std::atomic<int>* started,
                           std::atomic<int>* stopped) {
    LeaderElectionConfig c;
    c.lease_namespace = "hami-system";
    c.lease_name = "hami-scheduler";
    c.identity = id;
    c.on_started_leading = [started] { ++*started; };
    c.on_stopped_leading = [stopped] { ++*stopped; };
    return c;
  }
  Json Lease() { return *fake_->Get("leases", "hami-system", "hami-scheduler"); }
  std::unique_ptr<FakeApiServer> fake_;
  std::unique_ptr<Client> client_;
};

TEST_F(LeaderElectionTest, TakeOverWhenLeaderStopsRenewing) {
  FakeClock clock;
  std::atomic<int> a_start{0}, a_stop{0}, b_start{0}, b_stop{0};
  auto a = LeaderElector::Create(*client_, Cfg("a", &a_start, &a_stop), clock);
  auto b = LeaderElector::Create(*client_, Cfg("b", &b_start, &b_stop), clock);
  ASSERT_TRUE(a.ok() && b.ok());

  EXPECT_TRUE((*a)->TryAcquireOrRenew());  // creates the lease
  EXPECT_EQ(a_start, 1);
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "a");
  EXPECT_EQ(Lease()["spec"]["leaseDurationSeconds"], 15);
  EXPECT_FALSE((*b)->TryAcquireOrRenew());
  EXPECT_EQ((*b)->ObservedLeader(), "a");

  struct Step {
    int64_t advance_s;
    bool a_renews;
    bool want_a, want_b;
  };
  // a renews twice; then goes quiet. b may take over only once 15 s have passed since b last saw
  // the record change.
  std::vector<Step> steps = {
      {5, true, true, false},  {5, true, true, false},  {10, false, true, false},
      {4, false, true, false}, {2, false, false, true},
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE(i);
    clock.AdvanceSeconds(steps[i].advance_s);
    if (steps[i].a_renews) {
      EXPECT_TRUE((*a)->TryAcquireOrRenew());
    }
    EXPECT_EQ((*b)->TryAcquireOrRenew(), steps[i].want_b);
  }
  EXPECT_EQ(b_start, 1);
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "b");
  EXPECT_EQ(Lease()["spec"]["leaseTransitions"], 1);
  // a wakes up: it sees b holding a fresh lease and steps down.
  EXPECT_FALSE((*a)->TryAcquireOrRenew());
  EXPECT_FALSE((*a)->IsLeader());
  EXPECT_EQ(a_stop, 1);
  EXPECT_EQ((*a)->ObservedLeader(), "b");
}

TEST_F(LeaderElectionTest, LeaderLosesLeaseAfterRenewDeadlineWithoutServer) {
  FakeClock clock;
  std::atomic<int> start{0}, stop{0};
  auto a = LeaderElector::Create(*client_, Cfg("a", &start, &stop), clock);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE((*a)->TryAcquireOrRenew());
  fake_->InjectErrors("", "/leases/", 403, 1000);  // cannot read or renew
  clock.AdvanceSeconds(5);
  EXPECT_TRUE((*a)->TryAcquireOrRenew());  // still within renew deadline (10 s)
  clock.AdvanceSeconds(6);
  EXPECT_FALSE((*a)->TryAcquireOrRenew());
  EXPECT_EQ(stop, 1);
}

// A leader whose renewal hangs (the API server unreachable: no attempt returns) stops leading at
// its renew deadline, before the lease expires for anyone else: at no instant do two candidates
// lead.
TEST_F(LeaderElectionTest, HangingLeaderStopsAtRenewDeadlineBeforeTakeOver) {
  FakeClock clock;
  std::atomic<int> a_start{0}, a_stop{0}, b_start{0}, b_stop{0};
  auto a = LeaderElector::Create(*client_, Cfg("a", &a_start, &a_stop), clock);
  auto b = LeaderElector::Create(*client_, Cfg("b", &b_start, &b_stop), clock);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->TryAcquireOrRenew());
  EXPECT_FALSE((*b)->TryAcquireOrRenew());
  int a_last_ms = -1, b_first_ms = -1;
  for (int ms = 0; ms <= 20'000; ms += 250) {  // a never gets to renew again
    SCOPED_TRACE(ms);
    const bool b_leads = (*b)->TryAcquireOrRenew();
    const bool a_leads = (*a)->IsLeader();
    EXPECT_FALSE(a_leads && b_leads);
    if (a_leads) a_last_ms = ms;
    if (b_leads && b_first_ms < 0) b_first_ms = ms;
    clock.AdvanceNanos(250'000'000);
  }
  EXPECT_EQ(a_last_ms, 9'750);    // renew deadline 10 s
  EXPECT_EQ(b_first_ms, 15'000);  // lease duration 15 s
}

TEST_F(LeaderElectionTest, BackgroundElectorsHandOver) {
  std::atomic<int> a_start{0}, a_stop{0}, b_start{0}, b_stop{0};
  auto fast = [&](LeaderElectionConfig c) {
    // Generous deadlines so a loaded CI machine never makes the leader step down by itself; the
    // handover below is immediate because a stopping leader releases the lease.
    c.lease_duration = std::chrono::milliseconds(5000);
    c.renew_deadline = std::chrono::milliseconds(4000);
    c.retry_period = std::chrono::milliseconds(20);
    return c;
  };
  auto a = LeaderElector::Create(*client_, fast(Cfg("a", &a_start, &a_stop)));
  auto b = LeaderElector::Create(*client_, fast(Cfg("b", &b_start, &b_stop)));
  ASSERT_TRUE(a.ok() && b.ok());
  (*a)->Start();
  ASSERT_TRUE(Eventually([&] { return (*a)->IsLeader(); }));
  (*b)->Start();
  ASSERT_TRUE(Eventually([&] { return (*b)->ObservedLeader() == "a"; }));
  EXPECT_FALSE((*b)->IsLeader());
  (*a)->Stop();  // releases the lease
  EXPECT_EQ(a_stop, 1);
  ASSERT_TRUE(Eventually([&] { return (*b)->IsLeader(); }));
  EXPECT_EQ(b_start, 1);
  EXPECT_EQ(a_start, 1);
  (*b)->Stop();
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "");
}

TEST_F(LeaderElectionTest, RejectsBadConfig) {
  std::atomic<int> s{0};
  struct Case {
    std::string name;
    std::function<void(LeaderElectionConfig&)> edit;
  };
  std::vector<Case> cases = {
      {"no identity", [](auto& c) { c.identity = ""; }},
      {"duration <= deadline", [](auto& c) { c.lease_duration = c.renew_deadline; }},
      {"deadline <= retry", [](auto& c) { c.retry_period = c.renew_deadline; }},
      {"no lease name", [](auto& c) { c.lease_name = ""; }},
  };
  for (const auto& c : cases) {
    auto cfg = Cfg("x", &s, &s);
    c.edit(cfg);
    auto e = LeaderElector::Create(*client_, cfg);
    EXPECT_TRUE(absl::IsInvalidArgument(e.status())) << c.name;
    EXPECT_TRUE(absl::IsInvalidArgument(ValidateLeaderElectionConfig(cfg))) << c.name;
  }
}

}  // namespace
}  // namespace hami::k8s
