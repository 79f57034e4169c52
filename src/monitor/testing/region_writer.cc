#include "monitor/testing/region_writer.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace hami::monitor::testing {

std::map<std::string, double> ParseExposition(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    out[line.substr(0, sp)] = std::strtod(line.c_str() + sp + 1, nullptr);
  }
  return out;
}

pid_t SpawnQuiet(std::vector<std::string> argv, std::vector<std::string> env) {
  std::vector<char*> a, e;
  for (auto& s : argv) a.push_back(s.data());
  a.push_back(nullptr);
  for (auto& s : env) e.push_back(s.data());
  e.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    if (freopen("/dev/null", "w", stdout) == nullptr) _exit(126);
    execve(a[0], a.data(), e.data());
    _exit(127);
  }
  return pid;
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/hami_monitor_XXXXXX";
  const char* p = mkdtemp(tmpl);
  path_ = p != nullptr ? p : "/tmp";
}

TempDir::~TempDir() {
  std::error_code ec;
  if (path_ != "/tmp") std::filesystem::remove_all(path_, ec);
}

StatusOr<std::unique_ptr<FakeContainerProcess>> FakeContainerProcess::Attach(
    const std::string& root, const std::string& pod_uid, const std::string& container,
    uint32_t policy, int32_t priority, const std::string& file) {
  std::string dir = root + "/" + pod_uid + "_" + container;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Internal("mkdir ", dir, ": ", ec.message());
  std::unique_ptr<FakeContainerProcess> p(new FakeContainerProcess());
  p->path_ = dir + "/" + file;
  vgpu_region_params params{policy, priority, nullptr};
  if (vgpu_region_attach(&p->ctx_, p->path_.c_str(), &params) != 0) {
    vgpu_region_detach(&p->ctx_);
    return Internal("vgpu_region_attach(", p->path_, ") fell back to a private region");
  }
  return p;
}

FakeContainerProcess::~FakeContainerProcess() {
  vgpu_region_detach(&ctx_);
}

int FakeContainerProcess::Device(const FakeDevice& d) {
  return vgpu_region_device(&ctx_, d.uuid.c_str(), d.limit_bytes, d.sm_limit_pct, d.total_bytes,
                            d.container_index, d.sm_count);
}

int FakeContainerProcess::Reserve(int entry, uint64_t bytes) {
  return vgpu_region_reserve(&ctx_, entry, bytes, 0);
}

void FakeContainerProcess::Release(int entry, uint64_t bytes) {
  vgpu_region_release(&ctx_, entry, bytes);
}

void FakeContainerProcess::ChargeContext(int entry, uint64_t bytes) {
  vgpu_region_reserve(&ctx_, entry, bytes, 1);
  __atomic_add_fetch(&ctx_.r->slots[ctx_.slot].context_kib[entry],
                     static_cast<uint32_t>((bytes + 1023) >> 10), __ATOMIC_RELAXED);
}

void FakeContainerProcess::StampLaunch(int entry, uint64_t mono_ns, uint64_t throttled_ns,
                                       uint32_t busy_ms) {
  vgpu_device_entry* d = &ctx_.r->devices[entry];
  __atomic_add_fetch(&d->throttled_ns, throttled_ns, __ATOMIC_RELAXED);
  __atomic_add_fetch(&d->busy_ms, busy_ms, __ATOMIC_RELAXED);
  __atomic_store_n(&d->last_launch_ns, mono_ns, __ATOMIC_RELAXED);
}

StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(const std::string& region_path,
                                                            const FakeDevice& device,
                                                            uint64_t bytes) {
  int fds[2];
  if (pipe(fds) != 0) return Internal("pipe failed");
  pid_t pid = fork();
  if (pid < 0) return Internal("fork failed");
  if (pid == 0) {
    // Inherited descriptions would keep the parent's liveness locks alive in the child: drop them.
    for (int fd = 3; fd < 1024; ++fd) {
      if (fd != fds[1]) close(fd);
    }
    vgpu_region_ctx ctx;
    vgpu_region_params params{0, 1, nullptr};
    char ok = vgpu_region_attach(&ctx, region_path.c_str(), &params) == 0 ? 1 : 0;
    int e =
        ok ? vgpu_region_device(&ctx, device.uuid.c_str(), device.limit_bytes, device.sm_limit_pct,
                                device.total_bytes, device.container_index, device.sm_count)
           : -1;
    if (e < 0 || vgpu_region_reserve(&ctx, e, bytes, 0) != 0) ok = 0;
    (void)!write(fds[1], &ok, 1);
    for (;;) pause();
  }
  close(fds[1]);
  char ok = 0;
  ssize_t n = read(fds[0], &ok, 1);
  close(fds[0]);
  std::unique_ptr<ChildProcess> c(new ChildProcess());
  c->pid_ = pid;
  if (n != 1 || ok != 1) return Internal("child could not attach/reserve");
  return c;
}

void ChildProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int st;
  waitpid(pid_, &st, 0);
  pid_ = -1;
}

ChildProcess::~ChildProcess() {
  Kill();
}

}  // namespace hami::monitor::testing
