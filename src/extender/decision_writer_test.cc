// The decision patch off /filter's path: DecisionWriter's ordering, hand-over and cancel rules,
// and Filter + Bind against a slow or failing fake API server (the decision is on the pod before
// the Binding, and a failed patch is sent again by /bind, never lost).
#include "extender/decision_writer.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "core/annotations.h"
#include "extender/extender.h"
#include "extender/metrics.h"
#include "k8s/testing/fake_apiserver.h"
#include "vendors/nvidia/annotations.h"

namespace hami::extender {
namespace {

using k8s::testing::FakeApiServer;
using std::chrono::milliseconds;

DecisionWrite Write(const std::string& uid, int n) {
  return {uid, "ml", "pod-" + uid, Json{{"n", n}}};
}

// A send function that records what it sent, fails the writes listed in `fail` (by their "n") and,
// while `hold` is set, blocks until it is cleared.
class Recorder {
 public:
  DecisionWriter::Send Send() {
    return [this](const DecisionWrite& w) {
      MutexLock l(mu_);
      ++entered_;
      cv_.NotifyAll();
      cv_.Wait(mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !hold_; });
      sent_.push_back(w.uid + ":" + std::to_string(w.patch["n"].get<int>()));
      if (fail_.count(w.patch["n"].get<int>())) return Unavailable("injected");
      return OkStatus();
    };
  }
  void Hold(bool hold) {
    {
      MutexLock l(mu_);
      hold_ = hold;
    }
    cv_.NotifyAll();
  }
  void Fail(int n) {
    MutexLock l(mu_);
    fail_.insert(n);
  }
  // Waits until `n` sends have started.
  void WaitEntered(int n) {
    MutexLock l(mu_);
    cv_.Wait(mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return entered_ >= n; });
  }
  std::vector<std::string> Sent() {
    MutexLock l(mu_);
    return sent_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<int> fail_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> sent_ ABSL_GUARDED_BY(mu_);
};

// Per pod the newest decision wins and writes never overtake each other: a write submitted while
// an older one is in flight goes after it, and one that replaces a queued write takes its place.
TEST(DecisionWriter, KeepsEachPodsOrderAndSendsOnlyTheNewestQueued) {
  Recorder rec;
  DecisionWriterOptions o;
  o.threads = 4;
  DecisionWriter w(rec.Send(), o);
  rec.Hold(true);
  w.Submit(Write("a", 1));
  rec.WaitEntered(1);       // in flight, held
  w.Submit(Write("a", 2));  // queued behind 1
  w.Submit(Write("a", 3));  // replaces 2
  w.Submit(Write("b", 4));
  rec.Hold(false);
  w.Flush();
  std::vector<std::string> a;
  for (const auto& s : rec.Sent())
    if (s[0] == 'a') a.push_back(s);
  EXPECT_EQ(a, (std::vector<std::string>{"a:1", "a:3"}));
  EXPECT_EQ(w.counts().sent, 3);
}

// The writer's threads run at DecisionWriterOptions::nice, so a woken writer does not take the
// core from the /filter that handed it the write.
TEST(DecisionWriter, ThreadsRunAtTheirNiceness) {
  for (int nice : {0, 10}) {
    std::atomic<int> seen{-100};
    DecisionWriterOptions o;
    o.threads = 1;
    o.nice = nice;
    DecisionWriter w(
        [&](const DecisionWrite&) {
          errno = 0;
          seen = getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()));
          return OkStatus();
        },
        o);
    w.Submit(Write("a", 1));
    w.Flush();
    // (At least: a test run under `nice` starts higher, and only root may lower it.)
    if (nice == 0)
      EXPECT_EQ(seen.load(), getpriority(PRIO_PROCESS, 0));
    else
      EXPECT_GE(seen.load(), nice);
  }
}

