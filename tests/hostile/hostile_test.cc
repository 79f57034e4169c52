// Hostile-client suite: `hami scheduler`, as deployed (extender on its own plain
// loopback listener, webhook listener over TLS), attacked over loopback by clients that break the
// rules. Every case counts inputs tried, crashes (the process died), hangs (no answer within kHang)
// and wrong answers (any other status than the documented one); the figures are printed as "HOSTILE
// ..." lines and kept in docs/security.md. Latencies are reported, not asserted: the assertions are
// "answered" and "no crash, no hang, no wrong answer".
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "http/testing/raw_client.h"
#include "http/testing/self_signed.h"
#include "http/testing/tls_client.h"
#include "k8s/testing/fake_apiserver.h"
#include "tests/testing/child.h"
#include "vendors/nvidia/annotations.h"

namespace hami::hostile {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Json = nlohmann::json;
using http::testing::ConnectLoopback;
using http::testing::RawResponse;
using http::testing::ReadResponse;
using http::testing::SendAll;
using http::testing::TlsExchange;
using testprocess::Child;
using Clock = std::chrono::steady_clock;

constexpr auto kHang = 5000ms;  // no answer within this = a hang
constexpr char kNode[] = "node-1";

struct Tally {
  int tried = 0, crashes = 0, hangs = 0, wrong = 0;
  double max_ms = 0;
  std::string note;
};
std::map<std::string, Tally>& Tallies() {
  static auto* t = new std::map<std::string, Tally>();
  return *t;
}

std::string ReadText(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Peak and current resident memory of a process, in MiB.
int64_t StatusKb(pid_t pid, const std::string& key) {
  std::istringstream in(ReadText("/proc/" + std::to_string(pid) + "/status"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return std::atoll(line.c_str() + key.size() + 1);
  return -1;
}

std::string Post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: hami\r\nContent-Type: application/json\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}
const std::string kHealthz = "GET /healthz HTTP/1.1\r\nHost: hami\r\n\r\n";

class Hostile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rlimit rl{};  // 2 x 2000 idle client sockets plus the server's in one test
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      ::setrlimit(RLIMIT_NOFILE, &rl);
    }
    char tmpl[] = "/tmp/hami-hostile-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = new std::string(tmpl);
    api_ = new k8s::testing::FakeApiServer();
    ASSERT_TRUE(api_->Start().ok());
    Json node = {
        {"apiVersion", "v1"},
        {"kind", "Node"},
        {"metadata",
         {{"name", kNode},
          {"annotations",
           {{vendors::nvidia::kNodeNvidiaRegister,
             R"([{"id":"GPU-a","count":4,"devmem":16000,"devcore":100,"type":"NVIDIA-T4","health":true}])"}}}}},
        {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
    ASSERT_TRUE(api_->Upsert("nodes", node).ok());
    for (int i = 0; i < 8; ++i) {
      Json pod = {
          {"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", "p" + std::to_string(i)}, {"namespace", "default"}}},
          {"spec",
           {{"schedulerName", "hami-scheduler"},
            {"containers",
             {{{"name", "c"},
               {"image", "cuda"},
               {"resources",
                {{"limits", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}}}}}}}}}};
      auto stored = api_->Upsert("pods", pod);
      ASSERT_TRUE(stored.ok());
      pods_.push_back(*stored);
    }
    const std::string kubeconfig = *dir_ + "/kubeconfig";
    std::ofstream(kubeconfig)
        << "apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: c\n  cluster:\n"
           "    server: "
        << api_->url()
        << "\nusers:\n- name: u\n  user:\n    token: t\n"
           "contexts:\n- name: t\n  context:\n    cluster: c\n    user: u\n";
    cert_ = *dir_ + "/tls.crt";
    key_ = *dir_ + "/tls.key";
    ASSERT_TRUE(http::testing::WriteSelfSigned("first", cert_, key_));
    extender_port_ = http::testing::FreeLoopbackPort();
    webhook_port_ = http::testing::FreeLoopbackPort();
    scheduler_ = Start("scheduler", {"--cert-file", cert_, "--key-file", key_}).release();
    ASSERT_NE(scheduler_, nullptr);
    bool up = false;
    for (int i = 0; i < 600 && !up; ++i) {
      up = http::testing::Exchange(extender_port_, kHealthz, 1000ms).status == 200 &&
           TlsExchange(webhook_port_, kHealthz, 1000ms).status == 200;
      if (!up) std::this_thread::sleep_for(50ms);
    }
    ASSERT_TRUE(up) << ReadText(scheduler_->log());
  }

  static void TearDownTestSuite() {
    if (scheduler_) {
      scheduler_->Stop();
      delete scheduler_;
      scheduler_ = nullptr;
    }
    delete api_;
    for (const auto& [name, t] : Tallies())
      std::printf("HOSTILE %-28s tried=%-5d crashes=%d hangs=%d wrong=%d max_ms=%.1f %s\n",
                  name.c_str(), t.tried, t.crashes, t.hangs, t.wrong, t.max_ms, t.note.c_str());
    std::error_code ec;
    fs::remove_all(*dir_, ec);
  }

  // `hami scheduler` with the suite's listeners and `extra` flags.
  static std::unique_ptr<Child> Start(const std::string& name,
                                      const std::vector<std::string>& extra, int extender_port = 0,
                                      int webhook_port = 0) {
    std::vector<std::string> argv = {
        HOSTILE_HAMI,
        "scheduler",
        "--kubeconfig",
        *dir_ + "/kubeconfig",
        "--extender-bind",
        "127.0.0.1:" + std::to_string(extender_port ? extender_port : extender_port_),
        "--http-bind",
        "127.0.0.1:" + std::to_string(webhook_port ? webhook_port : webhook_port_),
        "--metrics-bind",
        "",
        "--leader-elect=false",
        "--threads",
        "4",
        "--log-level",
        "info"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return Child::Start(name, argv, {"PATH=/usr/bin:/bin"}, *dir_ + "/" + name + ".log", false);
  }

  // Records one answer of case `name`: crash (process gone), hang (no answer), wrong (status).
  static void Expect(const std::string& name, const RawResponse& r, int want, double ms = 0) {
    Tally& t = Tallies()[name];
    t.tried++;
    t.max_ms = std::max(t.max_ms, ms);
    if (!scheduler_->Running()) {
      t.crashes++;
    } else if (r.status == 0) {
      t.hangs++;
    } else if (r.status != want) {
      t.wrong++;
      ADD_FAILURE() << name << ": HTTP " << r.status << " (want " << want
                    << "): " << r.body.substr(0, 300);
    }
  }
  static void ExpectClean(const std::string& name) {
    const Tally& t = Tallies()[name];
    EXPECT_EQ(t.crashes, 0) << name << "\n" << ReadText(scheduler_->log());
    EXPECT_EQ(t.hangs, 0) << name << "\n" << ReadText(scheduler_->log());
    EXPECT_EQ(t.wrong, 0) << name;
    EXPECT_GT(t.tried, 0) << name;
  }

  static std::string FilterBody(int i) {
    return Json{{"Pod", pods_[static_cast<size_t>(i) % pods_.size()]},
                {"Nodes", nullptr},
                {"NodeNames", {kNode}}}
        .dump();
  }
  static std::string BindBody(int i) {
    const Json& p = pods_[static_cast<size_t>(i) % pods_.size()];
    return Json{{"PodName", p["metadata"]["name"]},
                {"PodNamespace", "default"},
                {"PodUID", p["metadata"]["uid"]},
                {"Node", kNode}}
        .dump();
  }
  static std::string PreemptBody(int i) {
    const Json& p = pods_[static_cast<size_t>(i) % pods_.size()];
    return Json{{"Pod", p},
                {"NodeNameToVictims", nullptr},
                {"NodeNameToMetaVictims", {{kNode, {{"Pods", {{{"UID", "gone"}}}}}}}}}
        .dump();
  }
  static std::string Review(const Json& object) {
    return Json{{"apiVersion", "admission.k8s.io/v1"},
                {"kind", "AdmissionReview"},
                {"request",
                 {{"uid", "u1"},
                  {"namespace", "default"},
                  {"operation", "CREATE"},
                  {"kind", {{"kind", "Pod"}}},
                  {"object", object}}}}
        .dump();
  }

  // The four endpoints a stalled server would starve, each timed; recorded under `name`.
  static void ProbeAll(const std::string& name) {
    auto timed = [&](auto&& call, int want) {
      const auto t0 = Clock::now();
      RawResponse r = call();
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      Expect(name, r, want, r.status ? ms : 0);
    };
    for (int i = 0; i < 3; ++i) {
      timed([] { return http::testing::Exchange(extender_port_, kHealthz, kHang); }, 200);
      timed(
          [i] {
            return http::testing::Exchange(extender_port_, Post("/filter", FilterBody(i)), kHang);
          },
          200);
      timed(
          [i] {
            return http::testing::Exchange(extender_port_, Post("/bind", BindBody(i)), kHang);
          },
          200);
      timed([] { return TlsExchange(webhook_port_, kHealthz, kHang); }, 200);
      timed([] { return TlsExchange(webhook_port_, Post("/webhook", Review(pods_[0])), kHang); },
            200);
    }
  }

  static inline std::string* dir_ = nullptr;
  static inline k8s::testing::FakeApiServer* api_ = nullptr;
  static inline std::vector<Json> pods_;
  static inline Child* scheduler_ = nullptr;
  static inline int extender_port_ = 0, webhook_port_ = 0;
  static inline std::string cert_, key_;
};

