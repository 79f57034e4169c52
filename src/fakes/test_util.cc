#include "fakes/test_util.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

namespace fakegpu::testing {
namespace {

const char* const kVars[] = {
    FAKEGPU_ENV_DEVICES,      FAKEGPU_ENV_STATE,          FAKEGPU_ENV_CTX_OVERHEAD_MIB,
    FAKEGPU_ENV_WAVE_US,      FAKEGPU_ENV_MAX_BACKLOG_US, FAKEGPU_ENV_NVLINK,
    FAKEGPU_ENV_XID,          FAKEGPU_ENV_FAULTS,         FAKEGPU_ENV_INIT_FAIL,
    FAKEGPU_ENV_CUDA_VERSION, FAKEGPU_ENV_DRIVER_VERSION, FAKEGPU_ENV_CUDA_VISIBLE_DEVICES,
    FAKEGPU_ENV_MIG,          FAKEGPU_ENV_NVML_SAMPLE_MS};

}  // namespace

void ResetLibs() {
  fakegpu_cuda_reset();
  fakegpu_nvml_reset();
}

FakeEnv::FakeEnv(std::initializer_list<std::pair<std::string, std::string>> vars) {
  char tmpl[] = "/tmp/fakegpu-test-XXXXXX";
  char* d = mkdtemp(tmpl);
  if (d == nullptr) std::abort();
  dir_ = d;
  state_ = dir_ + "/state";
  for (const char* v : kVars) unsetenv(v);
  setenv(FAKEGPU_ENV_STATE, state_.c_str(), 1);
  for (const auto& [k, v] : vars) setenv(k.c_str(), v.c_str(), 1);
  ResetLibs();
}

FakeEnv::~FakeEnv() {
  ResetLibs();
  for (const char* v : kVars) unsetenv(v);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

Child::Child(const std::function<long long()>& body) {
  int up[2], down[2];
  if (pipe(up) != 0 || pipe(down) != 0) std::abort();
  std::fflush(nullptr);
  pid_ = fork();
  if (pid_ < 0) std::abort();
  if (pid_ == 0) {
    // Keep only our pipe ends: pipes of sibling children must not stay open here, or they never see
    // EOF.
    for (int fd = 3; fd < 1024; ++fd) {
      if (fd != up[1] && fd != down[0]) close(fd);
    }
    ResetLibs();
    long long result = body();
    if (write(up[1], &result, sizeof result) != sizeof result) _exit(3);
    char c;
    while (read(down[0], &c, 1) < 0) {
    }
    _exit(0);
  }
  close(up[1]);
  close(down[0]);
  up_ = up[0];
  down_ = down[1];
}

Child::~Child() {
  if (!reaped_) Kill();
  if (up_ >= 0) close(up_);
  if (down_ >= 0) close(down_);
}

long long Child::Result() {
  long long v = -1;
  if (read(up_, &v, sizeof v) != sizeof v) return -1;
  return v;
}

void Child::Release() {
  if (down_ >= 0) {
    close(down_);
    down_ = -1;
  }
}

int Child::Join() {
  Release();
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0) {
  }
  reaped_ = true;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void Child::Kill() {
  if (reaped_) return;
  kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0) {
  }
  reaped_ = true;
}

CUcontext UsePrimary(int ordinal) {
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  if (cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS) return nullptr;
  if (cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS) return nullptr;
  if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS) return nullptr;
  return ctx;
}

CUfunction AnyFunction() {
  CUmodule mod = nullptr;
  CUfunction fn = nullptr;
  if (cuModuleLoadData(&mod, "image") != CUDA_SUCCESS) return nullptr;
  if (cuModuleGetFunction(&fn, mod, "kernel") != CUDA_SUCCESS) return nullptr;
  return fn;
}

}  // namespace fakegpu::testing
