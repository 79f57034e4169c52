// A prepared claim's CDI spec applied as a container runtime would (its mounts bound in a private
// mount namespace, its environment set), and a real driver-API program run under libvgpu on the
// fake GPU: the process is held to exactly what the claim consumed (docs/dra.md#what-prepare-does).
// Needs root and unshare(1) for the mount namespace; skipped otherwise.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dra/driver.h"
#include "dra/testing/builders.h"
#include "nlohmann/json.hpp"

namespace hami::dra {
namespace {

using testing::MakeClaim;

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// KEY=value words of the program's output.
uint64_t Value(const std::string& out, const std::string& key) {
  std::istringstream in(out);
  for (std::string word; in >> word;) {
    if (word.rfind(key + "=", 0) == 0) return std::stoull(word.substr(key.size() + 1));
  }
  ADD_FAILURE() << key << " not in the output:\n" << out;
  return 0;
}

class DraVgpuE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(VGPU_PROG).empty()) GTEST_SKIP() << "libvgpu or the fakes are not built";
    if (::geteuid() != 0 ||
        std::system("unshare --mount --propagation private true 2>/dev/null") != 0)
      GTEST_SKIP() << "needs root and unshare --mount";
    // The ld.so.preload file the spec mounts at /etc/ld.so.preload, as the node agent installs it.
    preload_ = dir_.path() + "/ld.so.preload";
    std::ofstream(preload_) << "/usr/local/vgpu/libvgpu.so\n";
    DriverOptions o;
    o.node_name = testing::kNode;
    o.plugin_dir = dir_.path() + "/plugin";
    o.cdi_root = dir_.path() + "/cdi";
    o.boot_id = "boot-1";
    o.vgpu.libvgpu_host_path = VGPU_LIB;
    o.vgpu.ld_preload_host_path = preload_;
    o.vgpu.region_root = dir_.path() + "/regions";
    o.vgpu.lock_dir = dir_.path() + "/lock";
    std::filesystem::create_directories(o.vgpu.lock_dir);
    auto d = Driver::Create(
        o, {{"gpu-0", "GPU-fa4e0000-0000-4000-8000-000000000000", 0, 16384, 100}}, &claims_);
    ASSERT_TRUE(d.ok()) << d.status();
    driver_ = *std::move(d);
  }

  // Runs `prog exact` with the claim's CDI edits applied; returns its output.
  std::string RunUnderSpec(const std::string& uid) {
    const std::string spec_path =
        dir_.path() + "/cdi/k8s.hami-core-gpu.project-hami.io-claim_" + uid + ".json";
    const auto spec = nlohmann::json::parse(ReadAll(spec_path));
    const auto& edits = spec["devices"][0]["containerEdits"];
    // The container's /usr/local is a fresh tmpfs (the image's); the runtime creates mount points.
    std::string script = "set -e; mount -t tmpfs tmpfs /usr/local; ";
    for (const auto& m : edits["mounts"]) {
      const std::string host = m["hostPath"], ctr = m["containerPath"];
      if (ctr == "/etc/ld.so.preload") {
        // Not bound over the host's /etc (this is the test machine): checked below, and LD_PRELOAD
        // names what the file names.
        EXPECT_EQ(ReadAll(host), "/usr/local/vgpu/libvgpu.so\n");
        continue;
      }
      if (ctr.rfind("/usr/local/", 0) != 0) {
        // Outside the tmpfs: bound only over an existing mount point of the same kind, so that the
        // test machine's own file system is never written (the lock directory /tmp/vgpulock).
        script += StrCat("if [ -d ", Quote(host), " ] && [ -d ", Quote(ctr),
                         " ]; then mount --bind ", Quote(host), " ", Quote(ctr), "; fi; ");
        continue;
      }
      script += StrCat("if [ -d ", Quote(host), " ]; then mkdir -p ", Quote(ctr),
                       "; else mkdir -p \"$(dirname ", Quote(ctr), ")\"; touch ", Quote(ctr),
                       "; fi; mount --bind ", Quote(host), " ", Quote(ctr), "; ");
      const auto& opts = m["options"];
      if (std::find(opts.begin(), opts.end(), "ro") != opts.end())
        script += StrCat("mount -o remount,bind,ro ", Quote(ctr), "; ");
    }
    script += "exec env -i PATH=/usr/bin:/bin LD_PRELOAD=/usr/local/vgpu/libvgpu.so ";
    script += StrCat("LD_LIBRARY_PATH=", Quote(VGPU_FAKES_DIR), " ");
    script += "'FAKEGPU_DEVICES=NVIDIA A16:16384:40' ";
    script += StrCat("FAKEGPU_STATE=", Quote(dir_.path() + "/fake.state"), " ");
    for (const auto& e : edits["env"]) script += Quote(e.get<std::string>()) + " ";
    script += StrCat(Quote(VGPU_PROG), " exact");
    const std::string cmd =
        StrCat("unshare --mount --propagation private sh -c ", Quote(script), " 2>&1");
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    for (size_t n; p != nullptr && (n = std::fread(buf, 1, sizeof(buf), p)) > 0;)
      out.append(buf, n);
    const int rc = p != nullptr ? ::pclose(p) : -1;
    EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << out;
    return out;
  }

  testing::TempDir dir_;
  std::string preload_;
  testing::MapClaims claims_;
  std::unique_ptr<Driver> driver_;
};

TEST_F(DraVgpuE2e, AProcessIsHeldToTheClaimsConsumedCapacity) {
  struct Case {
    const char* name;
    std::vector<std::pair<std::string, std::string>> requests;  // memory, cores on gpu-0
    uint64_t limit_mib;
  };
  const Case cases[] = {
      {"one", {{"4Gi", "30"}}, 4096},
      {"two", {{"2Gi", "20"}, {"1Gi", "10"}}, 3072},  // two requests of one claim on one GPU add up
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto b = MakeClaim("ns", c.name, StrCat("uid-", c.name));
    for (size_t i = 0; i < c.requests.size(); ++i)
      b.Result(StrCat("r", i), "gpu-0", c.requests[i].first, c.requests[i].second);
    claims_.Put(b.Json());
    const ClaimRef ref{"ns", c.name, StrCat("uid-", c.name)};
    auto r = driver_->Prepare({ref});
    ASSERT_TRUE(r[ref.uid].status.ok()) << r[ref.uid].status;
    const std::string out = RunUnderSpec(ref.uid);
    EXPECT_EQ(Value(out, "start_total"), c.limit_mib << 20) << out;
    EXPECT_EQ(Value(out, "alloc_free_rc"), 0u) << out;
    EXPECT_EQ(Value(out, "alloc_one_more_rc"), 2u) << "one byte past the claim: out of memory";
    // libvgpu's region file is in the claim's region directory on the host.
    EXPECT_TRUE(std::filesystem::exists(
        StrCat(dir_.path(), "/regions/", ref.uid, "_dra/", ref.uid, ".cache")));
    ASSERT_TRUE(driver_->Unprepare({ref})[ref.uid].ok());
    EXPECT_FALSE(std::filesystem::exists(StrCat(dir_.path(), "/regions/", ref.uid, "_dra")));
  }
}

}  // namespace
}  // namespace hami::dra