std::string DeepObjects(int n) {
  std::string s;
  s.reserve(static_cast<size_t>(n) * 7);
  for (int i = 0; i < n; ++i) s += "{\"a\":";
  return s + "1" + std::string(static_cast<size_t>(n), '}');
}
std::string DeepArrays(int n) {
  return std::string(static_cast<size_t>(n), '[') + std::string(static_cast<size_t>(n), ']');
}

TEST_F(Hostile, ListenerSplit) {
  // The webhook listener does not serve the extender, and the extender listener is plain HTTP.
  Expect("listener split", TlsExchange(webhook_port_, Post("/filter", FilterBody(0)), kHang), 404);
  Expect("listener split", TlsExchange(webhook_port_, Post("/bind", BindBody(0)), kHang), 404);
  Expect("listener split", TlsExchange(webhook_port_, Post("/preempt", PreemptBody(0)), kHang),
         404);
  Expect("listener split",
         http::testing::Exchange(extender_port_, Post("/webhook", Review(pods_[0])), kHang), 404);
  Expect("listener split",
         http::testing::Exchange(extender_port_, "GET /metrics HTTP/1.1\r\n\r\n", kHang), 404);
  ExpectClean("listener split");
}

// /refit on the webhook listener (docs/security.md, "NUMA refit"): whatever a client sends, it is
// refused before any state is read or changed, and the scheduler keeps serving.
TEST_F(Hostile, Refit) {
  const std::string ok_body =
      R"({"podUID":"u-1","podNamespace":"default","podName":"p0","nodeName":")" +
      std::string(kNode) +
      R"(","containerIndex":0,"deviceType":"NVIDIA","allowedDeviceUUIDs":["GPU-a"]})";
  // Not on the extender listener.
  Expect("refit", http::testing::Exchange(extender_port_, Post("/refit", ok_body), kHang), 404);
  // No credentials, a scheme other than Bearer, a token the API server does not accept.
  Expect("refit", TlsExchange(webhook_port_, Post("/refit", ok_body), kHang), 401);
  Expect("refit",
         TlsExchange(webhook_port_,
                     Post("/refit", ok_body, "Authorization: Basic dXNlcjpwYXNz\r\n"), kHang),
         401);
  Expect("refit",
         TlsExchange(webhook_port_, Post("/refit", ok_body, "Authorization: Bearer forged\r\n"),
                     kHang),
         401);
  // Two Authorization headers: ambiguous, none counts.
  Expect(
      "refit",
      TlsExchange(webhook_port_,
                  Post("/refit", ok_body, "Authorization: Bearer a\r\nAuthorization: Bearer b\r\n"),
                  kHang),
      401);
  // Bodies: empty, garbage, wrong types, names that would change a URL, an oversized allowed set,
  // deep nesting, more than the route's 64 KiB.
  Expect("refit", TlsExchange(webhook_port_, Post("/refit", ""), kHang), 400);
  for (const std::string& b :
       {std::string("{not-json"), std::string("[]"), std::string("null"),
        std::string(R"({"podUID":"u","podNamespace":"../kube-system","podName":"p","nodeName":"n",)"
                    R"("deviceType":"NVIDIA","allowedDeviceUUIDs":["GPU-a"]})"),
        std::string(
            R"({"podUID":"u","podNamespace":"d","podName":"p","nodeName":"n",)"
            R"("containerIndex":"0","deviceType":"NVIDIA","allowedDeviceUUIDs":["GPU-a"]})"),
        std::string(R"({"podUID":"u","podNamespace":"d","podName":"p","nodeName":"n",)"
                    R"("deviceType":"NVIDIA","allowedDeviceUUIDs":["GPU-a,NVIDIA,1,1:"]})")})
    Expect("refit", TlsExchange(webhook_port_, Post("/refit", b), kHang), 200);
  Expect("refit", TlsExchange(webhook_port_, Post("/refit", DeepArrays(100000)), kHang), 400);
  Expect("refit",
         TlsExchange(webhook_port_, Post("/refit", std::string(70u << 10, ' ') + ok_body), kHang),
         413);
  ExpectClean("refit");
}

