#include "monitor/region_reader.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "monitor/testing/region_writer.h"
#include "vgpu/shared_region.h"

namespace hami::monitor {
namespace {

using testing::ChildProcess;
using testing::FakeContainerProcess;
using testing::FakeDevice;
using testing::TempDir;

constexpr uint64_t kMiB = 1ull << 20;

TEST(RegionReader, ReadsWhatLibvgpuWrote) {
  TempDir root;
  auto a = FakeContainerProcess::Attach(root.path(), "uid1", "main", VGPU_POLICY_FORCE, 0);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = FakeContainerProcess::Attach(root.path(), "uid1", "main", VGPU_POLICY_FORCE, 0);
  ASSERT_TRUE(b.ok()) << b.status();
  int e0 = (*a)->Device({"GPU-aaa", 3000 * kMiB, 30, 0});
  int e1 = (*a)->Device({"GPU-bbb", 1000 * kMiB, 100, 1});
  ASSERT_EQ(e0, 0);
  ASSERT_EQ(e1, 1);
  ASSERT_EQ((*b)->Device({"GPU-aaa", 3000 * kMiB, 30, 0}), 0);
  ASSERT_EQ((*a)->Reserve(e0, 100 * kMiB), 0);
  ASSERT_EQ((*b)->Reserve(e0, 250 * kMiB), 0);
  ASSERT_EQ((*b)->Reserve(e1, 7 * kMiB), 0);
  ASSERT_EQ((*b)->Reserve(e1, 2000 * kMiB), 1);  // over the limit: nothing charged
  (*a)->StampLaunch(e0, 123456789, 5000, 4321);

  auto r = MappedRegion::Open((*a)->path());
  ASSERT_TRUE(r.ok()) << r.status();
  auto s = (*r)->Snapshot();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->policy, VGPU_POLICY_FORCE);
  EXPECT_EQ(s->priority, 0);
  EXPECT_EQ(s->utilization_switch, 1);  // libvgpu's initial value
  ASSERT_EQ(s->processes.size(), 2u);
  EXPECT_EQ(s->processes[0].pid, static_cast<uint32_t>(getpid()));
  EXPECT_EQ(s->dead_slots, 0);
  ASSERT_EQ(s->devices.size(), 2u);
  EXPECT_EQ(s->devices[0].uuid, "GPU-aaa");
  EXPECT_EQ(s->devices[0].limit_bytes, 3000 * kMiB);
  EXPECT_EQ(s->devices[0].used_bytes, 350 * kMiB);
  EXPECT_EQ(s->devices[0].cached_used_bytes, 350 * kMiB);
  EXPECT_EQ(s->devices[0].sm_limit_pct, 30u);
  EXPECT_EQ(s->devices[0].last_launch_ns, 123456789u);
  EXPECT_EQ(s->devices[0].throttled_ns, 5000u);
  EXPECT_EQ(s->devices[0].busy_ms, 4321u);
  EXPECT_EQ(s->devices[0].peak_bytes, 350 * kMiB);
  EXPECT_EQ(s->devices[1].peak_bytes, 7 * kMiB);
  EXPECT_EQ(s->devices[1].uuid, "GPU-bbb");
  EXPECT_EQ(s->devices[1].container_index, 1);
  EXPECT_EQ(s->devices[1].used_bytes, 7 * kMiB);

  // A process that exits normally takes its usage with it.
  b->reset();
  s = (*r)->Snapshot();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->processes.size(), 1u);
  EXPECT_EQ(s->devices[0].used_bytes, 100 * kMiB);
  EXPECT_EQ(s->devices[1].used_bytes, 0u);
}

TEST(RegionReader, KilledProcessIsNotCountedBeforeReclaim) {
  TempDir root;
  auto a = FakeContainerProcess::Attach(root.path(), "uid1", "main");
  ASSERT_TRUE(a.ok());
  FakeDevice dev{"GPU-aaa", 3000 * kMiB, 100, 0};
  int e = (*a)->Device(dev);
  ASSERT_EQ((*a)->Reserve(e, 100 * kMiB), 0);
  auto child = ChildProcess::Start((*a)->path(), dev, 400 * kMiB);
  ASSERT_TRUE(child.ok()) << child.status();

  auto r = MappedRegion::Open((*a)->path());
  ASSERT_TRUE(r.ok());
  auto s = (*r)->Snapshot();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->processes.size(), 2u);
  EXPECT_EQ(s->devices[0].used_bytes, 500 * kMiB);

  (*child)->Kill();  // SIGKILL: slot still marked active, its liveness lock gone
  s = (*r)->Snapshot();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->processes.size(), 1u);
  EXPECT_EQ(s->dead_slots, 1);
  EXPECT_EQ(s->devices[0].used_bytes, 100 * kMiB);
  EXPECT_EQ(s->devices[0].cached_used_bytes, 500 * kMiB);  // libvgpu reclaims later
}