// What Await hands over, by how the pod's writes went.
TEST(DecisionWriter, AwaitTable) {
  struct Case {
    const char* name;
    std::vector<int> fail;  // the writes (by n) whose send fails
    std::vector<int> submit;
    bool cancel_before_send;
    bool hold;  // the send never returns within the wait
    DecisionWriter::Outcome::Kind want;
    int want_write;  // kFailed: the write handed back
  };
  const Case cases[] = {
      {"written", {}, {1}, false, false, DecisionWriter::Outcome::kWritten, 0},
      {"nothing submitted", {}, {}, false, false, DecisionWriter::Outcome::kWritten, 0},
      {"failed: handed back", {1}, {1}, false, false, DecisionWriter::Outcome::kFailed, 1},
      {"older failed, newer written",
       {1},
       {1, 2},
       false,
       false,
       DecisionWriter::Outcome::kWritten,
       0},
      {"newer failed", {2}, {1, 2}, false, false, DecisionWriter::Outcome::kFailed, 2},
      {"still in flight", {}, {1}, false, true, DecisionWriter::Outcome::kPending, 0},
      {"cancelled before it was sent", {1}, {1}, true, true, DecisionWriter::Outcome::kWritten, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Recorder rec;
    for (int n : c.fail) rec.Fail(n);
    DecisionWriterOptions o;
    o.threads = 1;
    DecisionWriter w(rec.Send(), o);
    if (c.hold) rec.Hold(true);
    if (c.cancel_before_send) {
      w.Submit(Write("other", 99));  // occupies the one thread (held)
      rec.WaitEntered(1);
    }
    for (int n : c.submit) {
      w.Submit(Write("p", n));
      if (!c.cancel_before_send && !c.hold) w.Flush();  // each one sent before the next
    }
    if (c.cancel_before_send) w.Cancel("p");
    DecisionWriter::Outcome out = w.Await("p", milliseconds(c.hold ? 50 : 5000));
    EXPECT_EQ(out.kind, c.want);
    if (c.want == DecisionWriter::Outcome::kFailed) {
      ASSERT_TRUE(out.write.has_value());
      EXPECT_EQ(out.write->patch["n"], c.want_write);
      EXPECT_FALSE(out.error.ok());
      // Handed over once: the caller owns it now.
      EXPECT_EQ(w.Await("p", milliseconds(10)).kind, DecisionWriter::Outcome::kWritten);
    }
    rec.Hold(false);
    w.Flush();
    if (c.cancel_before_send) {
      for (const auto& s : rec.Sent()) EXPECT_NE(s, "p:1") << "a cancelled write was sent";
    }
  }
}

// ---- Filter and Bind against the fake API server ----

// Node n1 with two 16000 MiB GPUs, and a pending pod asking 4000 MiB of one, as the API server
// stores them.
Json NodeN1() {
  const Json gpu = Json::parse(
      R"({"index": 0, "count": 4, "devmem": 16000, "devcore": 100, "type": "NVIDIA-T4",
          "health": true})");
  Json devs = {gpu, gpu};
  devs[0]["id"] = "g0";
  devs[1]["id"] = "g1";
  devs[1]["index"] = 1;
  Json node = Json::parse(R"({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})");
  node["metadata"]["annotations"]["hami.io/node-nvidia-register"] = devs.dump();
  return node;
}
Json PendingPod(const std::string& name) {
  Json pod = Json::parse(R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "ml"},
    "spec": {"schedulerName": "hami-scheduler", "containers": [{"name": "c", "image": "busybox",
      "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"}}}]}})");
  pod["metadata"]["name"] = name;
  return pod;
}

class DecisionPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Start().ok());
    ASSERT_TRUE(api_.Upsert("nodes", NodeN1()).ok());
    k8s::ClientConfig cfg;
    cfg.server = api_.url();
    cfg.qps = 0;
    k8s::ClientOptions co;
    co.sleep = [](int64_t) {};  // retries without waiting
    client_ = std::move(*k8s::Client::Create(cfg, co));
    sched_ = std::move(*scheduler::Scheduler::Create({}));
    state_ = std::make_unique<ClusterState>(*sched_, StateOptions{});
    state_->OnNode(NodeN1());
    ExtenderOptions eo;
    eo.success_events = false;
    eo.filter_failed_events = false;
    // The pod as the informer would have it: no API read on the request path.
    eo.pod_lookup = [this](const std::string& ns, const std::string& name) {
      MutexLock l(mu_);
      auto it = pods_.find(ns + "/" + name);
      return it == pods_.end() ? nullptr : it->second;
    };
    ext_ = std::make_unique<Extender>(*sched_, *state_, client_.get(), eo);
  }
  Json Create(const std::string& name) {
    auto p = api_.Upsert("pods", PendingPod(name));
    EXPECT_TRUE(p.ok());
    MutexLock l(mu_);
    pods_["ml/" + name] = std::make_shared<const Json>(*p);
    return *p;
  }
  ExtenderFilterResult Filter(const Json& pod) {
    ExtenderArgs a;
    a.pod = pod;
    a.node_names = std::vector<std::string>{"n1"};
    return ext_->Filter(a);
  }
  ExtenderBindingResult Bind(const Json& pod, const std::string& node) {
    return ext_->Bind({pod["metadata"]["name"], "ml", pod["metadata"]["uid"], node});
  }
  std::string Annotation(const std::string& name, const std::string& key) {
    auto p = api_.Get("pods", "ml", name);
    if (!p) return "";
    return (*p)["metadata"].value("annotations", Json::object()).value(key, "");
  }

  FakeApiServer api_;
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<scheduler::Scheduler> sched_;
  std::unique_ptr<ClusterState> state_;
  Mutex mu_;
  std::map<std::string, ExtenderOptions::LivePodRef> pods_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Extender> ext_;  // last: goes first
};