TEST_F(Hostile, DeepNesting) {
  const std::string pod = pods_[0].dump();
  const std::string deep_o = DeepObjects(100000), deep_a = DeepArrays(100000);
  const std::vector<std::string> filter_bodies = {
      "{\"Pod\":{\"metadata\":{\"name\":\"x\"},\"spec\":" + deep_o + "},\"NodeNames\":[\"n\"]}",
      "{\"Pod\":{\"metadata\":" + deep_a + "},\"NodeNames\":[\"n\"]}",
      "{\"Pod\":" + pod +
          ",\"Nodes\":{\"items\":[{\"metadata\":{\"name\":\"n\"},\"spec\":" + deep_o + "}]}}",
      "{\"Pod\":" + pod + ",\"Nodes\":{\"items\":" + deep_a + "}}",
      "{\"Pod\":" + pod + ",\"NodeNames\":" + deep_a + "}",
      "{\"Pod\":" + pod + ",\"Extra\":" + deep_o + "}",
      deep_a,
      deep_o,
  };
  for (const auto& b : filter_bodies)
    Expect("deep nesting /filter",
           http::testing::Exchange(extender_port_, Post("/filter", b), kHang), 400);
  for (const auto& b : {deep_a, "{\"PodName\":" + deep_o + "}"})
    Expect("deep nesting /bind", http::testing::Exchange(extender_port_, Post("/bind", b), kHang),
           400);
  Json pod_obj = pods_[0];
  for (const auto& inner : {deep_a, deep_o}) {
    const std::string body =
        "{\"apiVersion\":\"admission.k8s.io/"
        "v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\","
        "\"object\":{\"metadata\":{\"labels\":" +
        inner + "}}}}";
    Expect("deep nesting /webhook", TlsExchange(webhook_port_, Post("/webhook", body), kHang), 400);
    Expect("deep nesting /webhook", TlsExchange(webhook_port_, Post("/webhook", inner), kHang),
           400);
  }
  // Just under the limit is an ordinary request.
  Expect("deep nesting /filter",
         http::testing::Exchange(extender_port_,
                                 Post("/filter", "{\"Pod\":" + pod.substr(0, pod.size() - 1) +
                                                     ",\"x\":" + DeepArrays(990) +
                                                     "},\"NodeNames\":[\"" + kNode + "\"]}"),
                                 kHang),
         200);
  for (const auto& b : {deep_a, "{\"Pod\":" + pod + ",\"NodeNameToMetaVictims\":" + deep_o + "}"})
    Expect("deep nesting /preempt",
           http::testing::Exchange(extender_port_, Post("/preempt", b), kHang), 400);
  // A well-formed preemption request is answered (here: nothing to preempt) once the informers
  // have synced (before, it is a 503 kube-scheduler retries).
  for (int i = 0; i < 200; ++i) {
    if (TlsExchange(webhook_port_, "GET /readyz HTTP/1.1\r\nHost: hami\r\n\r\n", kHang).status ==
        200)
      break;
    std::this_thread::sleep_for(50ms);
  }
  Expect("deep nesting /preempt",
         http::testing::Exchange(extender_port_, Post("/preempt", PreemptBody(0)), kHang), 200);
  ExpectClean("deep nesting /filter");
  ExpectClean("deep nesting /bind");
  ExpectClean("deep nesting /preempt");
  ExpectClean("deep nesting /webhook");
}