// Writes a file of `size` bytes whose header is `hdr`.
void WriteFile(const std::string& path, const vgpu_region_header& hdr, size_t size) {
  std::string bytes(size, '\0');
  std::memcpy(bytes.data(), &hdr, std::min(size, sizeof(hdr)));
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(RegionReader, OpenRejectsFilesThatAreNotUsableRegions) {
  TempDir dir;
  vgpu_region_header good{};
  good.magic = VGPU_REGION_MAGIC;
  good.version = VGPU_REGION_VERSION;
  good.size_bytes = sizeof(vgpu_region);
  good.init_state = VGPU_REGION_READY;
  struct Case {
    const char* name;
    std::function<void(vgpu_region_header&)> edit;
    size_t size;
    absl::StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {"valid", [](vgpu_region_header&) {}, sizeof(vgpu_region), absl::StatusCode::kOk, ""},
      {"empty", [](vgpu_region_header&) {}, 0, absl::StatusCode::kFailedPrecondition,
       "not initialised"},
      {"zero magic", [](vgpu_region_header& h) { h.magic = 0; }, sizeof(vgpu_region),
       absl::StatusCode::kFailedPrecondition, "not initialised"},
      {"still initialising", [](vgpu_region_header& h) { h.init_state = 0; }, sizeof(vgpu_region),
       absl::StatusCode::kFailedPrecondition, "not initialised"},
      {"upstream HAMi-core", [](vgpu_region_header& h) { h.magic = 19920718; }, sizeof(vgpu_region),
       absl::StatusCode::kInvalidArgument, "upstream HAMi-core"},
      {"oldest version still read (same size)",
       [](vgpu_region_header& h) { h.version = VGPU_REGION_MIN_VERSION; }, sizeof(vgpu_region),
       absl::StatusCode::kOk, ""},
      {"newer version", [](vgpu_region_header& h) { h.version = 99; }, sizeof(vgpu_region),
       absl::StatusCode::kInvalidArgument, "layout version 99"},
      {"version 0", [](vgpu_region_header& h) { h.version = 0; }, sizeof(vgpu_region),
       absl::StatusCode::kInvalidArgument, "layout version 0"},
      {"other size", [](vgpu_region_header& h) { h.size_bytes = 4096; }, sizeof(vgpu_region),
       absl::StatusCode::kInvalidArgument, "size 4096"},
      {"truncated", [](vgpu_region_header&) {}, 8192, absl::StatusCode::kInvalidArgument,
       "file has 8192 bytes"},
  };
  int i = 0;
  for (const Case& c : cases) {
    std::string path = dir.path() + "/f" + std::to_string(i++) + ".cache";
    vgpu_region_header h = good;
    c.edit(h);
    WriteFile(path, h, c.size);
    auto r = MappedRegion::Open(path);
    EXPECT_EQ(r.status().code(), c.code) << c.name << ": " << r.status();
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find(c.message), absl::string_view::npos)
          << c.name << ": " << r.status();
      EXPECT_NE(r.status().message().find(path), absl::string_view::npos) << c.name;
    }
  }
  EXPECT_EQ(MappedRegion::Open(dir.path() + "/missing.cache").status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(RegionReader, OpenUsesOnlyTheContainersOwnRegularFile) {
  TempDir root;
  auto a = FakeContainerProcess::Attach(root.path(), "uid1", "main");
  ASSERT_TRUE(a.ok());
  (*a)->Device({"GPU-aaa", 1000 * kMiB, 100, 0});
  const std::string dir = root.path() + "/uid1_main";
  // A link to a valid region (another tenant's, or any file of the host) is not followed.
  ASSERT_EQ(symlink((*a)->path().c_str(), (dir + "/link.cache").c_str()), 0);
  auto link = MappedRegion::Open(dir + "/link.cache");
  EXPECT_FALSE(link.ok());
  EXPECT_NE(link.status().message().find("cannot open"), absl::string_view::npos) << link.status();
  // A FIFO nobody writes to is refused at once (the test would hang if the open waited).
  ASSERT_EQ(mkfifo((dir + "/fifo.cache").c_str(), 0600), 0);
  auto fifo = MappedRegion::Open(dir + "/fifo.cache");
  EXPECT_EQ(fifo.status().code(), absl::StatusCode::kInvalidArgument) << fifo.status();
  EXPECT_NE(fifo.status().message().find("not a regular file"), absl::string_view::npos)
      << fifo.status();
  // A region file grown far past the region (sparse, 1 TiB) is read as the region only.
  ASSERT_EQ(truncate((*a)->path().c_str(), off_t{1} << 40), 0);
  auto big = MappedRegion::Open((*a)->path());
  ASSERT_TRUE(big.ok()) << big.status();
  auto s = (*big)->Snapshot();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->devices.size(), 1u);
}

