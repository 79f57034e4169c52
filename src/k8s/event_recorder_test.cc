// EventRecorder against the fake API server (loopback): events arrive as core/v1 Event objects the
// server's validation accepts, and a slow API server makes the recorder drop, never block.
#include "k8s/event_recorder.h"

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gtest/gtest.h"
#include "k8s/testing/fake_apiserver.h"

namespace hami::k8s {
namespace {

using testing::FakeApiServer;

std::unique_ptr<Client> NewClient(const FakeApiServer& fake, const std::string& token = "") {
  ClientConfig cfg;
  cfg.server = fake.url();
  cfg.bearer_token = token;
  ClientOptions opts;
  opts.sleep = [](int64_t) {};  // retries without waiting
  auto c = Client::Create(cfg, opts);
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(*c);
}

EventSpec PodEvent(const std::string& ns, const std::string& pod, const std::string& reason,
                   std::string message = "m") {
  EventSpec ev;
  ev.involved_object = {{"kind", "Pod"}, {"namespace", ns}, {"name", pod}, {"uid", "u-" + pod}};
  ev.reason = reason;
  ev.message = std::move(message);
  return ev;
}

// A steady stream is posted once per linger, and Flush does not wait the linger out: with an hour
// of linger, every event recorded (before and during the linger after the first post) is posted
// by Flush, and nothing is posted before the linger ends unless asked.
TEST(EventRecorder, LingerBatchesAndFlushCutsItShort) {
  FakeApiServer fake;
  ASSERT_TRUE(fake.Start().ok());
  auto client = NewClient(fake);
  EventRecorderOptions o;
  o.linger = std::chrono::hours(1);
  EventRecorder rec(*client, o);
  ASSERT_TRUE(rec.Record(PodEvent("ns1", "p1", "FilteringSucceed")));
  rec.Flush();  // the thread lingers from its start: Flush wakes it
  EXPECT_EQ(rec.posted(), 1u);
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(rec.Record(PodEvent("ns1", "p" + std::to_string(i), "R")));
  // Lingering (an hour): the five wait. Flush posts them at once.
  EXPECT_EQ(rec.posted(), 1u);
  rec.Flush();
  EXPECT_EQ(rec.posted(), 6u);
  EXPECT_EQ(fake.List("events").size(), 6u);
}

TEST(EventRecorder, PostsCoreV1Events) {
  FakeApiServer fake;
  ASSERT_TRUE(fake.Start().ok());
  auto client = NewClient(fake);
  EventRecorder rec(*client);
  ASSERT_TRUE(rec.Record(PodEvent("ns1", "p1", "FilteringSucceed")));
  ASSERT_TRUE(rec.Record(PodEvent("ns1", "p1", "BindingSucceed")));
  // Longer than the server's 1024-byte limit: cut, not refused.
  ASSERT_TRUE(rec.Record(PodEvent("ns2", "p2", "BindingFailed", std::string(5000, 'x'))));
  rec.Flush();
  EXPECT_EQ(rec.posted(), 3u);
  EXPECT_EQ(rec.failed(), 0u);
  EXPECT_EQ(rec.dropped(), 0u);
  auto events = fake.List("events");
  ASSERT_EQ(events.size(), 3u);
  std::multiset<std::string> reasons;
  for (const auto& e : events) {
    EXPECT_EQ(e["apiVersion"], "v1");
    EXPECT_EQ(e["kind"], "Event");
    EXPECT_EQ(e["metadata"]["namespace"], e["involvedObject"]["namespace"]);
    EXPECT_LE(e["message"].get<std::string>().size(), 1024u);
    reasons.insert(e["reason"].get<std::string>());
  }
  EXPECT_EQ(reasons,
            (std::multiset<std::string>{"BindingFailed", "BindingSucceed", "FilteringSucceed"}));
}

TEST(EventRecorder, FullQueueDropsInsteadOfBlocking) {
  FakeApiServer fake;
  ASSERT_TRUE(fake.Start().ok());
  auto client = NewClient(fake, "slow");
  fake.Partition("Bearer slow", true);  // every request of this client is held unanswered
  EventRecorderOptions o;
  o.capacity = 2;
  {
    EventRecorder rec(*client, o);
    int accepted = 0;
    for (int i = 0; i < 6; ++i) accepted += rec.Record(PodEvent("ns", "p", "FilteringSucceed"));
    // At most one in flight (held by the server) and two queued: the rest were dropped at once.
    EXPECT_LE(accepted, 3);
    EXPECT_GE(rec.dropped(), 3u);
    fake.Partition("Bearer slow", false);  // held requests get 503, retries go through
    rec.Flush();
    EXPECT_EQ(rec.posted() + rec.failed() + rec.dropped(), 6u);
    EXPECT_EQ(rec.dropped(), static_cast<uint64_t>(6 - accepted));
  }
}

// Events are background requests: on a client they share with the scheduling path (qps 20, burst
// 4) a stream of them leaves half the burst, so the path's next requests go without waiting. As
// foreground requests the six events would have spent the burst and the next request waited.
TEST(EventRecorder, EventsLeaveTheSchedulingPathItsTokens) {
  struct Case {
    const char* name;
    bool background;
    size_t want_waits_after;  // rate-limiter waits of two requests sent after the events
  };
  const Case cases[] = {{"background (default)", true, 0}, {"foreground", false, 2}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    FakeApiServer fake;
    ASSERT_TRUE(fake.Start().ok());
    FakeClock clock;
    std::mutex mu;
    std::vector<int64_t> sleeps;
    ClientConfig cfg;
    cfg.server = fake.url();
    cfg.qps = 20;
    cfg.burst = 4;
    ClientOptions opts;
    opts.clock = &clock;
    opts.sleep = [&](int64_t ns) {
      std::lock_guard<std::mutex> l(mu);
      sleeps.push_back(ns);
      clock.AdvanceNanos(ns);
    };
    auto client = std::move(*Client::Create(cfg, opts));
    EventRecorderOptions o;
    o.background = c.background;
    EventRecorder rec(*client, o);
    for (int i = 0; i < 6; ++i)
      ASSERT_TRUE(rec.Record(PodEvent("ns1", "p" + std::to_string(i), "FilteringSucceed")));
    rec.Flush();
    EXPECT_EQ(rec.posted(), 6u);
    const size_t before = [&] {
      std::lock_guard<std::mutex> l(mu);
      return sleeps.size();
    }();
    for (int i = 0; i < 2; ++i) (void)client->Get(kNamespaces, "", "default");  // found or not
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(sleeps.size() - before, c.want_waits_after);
  }
}

TEST(EventRecorder, FakeServerValidatesEventsAsTheApiServer) {
  FakeApiServer fake;
  ASSERT_TRUE(fake.Start().ok());
  auto client = NewClient(fake);
  Json ev = {{"apiVersion", "v1"},
             {"kind", "Event"},
             {"metadata", {{"name", "p.1"}, {"namespace", "ns1"}}},
             {"involvedObject", {{"kind", "Pod"}, {"namespace", "other"}, {"name", "p"}}},
             {"reason", "FilteringSucceed"},
             {"message", "m"},
             {"type", "Normal"}};
  EXPECT_FALSE(client->Create(kEvents, "ns1", ev).ok()) << "namespace mismatch accepted";
  ev["involvedObject"]["namespace"] = "ns1";
  ev["reason"] = std::string(129, 'r');
  EXPECT_FALSE(client->Create(kEvents, "ns1", ev).ok()) << "129-byte reason accepted";
  ev["reason"] = "FilteringSucceed";
  ev["metadata"]["name"] = "P_1";
  EXPECT_FALSE(client->Create(kEvents, "ns1", ev).ok()) << "bad name accepted";
  ev["metadata"]["name"] = "p.1";
  EXPECT_TRUE(client->Create(kEvents, "ns1", ev).ok());
}

}  // namespace
}  // namespace hami::k8s