TEST_F(Hostile, BodyCapsAndEncodings) {
  // Content-Length over the 8 MiB cap: refused from the header.
  for (const char* path : {"/filter", "/bind", "/preempt"})
    Expect(
        "oversized content-length",
        http::testing::Exchange(
            extender_port_,
            std::string("POST ") + path + " HTTP/1.1\r\nContent-Length: 104857600\r\n\r\n", kHang),
        413);
  Expect("oversized content-length",
         TlsExchange(webhook_port_, "POST /webhook HTTP/1.1\r\nContent-Length: 104857600\r\n\r\n",
                     kHang),
         413);
  // Chunked past the cap: up to 100 MiB offered in 64 KiB chunks; the answer must come before the
  // end.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd = ConnectLoopback(extender_port_);
    std::string carry;
    RawResponse r;
    bool answered = false;
    SendAll(fd, "POST /filter HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
    const std::string chunk = "10000\r\n" + std::string(0x10000, '[') + "\r\n";
    int64_t sent = 0;
    for (; sent < (100 << 20) && !answered; sent += 0x10000) {
      if (!SendAll(fd, chunk)) break;
      answered = ReadResponse(fd, &carry, &r, 1ms);
    }
    if (!answered) answered = ReadResponse(fd, &carry, &r, kHang);
    Expect("oversized chunked", r, 413);
    Tallies()["oversized chunked"].note =
        "refused after " + std::to_string(sent >> 20) + " MiB of 100 offered";
    ::close(fd);
  }
  // Compressed bodies are refused unread, whatever they would expand to.
  std::string bomb = "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03";
  bomb += std::string(1 << 20, '\0');
  for (const char* enc : {"gzip", "deflate", "br", "GZIP", "x-gzip"}) {
    Expect("gzip bomb",
           http::testing::Exchange(
               extender_port_,
               Post("/filter", bomb, std::string("Content-Encoding: ") + enc + "\r\n"), kHang),
           415);
    Expect("gzip bomb",
           TlsExchange(webhook_port_,
                       Post("/webhook", bomb, std::string("Content-Encoding: ") + enc + "\r\n"),
                       kHang),
           415);
  }
  Expect("gzip bomb",
         http::testing::Exchange(
             extender_port_,
             "POST /filter HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", kHang),
         501);
  ExpectClean("oversized content-length");
  ExpectClean("oversized chunked");
  ExpectClean("gzip bomb");
}

