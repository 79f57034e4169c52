// The client against the fake API server: CRUD, selectors, pagination, binding, patches with
// optimistic concurrency, retries with backoff, rate limiting, watches with bookmarks and 410.
#include "k8s/client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

#include "k8s/errors.h"
#include "k8s/testing/fake_apiserver.h"
#include "k8s/testing/test_util.h"

namespace hami::k8s {
namespace {

using testing::Eventually;
using testing::FakeApiServer;
using testing::MakeNode;
using testing::MakePod;

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::FakeApiServerOptions o;
    o.bookmark_interval = std::chrono::milliseconds(50);
    fake_ = std::make_unique<FakeApiServer>(o);
    ASSERT_TRUE(fake_->Start().ok());
    client_ = NewClient();
  }
  std::unique_ptr<Client> NewClient(double qps = 0, int burst = 1, const Clock* clock = nullptr) {
    ClientConfig cfg;
    cfg.server = fake_->url();
    cfg.qps = qps;
    cfg.burst = burst;
    ClientOptions opts;
    opts.clock = clock;
    opts.seed = 5;
    opts.sleep = [this, clock](int64_t ns) {
      std::lock_guard<std::mutex> l(sleep_mu_);
      sleeps_.push_back(ns);
      if (auto* fc = const_cast<FakeClock*>(dynamic_cast<const FakeClock*>(clock)))
        fc->AdvanceNanos(ns);
    };
    auto c = Client::Create(cfg, opts);
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(*c);
  }
  std::vector<int64_t> Sleeps() {
    std::lock_guard<std::mutex> l(sleep_mu_);
    return sleeps_;
  }

  std::unique_ptr<FakeApiServer> fake_;
  std::unique_ptr<Client> client_;
  std::mutex sleep_mu_;
  std::vector<int64_t> sleeps_;
};

