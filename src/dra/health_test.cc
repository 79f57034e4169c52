#include "dra/health.h"

#include <gtest/gtest.h>

#include <thread>

namespace hami::dra {
namespace {

std::vector<bool> Healthy(const HealthBoard& b) {
  std::vector<bool> out;
  for (const auto& e : b.Snapshot(nullptr)) out.push_back(e.healthy);
  return out;
}

TEST(HealthBoard, EventsMarkDevices) {
  HealthBoard b("node-a", {{"gpu-0", "GPU-0"}, {"gpu-1", "GPU-1"}});
  struct Step {
    const char* what;
    gpu::HealthEvent ev;
    bool changed;
    std::vector<bool> healthy;
  };
  const Step steps[] = {
      {"start: all healthy", {"GPU-9", false, 48, "x"}, false, {true, true}},
      {"Xid 48 on GPU-1",
       {"GPU-1", false, 48, "Xid 48: double bit ECC error"},
       true,
       {true, false}},
      {"the same again",
       {"GPU-1", false, 48, "Xid 48: double bit ECC error"},
       false,
       {true, false}},
      {"NVML lost: every device", {"", false, 0, "NVML: GPU is lost"}, true, {false, false}},
      {"GPU-0 recovers", {"GPU-0", true, 0, ""}, true, {true, false}},
  };
  for (const auto& s : steps) {
    uint64_t before = 0, after = 0;
    b.Snapshot(&before);
    EXPECT_EQ(b.Apply(s.ev), s.changed) << s.what;
    EXPECT_EQ(Healthy(b), s.healthy) << s.what;
    b.Snapshot(&after);
    EXPECT_EQ(after != before, s.changed) << s.what;
  }
  const auto entries = b.Snapshot(nullptr);
  EXPECT_EQ(entries[0].message, "");
  EXPECT_EQ(entries[1].message, "NVML: GPU is lost");
  EXPECT_GT(entries[1].updated_unix, 0);
}

TEST(HealthBoard, MessagesNameTheXidAndAreCut) {
  HealthBoard b("node-a", {{"gpu-0", "GPU-0"}});
  b.Apply({"GPU-0", false, 79, "fell off the bus"});
  EXPECT_EQ(b.Snapshot(nullptr)[0].message, "fell off the bus (Xid 79)");
  b.Apply({"GPU-0", false, 0, std::string(5000, 'x')});
  EXPECT_EQ(b.Snapshot(nullptr)[0].message.size(), 1024u);
  b.Apply({"GPU-0", false, 0, ""});
  EXPECT_EQ(b.Snapshot(nullptr)[0].message, "NVML reports the GPU failed");
}

TEST(HealthBoard, WaitersWakeOnChangeAndShutdown) {
  HealthBoard b("node-a", {{"gpu-0", "GPU-0"}});
  uint64_t v = 0;
  b.Snapshot(&v);
  EXPECT_EQ(b.WaitChange(v, std::chrono::milliseconds(20)), v) << "nothing changed: times out";
  std::thread t([&] { b.Apply({"GPU-0", false, 48, "x"}); });
  EXPECT_NE(b.WaitChange(v, std::chrono::seconds(10)), v);
  t.join();
  b.Snapshot(&v);
  std::thread s([&] { b.Shutdown(); });
  const auto start = std::chrono::steady_clock::now();
  b.WaitChange(v, std::chrono::seconds(10));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  s.join();
  EXPECT_TRUE(b.shut_down());
}

}  // namespace
}  // namespace hami::dra