TEST_F(Hostile, EightMiBOfBrackets) {
  const std::string body(8u << 20, '[');
  const int64_t rss0 = StatusKb(scheduler_->pid(), "VmRSS");
  int64_t peak = 0;
  for (int i = 0; i < 5; ++i) {
    Expect("8 MiB of [",
           http::testing::Exchange(extender_port_,
                                   Post("/filter", body.substr(0, body.size() - 300)), kHang),
           400);
    peak = std::max(peak, StatusKb(scheduler_->pid(), "VmRSS"));
  }
  Expect("8 MiB of [",
         TlsExchange(webhook_port_, Post("/webhook", body.substr(0, body.size() - 300)), kHang),
         400);
  peak = std::max(peak, StatusKb(scheduler_->pid(), "VmRSS"));
  const int64_t hwm = StatusKb(scheduler_->pid(), "VmHWM");
  Tallies()["8 MiB of ["].note = "RSS before " + std::to_string(rss0 >> 10) +
                                 " MiB, highest after " + std::to_string(peak >> 10) +
                                 " MiB, process peak " + std::to_string(hwm >> 10) + " MiB";
  ExpectClean("8 MiB of [");
  EXPECT_LT(peak - rss0, 128 << 10) << "KiB grown";
}

TEST_F(Hostile, SlowDripClients) {
  // 64 per listener: half drip a header, half a body, one byte per 100 ms, for the whole probe.
  std::vector<int> fds;
  std::vector<std::string> scripts;
  // On the TLS listener the drip is a handshake record that never completes.
  for (int port : {extender_port_, webhook_port_})
    for (int i = 0; i < 64; ++i) {
      fds.push_back(ConnectLoopback(port));
      if (port == webhook_port_)
        scripts.push_back(std::string("\x16\x03\x01\x02\x00", 5) + std::string(195, 'A'));
      else
        scripts.push_back(
            i % 2
                ? "POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Pad: " +
                      std::string(150, 'a')
                : "POST /filter HTTP/1.1\r\nContent-Length: 400\r\n\r\n" + std::string(400, ' '));
    }
  std::atomic<bool> stop{false};
  std::thread drip([&] {
    for (size_t pos = 0; !stop && pos < 200; ++pos) {
      for (size_t i = 0; i < fds.size(); ++i)
        if (fds[i] >= 0 && pos < scripts[i].size()) SendAll(fds[i], scripts[i].substr(pos, 1));
      std::this_thread::sleep_for(100ms);
    }
  });
  std::this_thread::sleep_for(500ms);
  ProbeAll("slow-drip x64 per listener");
  stop = true;
  drip.join();
  for (int fd : fds) http::testing::ResetClose(fd);
  ExpectClean("slow-drip x64 per listener");
}

