#pragma once
// Test helper: a child process (one of our binaries) with its output in a log file, stopped with
// SIGTERM then SIGKILL, killed with its parent (PR_SET_PDEATHSIG). Header-only; used by the
// end-to-end and hostile-client suites.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace hami::testprocess {

using std::chrono::seconds;

class Child {
 public:
  // Starts argv[0] with exactly `env`. stdout and stderr go to `log`; with `pipes`, stdin and
  // stdout are pipes to this process instead (stderr still to `log`).
  static std::unique_ptr<Child> Start(const std::string& name, const std::vector<std::string>& argv,
                                      const std::vector<std::string>& env, const std::string& log,
                                      bool pipes) {
    auto c = std::unique_ptr<Child>(new Child(name, log));
    std::vector<char*> av, ev;  // built before fork: nothing but async-signal-safe calls after it
    for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
    av.push_back(nullptr);
    for (const auto& e : env) ev.push_back(const_cast<char*>(e.c_str()));
    ev.push_back(nullptr);
    int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) return nullptr;
    int in[2] = {-1, -1}, out[2] = {-1, -1};
    if (pipes && (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)) return nullptr;
    const pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) return nullptr;
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(126);
      ::setpgid(0, 0);
      if (pipes) {
        ::dup2(in[0], 0);
        ::dup2(out[1], 1);
      } else {
        int devnull = ::open("/dev/null", O_RDONLY);
        ::dup2(devnull, 0);
        ::dup2(log_fd, 1);
      }
      ::dup2(log_fd, 2);
      ::execve(av[0], av.data(), ev.data());
      ::_exit(127);
    }
    ::close(log_fd);
    c->pid_ = pid;
    if (pipes) {
      ::close(in[0]);
      ::close(out[1]);
      c->stdin_fd_ = in[1];
      c->stdout_fd_ = out[0];
    }
    return c;
  }

  ~Child() { Stop(); }

  // SIGTERM, up to 20 s for a clean exit, then SIGKILL. Returns the wait status (-1 if none).
  int Stop() {
    CloseStdin();
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      if (!WaitExit(seconds(20))) {
        ::kill(-pid_, SIGKILL);
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status_, 0);
      }
      pid_ = -1;
    }
    if (stdout_fd_ >= 0) ::close(stdout_fd_);
    stdout_fd_ = -1;
    return status_;
  }

  // Waits up to `timeout` for the process to exit by itself.
  bool WaitExit(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return true;
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (true) {
      pid_t r = ::waitpid(pid_, &status_, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return true;
      }
      if (std::chrono::steady_clock::now() >= end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  bool Running() {
    if (pid_ <= 0) return false;
    return ::waitpid(pid_, &status_, WNOHANG) == 0 || (pid_ = -1, false);
  }

  void CloseStdin() {
    if (stdin_fd_ >= 0) ::close(stdin_fd_);
    stdin_fd_ = -1;
  }

  // Reads stdout lines until one equals `until` (returned true), EOF or the deadline. Every
  // "key=value" line lands in *kv.
  bool ReadUntil(const std::string& until, std::map<std::string, std::string>* kv,
                 std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (true) {
      size_t nl;
      while ((nl = buf_.find('\n')) != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        output_ += line + "\n";
        if (line == until) return true;
        if (auto eq = line.find('='); eq != std::string::npos)
          (*kv)[line.substr(0, eq)] = line.substr(eq + 1);
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0 || stdout_fd_ < 0) return false;
      pollfd p{stdout_fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      char chunk[4096];
      ssize_t n = ::read(stdout_fd_, chunk, sizeof chunk);
      if (n <= 0) return false;
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

  const std::string& name() const { return name_; }
  pid_t pid() const { return pid_; }
  const std::string& log() const { return log_; }
  const std::string& output() const { return output_; }
  int status() const { return status_; }

 private:
  Child(std::string name, std::string log) : name_(std::move(name)), log_(std::move(log)) {}
  std::string name_, log_;
  pid_t pid_ = -1;
  int status_ = -1;
  int stdin_fd_ = -1, stdout_fd_ = -1;
  std::string buf_, output_;
};

}  // namespace hami::testprocess