TEST_F(ClientTest, CreateGetListDelete) {
  auto created = client_->Create(kPods, "ns1", MakePod("ns1", "p1", "", {{"app", "a"}}));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_FALSE((*created)["metadata"]["uid"].get<std::string>().empty());
  EXPECT_EQ((*created)["status"]["phase"], "Pending");

  auto again = client_->Create(kPods, "ns1", MakePod("ns1", "p1"));
  EXPECT_TRUE(absl::IsAlreadyExists(again.status())) << again.status();

  auto got = client_->Get(kPods, "ns1", "p1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)["metadata"]["uid"], (*created)["metadata"]["uid"]);

  auto missing = client_->Get(kPods, "ns1", "nope");
  ASSERT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_NE(std::string(missing.status().message()).find("pods \"nope\" not found"),
            std::string::npos)
      << missing.status();

  ASSERT_TRUE(client_->Delete(kPods, "ns1", "p1").ok());
  EXPECT_TRUE(absl::IsNotFound(client_->Get(kPods, "ns1", "p1").status()));
  EXPECT_TRUE(absl::IsNotFound(client_->Delete(kPods, "ns1", "p1")));
}

TEST_F(ClientTest, ListSelectorsAndPages) {
  for (int i = 0; i < 7; ++i) {
    auto pod = MakePod(i % 2 ? "odd" : "even", "p" + std::to_string(i), i < 3 ? "node-a" : "",
                       {{"tier", i < 4 ? "web" : "db"}});
    ASSERT_TRUE(fake_->Upsert("pods", pod).ok());
  }
  ASSERT_TRUE(fake_->Upsert("nodes", MakeNode("node-a")).ok());
  struct Case {
    std::string ns;
    ListOptions opts;
    std::vector<std::string> want;
  };
  ListOptions by_node;
  by_node.field_selector = "spec.nodeName=node-a";
  ListOptions unscheduled;
  unscheduled.field_selector = "spec.nodeName=";
  ListOptions web_paged;
  web_paged.label_selector = "tier=web";
  web_paged.limit = 2;
  ListOptions not_web;
  not_web.label_selector = "tier!=web,tier in (db, cache)";
  std::vector<Case> cases = {
      {"", by_node, {"p0", "p2", "p1"}},  // store order: namespace ("even" < "odd"), then name
      {"", unscheduled, {"p4", "p6", "p3", "p5"}}, {"even", {}, {"p0", "p2", "p4", "p6"}},
      {"", web_paged, {"p0", "p2", "p1", "p3"}},   {"odd", not_web, {"p5"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.opts.label_selector + " " + c.opts.field_selector);
    auto list = client_->List(kPods, c.ns, c.opts);
    ASSERT_TRUE(list.ok()) << list.status();
    std::vector<std::string> names;
    for (const auto& item : (*list)["items"]) {
      names.push_back(item["metadata"]["name"]);
      EXPECT_FALSE(item.contains("kind"));
    }
    EXPECT_EQ(names, c.want);
    EXPECT_EQ((*list)["kind"], "PodList");
    EXPECT_FALSE((*list)["metadata"]["resourceVersion"].get<std::string>().empty());
  }
  // The paged list took two requests of at most two items (4 matches, limit 2).
  EXPECT_EQ(fake_->CountRequests("GET", "^/api/v1/pods$"), 2 + 1 + 1);
  auto nodes = client_->List(kNodes, "");
  ASSERT_TRUE(nodes.ok());
  EXPECT_EQ((*nodes)["items"].size(), 1u);
  ListOptions bad;
  bad.label_selector = "tier in web";
  EXPECT_TRUE(absl::IsInvalidArgument(client_->List(kPods, "", bad).status()));
}

// ListPages asks for page k+1 while page k is handed over (the server's time and the parse
// overlap): while on_page holds a page, the request for the next one reaches the server. Each page
// is asked for once and they arrive in order.
TEST_F(ClientTest, ListPagesAsksForTheNextPageWhileHandlingOne) {
  for (int i = 0; i < 7; ++i)
    ASSERT_TRUE(fake_->Upsert("pods", MakePod("ns", "p" + std::to_string(i), "")).ok());
  ListOptions paged;
  paged.limit = 3;  // pages of 3, 3, 1
  std::vector<std::string> names;
  std::vector<bool> next_asked;
  auto rv = client_->ListPages(kPods, "", paged, [&](Json& page) {
    for (const auto& item : page["items"]) names.push_back(item["metadata"]["name"]);
    const bool last = !page["metadata"].contains("continue");
    const int64_t want = static_cast<int64_t>(next_asked.size()) + (last ? 1 : 2);
    next_asked.push_back(
        testing::Eventually([&] { return fake_->CountRequests("GET", "^/api/v1/pods$") >= want; },
                            std::chrono::seconds(5)));
  });
  ASSERT_TRUE(rv.ok()) << rv.status();
  EXPECT_EQ(names, (std::vector<std::string>{"p0", "p1", "p2", "p3", "p4", "p5", "p6"}));
  EXPECT_EQ(next_asked, (std::vector<bool>{true, true, true}));
  EXPECT_EQ(fake_->CountRequests("GET", "^/api/v1/pods$"), 3);
}

TEST_F(ClientTest, BindSetsNodeOnceAndMergesAnnotations) {
  auto pod = fake_->Upsert("pods", MakePod("default", "gpu-pod"));
  ASSERT_TRUE(pod.ok());
  const std::string uid = (*pod)["metadata"]["uid"];
  EXPECT_TRUE(IsConflict(client_->Bind("default", "gpu-pod", "wrong-uid", "node-1")));
  ASSERT_TRUE(
      client_->Bind("default", "gpu-pod", uid, "node-1", {{"hami.io/bind-phase", "allocating"}})
          .ok());
  auto stored = fake_->Get("pods", "default", "gpu-pod");
  ASSERT_TRUE(stored);
  EXPECT_EQ((*stored)["spec"]["nodeName"], "node-1");
  EXPECT_EQ((*stored)["metadata"]["annotations"]["hami.io/bind-phase"], "allocating");
  EXPECT_EQ((*stored)["status"]["conditions"][0]["type"], "PodScheduled");
  Status again = client_->Bind("default", "gpu-pod", uid, "node-2");
  EXPECT_TRUE(IsConflict(again)) << again;
  EXPECT_NE(std::string(again.message()).find("already assigned to node \"node-1\""),
            std::string::npos)
      << again;
  EXPECT_TRUE(absl::IsNotFound(client_->Bind("default", "ghost", "", "node-1")));
}

// A crafted name never changes the URL: "pods/.." would be resolved to the namespace itself.
TEST_F(ClientTest, InvalidNamesNeverReachTheServer) {
  const int64_t before = fake_->CountRequests("", ".*");
  const Json patch = {{"metadata", {{"annotations", {{"a", "b"}}}}}};
  for (const char* name : {"..", ".", "a/b", "../../nodes/n1", "A", "%2e%2e"}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(absl::IsInvalidArgument(
        client_->Patch(kPods, "default", name, PatchType::kMerge, patch).status()));
    EXPECT_TRUE(absl::IsInvalidArgument(client_->Get(kPods, "default", name).status()));
    EXPECT_TRUE(absl::IsInvalidArgument(client_->Delete(kPods, "default", name)));
    EXPECT_TRUE(absl::IsInvalidArgument(client_->Bind("default", name, "", "node-1")));
    EXPECT_TRUE(absl::IsInvalidArgument(client_->Bind("default", "p", "", name)));
    EXPECT_TRUE(absl::IsInvalidArgument(
        client_->Patch(kPods, name, "p", PatchType::kMerge, patch).status()));
    EXPECT_TRUE(absl::IsInvalidArgument(client_->List(kPods, name).status()));
  }
  EXPECT_TRUE(absl::IsInvalidArgument(client_->Bind("default", "p", "../uid", "node-1")));
  EXPECT_EQ(fake_->CountRequests("", ".*"), before);
}

TEST_F(ClientTest, PatchKinds) {
  ASSERT_TRUE(fake_->Upsert("nodes", MakeNode("n1")).ok());
  auto merged = client_->Patch(kNodes, "", "n1", PatchType::kMerge,
                               {{"metadata", {{"annotations", {{"a", "1"}, {"b", "2"}}}}}});
  ASSERT_TRUE(merged.ok()) << merged.status();
  auto removed = client_->Patch(kNodes, "", "n1", PatchType::kStrategicMerge,
                                {{"metadata", {{"annotations", {{"a", nullptr}}}}}});
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ((*removed)["metadata"]["annotations"], Json({{"b", "2"}}));
  auto json_patch = client_->Patch(
      kNodes, "", "n1", PatchType::kJson,
      Json::array({{{"op", "add"}, {"path", "/metadata/annotations/hami.io~1x"}, {"value", "y"}}}));
  ASSERT_TRUE(json_patch.ok()) << json_patch.status();
  EXPECT_EQ((*json_patch)["metadata"]["annotations"]["hami.io/x"], "y");
  auto stale = client_->Patch(kNodes, "", "n1", PatchType::kMerge,
                              {{"metadata", {{"resourceVersion", "1"}}}});
  EXPECT_TRUE(IsConflict(stale.status())) << stale.status();
  auto failed_test =
      client_->Patch(kNodes, "", "n1", PatchType::kJson,
                     Json::array({{{"op", "test"}, {"path", "/metadata/name"}, {"value", "n2"}}}));
  EXPECT_TRUE(absl::IsInvalidArgument(failed_test.status())) << failed_test.status();
  // Status subresource changes status only.
  auto st = client_->Patch(
      kNodes, "", "n1", PatchType::kMerge,
      {{"status", {{"phase", "Ready"}}}, {"metadata", {{"labels", {{"x", "y"}}}}}}, "status");
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ((*st)["status"]["phase"], "Ready");
  EXPECT_FALSE((*st)["metadata"].contains("labels"));
}

// PatchNoReply writes as Patch does and reports the same errors; only the reply goes unread.
TEST_F(ClientTest, PatchNoReplyAppliesAndReportsErrors) {
  ASSERT_TRUE(fake_->Upsert("nodes", MakeNode("n1")).ok());
  ASSERT_TRUE(client_
                  ->PatchNoReply(kNodes, "", "n1", PatchType::kMerge,
                                 {{"metadata", {{"annotations", {{"a", "1"}}}}}})
                  .ok());
  auto got = client_->Get(kNodes, "", "n1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["metadata"]["annotations"]["a"], "1");
  EXPECT_TRUE(IsConflict(client_->PatchNoReply(kNodes, "", "n1", PatchType::kMerge,
                                               {{"metadata", {{"resourceVersion", "1"}}}})));
  EXPECT_TRUE(absl::IsNotFound(client_->PatchNoReply(kNodes, "", "ghost", PatchType::kMerge,
                                                     {{"metadata", Json::object()}})));
  EXPECT_TRUE(absl::IsInvalidArgument(
      client_->PatchNoReply(kPods, "default", "..", PatchType::kMerge, Json::object())));
}

TEST_F(ClientTest, MutateRetriesConflicts) {
  for (auto mode :
       {MutateOptions::Mode::kMerge, MutateOptions::Mode::kJson, MutateOptions::Mode::kUpdate}) {
    SCOPED_TRACE(static_cast<int>(mode));
    ASSERT_TRUE(fake_->Upsert("pods", MakePod("default", "p")).ok());
    int calls = 0;
    MutateOptions mo;
    mo.mode = mode;
    auto result = client_->Mutate(
        kPods, "default", "p",
        [&](Json& pod) {
          ++calls;
          if (calls == 1) {
            // Someone else writes between our read and our write.
            auto other = *fake_->Get("pods", "default", "p");
            other["metadata"]["labels"]["other"] = "writer";
            EXPECT_TRUE(fake_->Upsert("pods", other).ok());
          }
          pod["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] =
              "GPU-0,NVIDIA,4000,30:;";
          return OkStatus();
        },
        mo);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(calls, 2);
    auto stored = *fake_->Get("pods", "default", "p");
    EXPECT_EQ(stored["metadata"]["labels"]["other"], "writer");  // the other write survived
    EXPECT_EQ(stored["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"],
              "GPU-0,NVIDIA,4000,30:;");
    ASSERT_TRUE(fake_->Delete("pods", "default", "p").ok());
  }
}

TEST_F(ClientTest, MutateGivesUpAndAborts) {
  ASSERT_TRUE(fake_->Upsert("pods", MakePod("default", "p")).ok());
  int calls = 0;
  MutateOptions mo;
  mo.max_attempts = 3;
  auto always_conflict = client_->Mutate(
      kPods, "default", "p",
      [&](Json& pod) {
        ++calls;
        auto other = *fake_->Get("pods", "default", "p");
        other["metadata"]["labels"]["n"] = std::to_string(calls);
        EXPECT_TRUE(fake_->Upsert("pods", other).ok());
        pod["metadata"]["labels"]["mine"] = "x";
        return OkStatus();
      },
      mo);
  EXPECT_TRUE(IsConflict(always_conflict.status())) << always_conflict.status();
  EXPECT_EQ(calls, 3);
  auto refused =
      client_->Mutate(kPods, "default", "p", [](Json&) { return FailedPrecondition("no"); });
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status()));
  const int64_t before = fake_->CountRequests("PATCH", ".");
  auto noop = client_->Mutate(kPods, "default", "p", [](Json&) { return OkStatus(); });
  EXPECT_TRUE(noop.ok());
  EXPECT_EQ(fake_->CountRequests("PATCH", "."), before);
}

TEST_F(ClientTest, RetriesServerErrorsWithBackoff) {
  ASSERT_TRUE(fake_->Upsert("pods", MakePod("default", "p")).ok());
  fake_->InjectErrors("GET", "/pods/p$", 503, 3);
  auto got = client_->Get(kPods, "default", "p");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(client_->retries(), 3);
  auto sleeps = Sleeps();
  ASSERT_EQ(sleeps.size(), 3u);
  // 100 ms, 200 ms, 400 ms, each jittered by at most 20%.
  const int64_t base[] = {100'000'000, 200'000'000, 400'000'000};
  for (int i = 0; i < 3; ++i) {
    EXPECT_GE(sleeps[i], base[i] * 8 / 10) << i;
    EXPECT_LE(sleeps[i], base[i] * 12 / 10) << i;
  }
  // More failures than retries: the server's error comes back.
  fake_->InjectErrors("", "/pods/p$", 500, 100);
  auto failed = client_->Get(kPods, "default", "p");
  EXPECT_TRUE(absl::IsInternal(failed.status())) << failed.status();
  EXPECT_NE(std::string(failed.status().message()).find("injected fault"), std::string::npos);
  // Client errors are not retried.
  const int64_t retries = client_->retries();
  EXPECT_TRUE(absl::IsNotFound(client_->Get(kPods, "default", "none").status()));
  EXPECT_EQ(client_->retries(), retries);
}

TEST_F(ClientTest, TooManyRequestsHonoursRetryAfter) {
  ASSERT_TRUE(fake_->Upsert("nodes", MakeNode("n")).ok());
  fake_->InjectErrors("GET", "/nodes/n$", 429, 1, /*retry_after_seconds=*/3);
  ASSERT_TRUE(client_->Get(kNodes, "", "n").ok());
  auto sleeps = Sleeps();
  ASSERT_EQ(sleeps.size(), 1u);
  EXPECT_EQ(sleeps[0], 3'000'000'000);  // Retry-After beats the 100 ms backoff
}

TEST_F(ClientTest, TokenFileIsReReadAfterAMinute) {
  const std::string path = ::testing::TempDir() + "/hami_token_" + std::to_string(::getpid());
  auto write = [&](const std::string& t) {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(t.c_str(), f);
    std::fclose(f);
  };
  write("first\n");
  FakeClock clock;
  ClientConfig cfg;
  cfg.server = fake_->url();
  cfg.token_file = path;
  cfg.qps = 0;
  ClientOptions opts;
  opts.clock = &clock;
  auto c = Client::Create(cfg, opts);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(fake_->Upsert("nodes", MakeNode("n")).ok());
  struct Step {
    int64_t advance_s;
    std::string file, want;
  };
  std::vector<Step> steps = {
      {0, "", "Bearer first"}, {30, "second", "Bearer first"}, {31, "", "Bearer second"}};
  for (const auto& s : steps) {
    clock.AdvanceSeconds(s.advance_s);
    if (!s.file.empty()) write(s.file);
    ASSERT_TRUE((*c)->Get(kNodes, "", "n").ok());
    EXPECT_EQ(fake_->Requests().back().authorization, s.want);
  }
  std::remove(path.c_str());
}

TEST_F(ClientTest, SharedByManyThreads) {
  ASSERT_TRUE(fake_->Upsert("nodes", MakeNode("n")).ok());
  fake_->SetLatency(std::chrono::milliseconds(1));
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        const std::string name = "t" + std::to_string(t) + "-" + std::to_string(i);
        if (client_->Create(kPods, "load", MakePod("load", name)).ok() &&
            client_
                ->Patch(kPods, "load", name, PatchType::kMerge,
                        {{"metadata", {{"labels", {{"i", "1"}}}}}})
                .ok() &&
            client_->Get(kNodes, "", "n").ok()) {
          ++ok;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, 200);
  EXPECT_EQ(fake_->List("pods").size(), 200u);
  EXPECT_EQ(client_->requests_sent(), 600);
}

TEST_F(ClientTest, UnreachableServerIsUnavailable) {
  ClientConfig cfg;
  cfg.server = "http://127.0.0.1:1";  // nothing listens on port 1
  cfg.max_retries = 2;
  ClientOptions opts;
  int sleeps = 0;
  opts.sleep = [&](int64_t) { ++sleeps; };
  auto c = Client::Create(cfg, opts);
  ASSERT_TRUE(c.ok());
  auto got = (*c)->Get(kPods, "default", "p");
  EXPECT_TRUE(absl::IsUnavailable(got.status())) << got.status();
  EXPECT_NE(std::string(got.status().message()).find("127.0.0.1:1"), std::string::npos);
  EXPECT_EQ(sleeps, 2);
}

TEST_F(ClientTest, RateLimiterPacesRequests) {
  FakeClock clock;
  auto limited = NewClient(/*qps=*/20, /*burst=*/2, &clock);
  ASSERT_TRUE(fake_->Upsert("nodes", MakeNode("n")).ok());
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(limited->Get(kNodes, "", "n").ok());
  // Two from the burst, then one every 50 ms of (fake) time.
  auto sleeps = Sleeps();
  EXPECT_EQ(sleeps, std::vector<int64_t>(4, 50'000'000));
}

// Background requests (BackgroundRequests scope) leave half the burst to the others: a request on
// the scheduling path after a run of background ones does not wait (with one shared bucket it
// waited for all of them: 4 x 50 ms of debt).
TEST_F(ClientTest, BackgroundRequestsNeverDelayTheOthers) {
  FakeClock clock;
  auto limited = NewClient(/*qps=*/20, /*burst=*/4, &clock);
  ASSERT_TRUE(fake_->Upsert("nodes", MakeNode("n")).ok());
  {
    BackgroundRequests scope;
    EXPECT_TRUE(BackgroundRequests::Active());
    for (int i = 0; i < 6; ++i) ASSERT_TRUE(limited->Get(kNodes, "", "n").ok());
  }
  EXPECT_FALSE(BackgroundRequests::Active());
  // Two from the burst, then each waited for a token above the floor of 2 (50 ms at qps 20).
  EXPECT_EQ(Sleeps(), std::vector<int64_t>(4, 50'000'000));
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(limited->Get(kNodes, "", "n").ok());
  EXPECT_EQ(Sleeps().size(), 4u) << "a foreground request waited behind background ones";
  // Scopes nest: the inner one's end leaves the outer one in force.
  BackgroundRequests outer;
  { BackgroundRequests inner; }
  EXPECT_TRUE(BackgroundRequests::Active());
}

TEST_F(ClientTest, CreateEvent) {
  EventSpec ev;
  ev.involved_object = {{"kind", "Pod"}, {"namespace", "ns1"}, {"name", "p1"}, {"uid", "u1"}};
  ev.type = "Warning";
  ev.reason = "FilteringFailed";
  ev.message = "no node fits";
  ev.host = "sched-0";
  ASSERT_TRUE(client_->CreateEvent(ev).ok());
  auto events = fake_->List("events");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["metadata"]["namespace"], "ns1");
  EXPECT_EQ(events[0]["involvedObject"]["name"], "p1");
  EXPECT_EQ(events[0]["reason"], "FilteringFailed");
  EXPECT_EQ(events[0]["count"], 1);
  EXPECT_TRUE(ParseTimeMicros(events[0]["lastTimestamp"].get<std::string>()).ok());
}

// Collects watch events on a thread until stopped.
struct WatchRecorder {
  std::mutex mu;
  std::vector<std::pair<WatchEvent::Type, std::string>> events;  // type, name (or rv for bookmarks)
  Status result;
  std::atomic<bool> done{false};
  std::stop_source stop;
  std::thread thread;

  void Start(Client& c, const Resource& r, ListOptions opts) {
    thread = std::thread([this, &c, &r, opts] {
      result = c.Watch(
          r, "", opts,
          [this](WatchEvent& ev) {
            std::lock_guard<std::mutex> l(mu);
            const Json& md = ev.object["metadata"];
            events.emplace_back(ev.type, ev.type == WatchEvent::Type::kBookmark
                                             ? md.value("resourceVersion", "")
                                             : md.value("name", ""));
            return true;
          },
          stop.get_token());
      done = true;
    });
  }
  size_t Count(WatchEvent::Type t) {
    std::lock_guard<std::mutex> l(mu);
    return std::count_if(events.begin(), events.end(), [&](auto& e) { return e.first == t; });
  }
  std::vector<std::string> Names(WatchEvent::Type t) {
    std::lock_guard<std::mutex> l(mu);
    std::vector<std::string> out;
    for (auto& e : events)
      if (e.first == t) out.push_back(e.second);
    return out;
  }
  void Stop() {
    stop.request_stop();
    if (thread.joinable()) thread.join();
  }
  ~WatchRecorder() { Stop(); }
};

TEST_F(ClientTest, WatchStreamsChangesAndBookmarks) {
  ASSERT_TRUE(fake_->Upsert("pods", MakePod("default", "before")).ok());
  auto list = client_->List(kPods, "");
  ASSERT_TRUE(list.ok());
  ListOptions lo;
  lo.resource_version = (*list)["metadata"]["resourceVersion"];
  lo.field_selector = "spec.nodeName=node-1";
  WatchRecorder rec;
  rec.Start(*client_, kPods, lo);
  ASSERT_TRUE(Eventually([&] { return fake_->OpenWatches() == 1; }));
  ASSERT_TRUE(fake_->Upsert("pods", MakePod("default", "a", "node-1")).ok());  // ADDED
  ASSERT_TRUE(fake_->Upsert("pods", MakePod("default", "b")).ok());            // not on node-1
  ASSERT_TRUE(client_->Bind("default", "b", "", "node-1").ok());               // enters: ADDED
  auto a = MakePod("default", "a", "node-1", {{"x", "y"}});
  ASSERT_TRUE(fake_->Upsert("pods", a).ok());               // MODIFIED
  ASSERT_TRUE(fake_->Delete("pods", "default", "a").ok());  // DELETED
  ASSERT_TRUE(Eventually([&] {
    return rec.Count(WatchEvent::Type::kDeleted) == 1 && rec.Count(WatchEvent::Type::kBookmark) > 0;
  }));
  rec.Stop();
  EXPECT_TRUE(rec.result.ok()) << rec.result;
  EXPECT_EQ(rec.Names(WatchEvent::Type::kAdded), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(rec.Names(WatchEvent::Type::kModified), (std::vector<std::string>{"a"}));
  EXPECT_EQ(rec.Names(WatchEvent::Type::kDeleted), (std::vector<std::string>{"a"}));
  EXPECT_FALSE(rec.Names(WatchEvent::Type::kBookmark).back().empty());
}

TEST_F(ClientTest, WatchFromCompactedVersionIsGone) {
  auto first = fake_->Upsert("pods", MakePod("default", "a"));
  ASSERT_TRUE(first.ok());
  const std::string old_rv = (*first)["metadata"]["resourceVersion"];
  ASSERT_TRUE(fake_->Upsert("pods", MakePod("default", "b")).ok());
  fake_->Compact();
  ListOptions lo;
  lo.resource_version = old_rv;
  Status s = client_->Watch(kPods, "", lo, [](WatchEvent&) { return true; });
  EXPECT_TRUE(IsGone(s)) << s;
  EXPECT_NE(std::string(s.message()).find("too old resource version"), std::string::npos) << s;

  fake_->ForceGone(1);
  lo.resource_version = fake_->CurrentResourceVersion();
  EXPECT_TRUE(IsGone(client_->Watch(kPods, "", lo, [](WatchEvent&) { return true; })));
}

TEST_F(ClientTest, DroppedWatchIsUnavailableAndEndOfTimeoutIsOk) {
  ListOptions lo;
  lo.resource_version = fake_->CurrentResourceVersion();
  WatchRecorder rec;
  rec.Start(*client_, kNodes, lo);
  ASSERT_TRUE(Eventually([&] { return fake_->OpenWatches() == 1; }));
  fake_->DropWatches();
  ASSERT_TRUE(Eventually([&] { return rec.done.load(); }));
  rec.Stop();
  EXPECT_TRUE(absl::IsUnavailable(rec.result)) << rec.result;

  lo.timeout_seconds = 1;
  Status s = client_->Watch(kNodes, "", lo, [](WatchEvent&) { return true; });
  EXPECT_TRUE(s.ok()) << s;

  fake_->InjectErrors("GET", "/nodes$", 403, 1);
  s = client_->Watch(kNodes, "", lo, [](WatchEvent&) { return true; });
  EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
}

// Every response body is read up to ClientConfig::max_response_bytes: an endless body stops
// there with ResourceExhausted (not retried), instead of growing until the request timeout.
TEST_F(ClientTest, EndlessBodyStopsAtTheCap) {
  ClientConfig cfg;
  cfg.server = fake_->url();
  cfg.qps = 0;
  cfg.max_response_bytes = 1 << 20;
  auto capped = Client::Create(cfg);
  ASSERT_TRUE(capped.ok());
  struct Case {
    const char* name;
    std::function<Status()> call;
  };
  const Case cases[] = {
      {"list", [&] { return (*capped)->List(kPods, "").status(); }},
      {"list pages", [&] { return (*capped)->ListPages(kPods, "", {}, [](Json&) {}).status(); }},
      {"get", [&] { return (*capped)->Get(kPods, "default", "x").status(); }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    fake_->InjectEndlessBody("^/api/v1/", 1);
    const int64_t sent_before = fake_->EndlessBytesSent();
    const int64_t requests_before = (*capped)->requests_sent();
    const auto start = std::chrono::steady_clock::now();
    Status s = c.call();
    EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
    EXPECT_NE(std::string(s.message()).find("cap of 1048576 bytes"), std::string::npos) << s;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    EXPECT_EQ((*capped)->requests_sent() - requests_before, 1) << "not retried";
    // What the server pushed before the client hung up: the cap and socket buffers, not more.
    ASSERT_TRUE(Eventually([&] {
      const int64_t a = fake_->EndlessBytesSent();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return fake_->EndlessBytesSent() == a;
    }));
    EXPECT_LT(fake_->EndlessBytesSent() - sent_before, 32 << 20);
  }
  // Under the cap, the same client reads a list whole.
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(fake_->Upsert("pods", MakePod("default", "p" + std::to_string(i))).ok());
  auto list = (*capped)->List(kPods, "");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ((*list)["items"].size(), 3u);
}

TEST_F(ClientTest, WatchStopsWhenHandlerReturnsFalse) {
  ASSERT_TRUE(fake_->Upsert("nodes", MakeNode("n1")).ok());
  ASSERT_TRUE(fake_->Upsert("nodes", MakeNode("n2")).ok());
  int seen = 0;
  ListOptions lo;  // no resourceVersion: starts with the current objects as ADDED
  Status s = client_->Watch(kNodes, "", lo, [&](WatchEvent& ev) {
    EXPECT_EQ(ev.type, WatchEvent::Type::kAdded);
    return ++seen < 1;
  });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(seen, 1);
}

}  // namespace
}  // namespace hami::k8s