TEST_F(Hostile, TwoThousandIdleConnections) {
  std::vector<int> fds;
  for (int port : {extender_port_, webhook_port_})
    for (int i = 0; i < 2000; ++i) fds.push_back(ConnectLoopback(port));
  const int opened =
      static_cast<int>(std::count_if(fds.begin(), fds.end(), [](int fd) { return fd >= 0; }));
  std::this_thread::sleep_for(500ms);
  ProbeAll("2000 idle per listener");
  Tallies()["2000 idle per listener"].note = std::to_string(opened) + " idle sockets open";
  for (int fd : fds) http::testing::ResetClose(fd);
  ExpectClean("2000 idle per listener");
}

TEST_F(Hostile, PipelinedFifty) {
  const int fd = ConnectLoopback(extender_port_);
  std::string burst;
  for (int i = 0; i < 50; ++i) burst += i % 2 ? kHealthz : Post("/filter", FilterBody(i));
  ASSERT_TRUE(SendAll(fd, burst));
  std::string carry;
  for (int i = 0; i < 50; ++i) {
    RawResponse r;
    ReadResponse(fd, &carry, &r, kHang);
    const bool right_kind = i % 2 ? r.body == "ok" : r.body.find("\"Error\"") != std::string::npos;
    Expect("pipelining x50", r, right_kind ? 200 : -1);
  }
  ::close(fd);
  ExpectClean("pipelining x50");
}