// A slow API server (300 ms a request): /filter answers before the decision patch is written, and
// /bind waits for it, so the pod carries its decision before it is bound (the PATCH precedes the
// Binding on the server).
TEST_F(DecisionPathTest, FilterAnswersBeforeThePatchAndBindFindsTheDecision) {
  const Json pod = Create("slow");
  api_.SetLatency(milliseconds(300));
  const auto t0 = std::chrono::steady_clock::now();
  const ExtenderFilterResult f = Filter(pod);
  const auto filter_ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(f.error, "");
  ASSERT_EQ(*f.node_names, std::vector<std::string>{"n1"});
  EXPECT_LT(filter_ms, 150) << "/filter waited for the decision patch";
  EXPECT_EQ(Annotation("slow", core::kVgpuNode), "") << "the patch was written within /filter";
  const ExtenderBindingResult b = Bind(pod, "n1");
  EXPECT_EQ(b.error, "");
  auto stored = api_.Get("pods", "ml", "slow");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ((*stored)["spec"].value("nodeName", ""), "n1");
  EXPECT_EQ(Annotation("slow", core::kVgpuNode), "n1");
  EXPECT_NE(Annotation("slow", vendors::nvidia::kNvidiaDevicesToAllocate), "");
  EXPECT_EQ(Annotation("slow", core::kBindPhase), core::kBindPhaseAllocating);
  int patch_at = -1, bind_at = -1, i = 0;
  for (const auto& r : api_.Requests()) {
    if (r.method == "PATCH" && r.path == "/api/v1/namespaces/ml/pods/slow") patch_at = i;
    if (r.method == "POST" && r.path == "/api/v1/namespaces/ml/pods/slow/binding") bind_at = i;
    ++i;
  }
  EXPECT_GE(patch_at, 0);
  EXPECT_GT(bind_at, patch_at) << "bound before the decision was on the pod";
  EXPECT_GT(ext_->counters().bind_wait_ns.load(), 0);
}

// A decision patch that fails in the background is not lost: /bind sends it again, and only when
// that fails too is the reservation given up (kube-scheduler filters the pod again).
TEST_F(DecisionPathTest, AFailedPatchIsSentAgainByBind) {
  struct Case {
    const char* name;
    int patch_failures;  // 422 (not retried by the client) on the pod's next PATCHes
    bool bound;
  };
  const Case cases[] = {
      {"first write fails, bind's succeeds", 1, true},
      {"both fail: the reservation goes", 2, false},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string name = "p" + std::to_string(n++);
    const Json pod = Create(name);
    api_.InjectErrors("PATCH", "/pods/" + name + "$", 422, c.patch_failures);
    const int64_t failures0 = ext_->counters().decision_write_failures.load();
    ASSERT_EQ(Filter(pod).error, "");
    ext_->FlushDecisions();
    EXPECT_EQ(ext_->counters().decision_write_failures.load() - failures0, 1);
    EXPECT_TRUE(state_->Find(pod["metadata"]["uid"]).has_value()) << "the decision was dropped";
    const ExtenderBindingResult b = Bind(pod, "n1");
    auto stored = api_.Get("pods", "ml", name);
    ASSERT_TRUE(stored.has_value());
    if (c.bound) {
      EXPECT_EQ(b.error, "");
      EXPECT_EQ((*stored)["spec"].value("nodeName", ""), "n1");
      EXPECT_EQ(Annotation(name, core::kVgpuNode), "n1");
      EXPECT_TRUE(state_->Find(pod["metadata"]["uid"]).has_value());
    } else {
      EXPECT_NE(b.error.find("cannot be written"), std::string::npos) << b.error;
      EXPECT_EQ((*stored)["spec"].value("nodeName", ""), "");
      EXPECT_FALSE(state_->Find(pod["metadata"]["uid"]).has_value());
    }
  }
  EXPECT_EQ(sched_->cache().pod_count(), 1u);  // the bound one only
  // The writer's two failures and /bind's one.
  const std::string text = RenderMetrics(*sched_, *state_, &ext_->counters());
  EXPECT_NE(text.find("hami_extender_decision_write_failures_total 3"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE hami_extender_bind_wait_seconds_total counter"), std::string::npos);
}

}  // namespace
}  // namespace hami::extender
