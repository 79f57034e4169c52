#include "monitor/server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include "monitor/testing/region_writer.h"

namespace hami::monitor {
namespace {

using testing::FakeContainerProcess;
using testing::TempDir;

TEST(ParseBindAddress, Table) {
  struct Case {
    std::string in;
    bool ok;
    std::string host;
    int port;
  };
  const Case cases[] = {
      {"0.0.0.0:9394", true, "0.0.0.0", 9394},
      {"127.0.0.1:0", true, "127.0.0.1", 0},
      {":9394", true, "0.0.0.0", 9394},
      {"[::1]:9394", true, "::1", 9394},
      {"9394", false, "", 0},
      {"host:", false, "", 0},
      {"host:99999", false, "", 0},
      {"host:-1", false, "", 0},
      {"host:12ab", false, "", 0},
  };
  for (const Case& c : cases) {
    std::string host;
    int port = -1;
    Status s = ParseBindAddress(c.in, &host, &port);
    EXPECT_EQ(s.ok(), c.ok) << c.in << ": " << s;
    if (c.ok) {
      EXPECT_EQ(host, c.host) << c.in;
      EXPECT_EQ(port, c.port) << c.in;
    } else {
      EXPECT_NE(s.message().find("--metrics-bind"), absl::string_view::npos) << c.in;
    }
  }
}

TEST(MonitorServer, ServesMetricsAndHealthAndReleasesFeedbackOnStop) {
  TempDir root;
  FakeClock clock;
  StaticTelemetry telemetry;
  StaticPodDirectory pods;
  pods.Set("uid-1", {"ns", "pod"});
  auto p = FakeContainerProcess::Attach(root.path(), "uid-1", "main");
  ASSERT_TRUE(p.ok());
  (*p)->Device({"GPU-aaa", 1 << 30, 50, 0});
  RegionStore store({root.path(), 300, 16}, clock);
  Exporter exporter({"node-1", {}, 1000}, store, pods, telemetry, clock);
  FeedbackLoop feedback(store, telemetry, clock, 5'000'000'000);
  // Long periods: each loop runs once at start, which is all this test needs.
  MonitorServer server({"127.0.0.1", 0, 3'600'000, 3'600'000}, exporter, &feedback, store, pods);
  auto port = server.Start();
  ASSERT_TRUE(port.ok()) << port.status();
  ASSERT_GT(*port, 0);

  httplib::Client client("127.0.0.1", *port);
  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->get_header_value("Content-Type").find("text/plain; version=0.0.4"),
            std::string::npos);
  EXPECT_NE(
      metrics->body.find("hami_vgpu_memory_limit_bytes{zone=\"vGPU\",namespace=\"ns\",pod=\"pod\""),
      std::string::npos)
      << metrics->body;
  EXPECT_EQ(client.Get("/nope")->status, 404);

  // The lone idle container: the feedback loop's first tick switched limiting off...
  for (int i = 0; i < 500 && (*p)->region()->hdr.utilization_switch != 0; ++i) usleep(10'000);
  EXPECT_EQ((*p)->region()->hdr.utilization_switch, 0);
  // ... and stopping the monitor puts libvgpu's safe default back.
  server.Stop();
  EXPECT_EQ((*p)->region()->hdr.utilization_switch, 1);
  EXPECT_EQ((*p)->region()->hdr.recent_kernel, 0);
}

}  // namespace
}  // namespace hami::monitor