TEST(RegionReader, SnapshotRefusesDeviceNamesNoDriverWrites) {
  struct Case {
    const char* name;
    std::function<void(vgpu_region*)> spoil;
    const char* message;  // "" = fine
  };
  const Case cases[] = {
      {"GPU UUID", [](vgpu_region*) {}, ""},
      {"MIG UUID", [](vgpu_region* r) { std::strcpy(r->devices[0].uuid, "MIG-4b0d-7/1/0"); }, ""},
      {"invalid UTF-8", [](vgpu_region* r) { std::strcpy(r->devices[0].uuid, "GPU-\xc3\x28"); },
       "not printable ASCII"},
      {"control character", [](vgpu_region* r) { std::strcpy(r->devices[0].uuid, "GPU-a\nb"); },
       "not printable ASCII"},
      {"quote", [](vgpu_region* r) { std::strcpy(r->devices[0].uuid, "GPU-\"x"); },
       "not printable ASCII"},
      {"space", [](vgpu_region* r) { std::strcpy(r->devices[0].uuid, "GPU- x"); },
       "not printable ASCII"},
      {"unterminated",
       [](vgpu_region* r) { std::memset(r->devices[0].uuid, 'A', sizeof(r->devices[0].uuid)); },
       ""},
      {"the same device twice",
       [](vgpu_region* r) { std::strcpy(r->devices[1].uuid, r->devices[0].uuid); },
       "has two entries (0 and 1)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir root;
    auto a = FakeContainerProcess::Attach(root.path(), "uid1", "main");
    ASSERT_TRUE(a.ok());
    (*a)->Device({"GPU-aaa", 1000 * kMiB, 100, 0});
    (*a)->Device({"GPU-bbb", 1000 * kMiB, 100, 1});
    c.spoil((*a)->region());
    auto r = MappedRegion::Open((*a)->path());
    ASSERT_TRUE(r.ok()) << r.status();
    auto s = (*r)->Snapshot();
    if (*c.message) {
      EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
      EXPECT_NE(s.status().message().find(c.message), absl::string_view::npos) << s.status();
    } else {
      EXPECT_TRUE(s.ok()) << s.status();
    }
  }
}

TEST(RegionReader, FileTruncatedUnderTheReaderIsAnErrorNotACrash) {
  TempDir root;
  auto a = FakeContainerProcess::Attach(root.path(), "uid1", "main");
  ASSERT_TRUE(a.ok());
  (*a)->Device({"GPU-aaa", 0, 100, 0});
  auto r = MappedRegion::Open((*a)->path());
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE((*r)->Snapshot().ok());
  ASSERT_EQ(truncate((*a)->path().c_str(), 0), 0);  // a container may do this to its own file
  EXPECT_EQ((*r)->Snapshot().status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ((*r)->WriteFeedback(0, 0).code(), absl::StatusCode::kDataLoss);
  ASSERT_EQ(truncate((*a)->path().c_str(), sizeof(vgpu_region)), 0);         // zero-filled again
  EXPECT_EQ((*r)->Snapshot().status().code(), absl::StatusCode::kDataLoss);  // magic gone
}

TEST(RegionReader, WriteFeedbackTouchesOnlyTheFeedbackFields) {
  TempDir root;
  auto a = FakeContainerProcess::Attach(root.path(), "uid1", "main");
  ASSERT_TRUE(a.ok());
  (*a)->Device({"GPU-aaa", 1000 * kMiB, 50, 0});
  ASSERT_EQ((*a)->Reserve(0, kMiB), 0);
  auto r = MappedRegion::Open((*a)->path());
  ASSERT_TRUE(r.ok());
  std::vector<unsigned char> before(sizeof(vgpu_region));
  std::memcpy(before.data(), (*a)->region(), before.size());
  ASSERT_TRUE((*r)->WriteFeedback(0, -1).ok());
  std::vector<unsigned char> after(sizeof(vgpu_region));
  std::memcpy(after.data(), (*a)->region(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    bool feedback = i >= offsetof(vgpu_region_header, utilization_switch) &&
                    i < offsetof(vgpu_region_header, recent_kernel) + sizeof(int32_t);
    if (!feedback) {
      ASSERT_EQ(before[i], after[i]) << "byte " << i;
    }
  }
  EXPECT_EQ((*a)->region()->hdr.utilization_switch, 0);
  EXPECT_EQ((*a)->region()->hdr.recent_kernel, -1);
  auto s = (*r)->Snapshot();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->utilization_switch, 0);
  EXPECT_EQ(s->recent_kernel, -1);
}

}  // namespace
}  // namespace hami::monitor
