#include "dra/checkpoint.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "dra/testing/builders.h"

namespace hami::dra {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

TEST(Checkpoint, RoundTrips) {
  Checkpoint cp;
  cp.boot_id = "boot-1";
  PreparedClaim pc;
  pc.state = PrepareState::kCompleted;
  pc.claim = {{"ns", "c1", "uid-1"},
              {{"gpu", "gpu-0", "s1", {4096, 30}}, {"b", "gpu-1", "", {1, 2}}}};
  pc.devices = {{{"gpu"}, "node-a", "gpu-0", {"k/claim=uid-1"}, "s1"}};
  pc.files = {"/a", "/b"};
  pc.dirs = {"/c"};
  cp.claims["uid-1"] = pc;
  pc.state = PrepareState::kStarted;
  pc.claim.ref.uid = "uid-2";
  cp.claims["uid-2"] = pc;
  auto back = DecodeCheckpoint(EncodeCheckpoint(cp));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, cp);
}

TEST(Checkpoint, GarbageIsAnError) {
  const char* cases[] = {"",
                         "{",
                         "[]",
                         "{\"version\":2,\"bootID\":\"x\",\"claims\":{}}",
                         "{\"version\":1}",
                         "{\"version\":1,\"bootID\":\"x\",\"claims\":{\"u\":{\"state\":\"Nope\"}}}",
                         "{\"version\":1,\"bootID\":\"x\",\"claims\":{\"u\":{\"state\":"
                         "\"PrepareStarted\",\"namespace\":1}}}"};
  for (const char* c : cases) EXPECT_FALSE(DecodeCheckpoint(c).ok()) << c;
}

TEST(AtomicFile, ReplacesWholeAndLeavesNoTemporary) {
  TempDir d;
  const std::string p = d.path() + "/f.json";
  ASSERT_TRUE(WriteFileAtomic(p, "first", 0444).ok());
  ASSERT_TRUE(WriteFileAtomic(p, "second, longer", 0444).ok());
  EXPECT_EQ(*ReadWholeFile(p), "second, longer");
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  EXPECT_EQ(std::distance(fs::directory_iterator(d.path()), fs::directory_iterator()), 1);
  // A directory that does not exist: an error, and nothing anywhere.
  EXPECT_FALSE(WriteFileAtomic(d.path() + "/no/f", "x").ok());
  EXPECT_TRUE(absl::IsNotFound(ReadWholeFile(d.path() + "/none").status()));
}

TEST(BootId, ReadsAndTrims) {
  TempDir d;
  ASSERT_TRUE(WriteFileAtomic(d.path() + "/b", "abc-123\n").ok());
  EXPECT_EQ(ReadBootId(d.path() + "/b"), "abc-123");
  EXPECT_EQ(ReadBootId(d.path() + "/none"), "");
}

}  // namespace
}  // namespace hami::dra
