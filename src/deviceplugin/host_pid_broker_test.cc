#include "deviceplugin/host_pid_broker.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace hami::deviceplugin {
namespace {

namespace fs = std::filesystem;
using std::string;

const string kAsk = string("HPID\x00\x01\x00\x01", 8);

// Sends `request` to the broker at `path` and returns what comes back (empty on failure).
string Exchange(const string& path, const string& request) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
  string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    char buf[64];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

string Answer(uint16_t status, uint32_t pid) {
  string s = "HPID";
  for (unsigned v :
       {0u, 1u, static_cast<unsigned>(status >> 8), static_cast<unsigned>(status & 0xff), pid >> 24,
        (pid >> 16) & 0xff, (pid >> 8) & 0xff, pid & 0xff})
    s.push_back(static_cast<char>(v));
  return s;
}

class HostPidBrokerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hpbXXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  string dir_;
};

TEST_F(HostPidBrokerTest, AnswersTheCallersOwnPid) {
  auto b = HostPidBroker::Start(dir_ + "/hostpid");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->socket_path(), dir_ + "/hostpid/broker.sock");
  EXPECT_EQ(fs::status((*b)->socket_path()).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::group_write | fs::perms::others_read | fs::perms::others_write);
  EXPECT_EQ(Exchange((*b)->socket_path(), kAsk), Answer(0, static_cast<uint32_t>(getpid())));
  b->reset();
  EXPECT_FALSE(fs::exists(dir_ + "/hostpid/broker.sock"));
}

TEST_F(HostPidBrokerTest, InvalidRequestsGetStatusOneAndNoPid) {
  auto b = HostPidBroker::Start(dir_);
  ASSERT_TRUE(b.ok()) << b.status();
  // Upstream's cases (protocol_test.go TestValidRequest): magic, version, command, zero command,
  // long.
  for (const string& req : {string("BAD!\x00\x01\x00\x01", 8), string("HPID\x00\x02\x00\x01", 8),
                            string("HPID\x00\x01\x00\x02", 8), string("HPID\x00\x01\x00\x00", 8),
                            kAsk + '\0', string("GET / HTTP/1.0\r\n\r\n")}) {
    EXPECT_EQ(Exchange((*b)->socket_path(), req), Answer(1, 0)) << req;
  }
  // Short (7 bytes, then nothing): dropped without an answer once the request deadline passes.
  EXPECT_EQ(Exchange((*b)->socket_path(), kAsk.substr(0, 7)), "");
}

TEST_F(HostPidBrokerTest, ASilentCallerHoldsOthersUpAtMostASecond) {
  auto b = HostPidBroker::Start(dir_);
  ASSERT_TRUE(b.ok()) << b.status();
  // Connects, sends half a request and waits.
  int silent = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, (*b)->socket_path().c_str(), sizeof(a.sun_path) - 1);
  ASSERT_EQ(connect(silent, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(send(silent, "HPID", 4, MSG_NOSIGNAL), 4);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(Exchange((*b)->socket_path(), kAsk), Answer(0, static_cast<uint32_t>(getpid())));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2500));
  char c;
  EXPECT_EQ(recv(silent, &c, 1, 0), 0) << "the silent caller is dropped without an answer";
  close(silent);
}

// The point of the broker: a process in a PID namespace of its own learns the PID it has outside.
TEST_F(HostPidBrokerTest, AProcessInItsOwnPidNamespaceLearnsItsOuterPid) {
  auto b = HostPidBroker::Start(dir_);
  ASSERT_TRUE(b.ok()) << b.status();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    if (unshare(CLONE_NEWPID) != 0) {
      const uint32_t skipped[3] = {0, 0, 0};
      (void)!write(fds[1], skipped, sizeof(skipped));
      _exit(0);
    }
    pid_t inner = fork();  // pid 1 of the new namespace
    if (inner == 0) {
      const string a = Exchange((*b)->socket_path(), kAsk);
      uint32_t got[2] = {static_cast<uint32_t>(getpid()), 0};
      if (a.size() == 12 && a.compare(0, 8, Answer(0, 0), 0, 8) == 0)
        got[1] = static_cast<uint32_t>(static_cast<unsigned char>(a[8])) << 24 |
                 static_cast<uint32_t>(static_cast<unsigned char>(a[9])) << 16 |
                 static_cast<uint32_t>(static_cast<unsigned char>(a[10])) << 8 |
                 static_cast<unsigned char>(a[11]);
      (void)!write(fds[1], got, sizeof(got));
      _exit(0);
    }
    int st = 0;
    waitpid(inner, &st, 0);
    const uint32_t outer = static_cast<uint32_t>(inner);
    (void)!write(fds[1], &outer, sizeof(outer));
    _exit(0);
  }
  close(fds[1]);
  uint32_t r[3] = {0, 0, 0};
  size_t got = 0;
  ssize_t n;
  while (got < sizeof(r) &&
         (n = read(fds[0], reinterpret_cast<char*>(r) + got, sizeof(r) - got)) > 0)
    got += static_cast<size_t>(n);
  close(fds[0]);
  int st = 0;
  waitpid(child, &st, 0);
  ASSERT_EQ(got, sizeof(r));
  if (r[0] == 0) GTEST_SKIP() << "cannot make a PID namespace here (needs CAP_SYS_ADMIN)";
  EXPECT_EQ(r[0], 1u) << "the caller's own PID inside its namespace";
  EXPECT_EQ(r[1], r[2]) << "the broker answers the PID the caller has outside";
  EXPECT_NE(r[1], 1u);
}

TEST_F(HostPidBrokerTest, ReplacesAStaleSocketButNoOtherFile) {
  {
    auto first = HostPidBroker::Start(dir_);
    ASSERT_TRUE(first.ok()) << first.status();
    // Left behind as a crashed plugin would leave it: the file stays, nobody listens.
    ASSERT_EQ(link((*first)->socket_path().c_str(), (dir_ + "/keep.sock").c_str()), 0);
  }
  ASSERT_EQ(rename((dir_ + "/keep.sock").c_str(), (dir_ + "/broker.sock").c_str()), 0);
  auto again = HostPidBroker::Start(dir_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Exchange((*again)->socket_path(), kAsk), Answer(0, static_cast<uint32_t>(getpid())));
  again->reset();

  std::ofstream(dir_ + "/broker.sock") << "not a socket";
  auto refused = HostPidBroker::Start(dir_);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(string(refused.status().message()).find("exists and is not a socket"), string::npos)
      << refused.status();
  auto too_long = HostPidBroker::Start("/" + string(110, 'd'));
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(string(too_long.status().message()).find("unix socket limit"), string::npos);
}

}  // namespace
}  // namespace hami::deviceplugin