TEST_F(Hostile, GarbageAndHalfOpen) {
  const std::vector<std::string> garbage = {
      "\r\n\r\n",
      "GET\r\n\r\n",
      "GET / HTTP/9.9\r\n\r\n",
      std::string("\0\0\0\0\0\0\0\0\r\n\r\n", 12),
      "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage-client-hello\r\n\r\n",
      "POST /filter HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
      "POST /filter HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
      "POST /filter HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
      "POST /filter HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      "POST /filter HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzzzz\r\n",
      "GET /healthz HTTP/1.1\r\nNo colon here\r\n\r\n",
      "GET /" + std::string(100000, 'a') + " HTTP/1.1\r\n\r\n",
      "GET /healthz HTTP/1.1\r\nX: " + std::string(100000, 'b') + "\r\n\r\n",
      "G\xff\xfeT / HTTP/1.1\r\n\r\n",
  };
  for (const auto& g : garbage) {
    RawResponse r = http::testing::Exchange(extender_port_, g, kHang);
    Expect("garbage request lines", r, r.status >= 400 && r.status < 500 ? r.status : 400);
  }
  // Plain HTTP to the TLS listener, and half-open clients: a partial request, then FIN.
  {
    const int fd = ConnectLoopback(webhook_port_);
    SendAll(fd, kHealthz);
    RawResponse r;
    r.status = http::testing::WaitClosed(fd, kHang) ? 400 : 0;  // closed = refused (no answer owed)
    Expect("garbage request lines", r, 400);
    ::close(fd);
  }
  for (const std::string& partial :
       {std::string("GET /heal"), Post("/filter", "{\"Pod\":{}}").substr(0, 70)}) {
    const int fd = ConnectLoopback(extender_port_);
    SendAll(fd, partial);
    ::shutdown(fd, SHUT_WR);
    std::string carry;
    RawResponse r;
    const bool got = ReadResponse(fd, &carry, &r, kHang);
    if (!got && http::testing::WaitClosed(fd, 1ms))
      r.status = 400;  // closed without an answer: refused
    Expect("half-open", r, 400);
    ::close(fd);
  }
  // The server is still whole.
  Expect("garbage request lines", http::testing::Exchange(extender_port_, kHealthz, kHang), 200);
  ExpectClean("garbage request lines");
  ExpectClean("half-open");
}

TEST_F(Hostile, TlsWeakKeyReloadKeepsTheOldPair) {
  std::string cn;
  Expect("tls weak-key reload", TlsExchange(webhook_port_, kHealthz, kHang, &cn), 200);
  EXPECT_EQ(cn, "first");
  ASSERT_TRUE(http::testing::WriteSelfSigned("weak", cert_, key_, "RSA:1024"));
  bool logged = false;
  for (int i = 0; i < 200 && !logged; ++i) {
    logged = ReadText(scheduler_->log()).find("TLS certificate not reloaded") != std::string::npos;
    if (!logged) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(logged) << ReadText(scheduler_->log());
  for (int i = 0; i < 5; ++i) {
    cn.clear();
    RawResponse r = TlsExchange(webhook_port_, kHealthz, kHang, &cn);
    if (cn != "first") r.status = -1;
    Expect("tls weak-key reload", r, 200);
  }
  ASSERT_TRUE(http::testing::WriteSelfSigned("first", cert_, key_));  // restore for later tests
  ExpectClean("tls weak-key reload");
}

TEST_F(Hostile, TlsBadFilesFailAtStart) {
  const std::string weak_c = *dir_ + "/weak.crt", weak_k = *dir_ + "/weak.key";
  const std::string enc_c = *dir_ + "/enc.crt", enc_k = *dir_ + "/enc.key";
  ASSERT_TRUE(http::testing::WriteSelfSigned("weak", weak_c, weak_k, "RSA:1024"));
  ASSERT_TRUE(http::testing::WriteSelfSigned("enc", enc_c, enc_k, "P-256", "secret"));
  struct Case {
    const char* name;
    std::string cert, key;
    const char* words;
  };
  const Case cases[] = {{"rsa1024", weak_c, weak_k, "RSA key of 1024 bits"},
                        {"devzero", "/dev/zero", weak_k, "not a regular file"},
                        {"encrypted", enc_c, enc_k, "encrypted"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto child = Start(std::string("bad-") + c.name, {"--cert-file", c.cert, "--key-file", c.key},
                       http::testing::FreeLoopbackPort(), http::testing::FreeLoopbackPort());
    ASSERT_NE(child, nullptr);
    RawResponse r;
    if (child->WaitExit(10s))
      r.status = WIFEXITED(child->status()) && WEXITSTATUS(child->status()) != 0 ? 1 : -1;
    const std::string log = ReadText(child->log());
    if (log.find(c.words) == std::string::npos) r.status = -1;
    Tally& t = Tallies()["tls bad files at start"];
    t.tried++;
    if (r.status == 0) t.hangs++;
    if (r.status < 0) t.wrong++;
    EXPECT_EQ(r.status, 1) << log;
  }
}

}  // namespace
}  // namespace hami::hostile
