// stage_dataset (`dlscale stage`): a copy is used only once it verified, an
// existing destination is verified again (a partial, stale or damaged one is
// replaced, never used), a damaged source shard fails naming it and leaves
// nothing behind; require_staged_copy refuses what was not verified.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "io/dataset.h"
#include "io/file_checksum.h"
#include "io/io_test_util.h"
#include "io/staging.h"

namespace dlscale {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

std::string make_source(const TempDir& tmp, int samples = 24) {
  write_dataset(tmp / "src", test::make_dataset(samples, {1, 4, 4}, SampleType::u8), 3, 0, true);
  return tmp / "src";
}

// Flips one byte in the middle of a file.
void damage(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(fs::file_size(path) / 2));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(fs::file_size(path) / 2));
  f.put(static_cast<char>(c ^ 0x5a));
}

// What lies beside DEST in its folder, DEST itself included.
std::vector<std::string> entries(const fs::path& folder) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(folder)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Every shard of dir holds what the source's index.json says, byte for byte the source's.
void expect_verified_copy(const std::string& src, const std::string& dir) {
  EXPECT_EQ(test::read_text(dir + "/index.json"), test::read_text(src + "/index.json"));
  const DatasetInfo info = read_dataset_index(dir);
  ASSERT_EQ(info.shards.size(), 3u);
  for (const ShardInfo& s : info.shards) {
    EXPECT_EQ(file_crc32(s.path), s.crc32) << s.path;
    EXPECT_EQ(test::read_text(s.path), test::read_text(src + "/" + fs::path(s.path).filename().string()));
  }
  EXPECT_TRUE(fs::exists(dir + "/" + kStagedMarker));
  EXPECT_NO_THROW(require_staged_copy(dir));
  EXPECT_NO_THROW(open_dataset(dir));
}

TEST(Staging, CopyIsVerifiedMarkedAndRenamedIntoPlace) {
  TempDir tmp;
  const std::string src = make_source(tmp);
  const StageResult r = stage_dataset(src, tmp / "node/train");
  EXPECT_FALSE(r.reused);
  EXPECT_EQ(r.shards, 3u);
  EXPECT_EQ(r.dest, tmp / "node/train");
  expect_verified_copy(src, tmp / "node/train");
  EXPECT_EQ(entries(tmp.path() / "node"), std::vector<std::string>{"train"}) << "a partial folder was left";
  // Only the dataset was copied: index.json, the shards and the marker.
  EXPECT_EQ(entries(tmp.path() / "node/train").size(), 5u);
}

TEST(Staging, DamagedSourceShardFailsNamingItAndLeavesNothing) {
  TempDir tmp;
  const std::string src = make_source(tmp);
  damage(src + "/shard-00001.h5");
  EXPECT_ERROR_CONTAINS(stage_dataset(src, tmp / "node/train"), src + "/shard-00001.h5: the source file is damaged");
  EXPECT_TRUE(entries(tmp.path() / "node").empty()) << "the failed copy was left behind";
}

TEST(Staging, PartialDestinationIsReplacedNotUsed) {
  TempDir tmp;
  const std::string src = make_source(tmp);
  // What `cp -r` killed midway leaves: the index and part of the shards, no marker.
  fs::create_directories(tmp / "node/train");
  fs::copy_file(src + "/index.json", tmp / "node/train/index.json");
  fs::copy_file(src + "/shard-00000.h5", tmp / "node/train/shard-00000.h5");
  const StageResult r = stage_dataset(src, tmp / "node/train");
  EXPECT_FALSE(r.reused);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("never verified"), std::string::npos) << r.notes[0];
  expect_verified_copy(src, tmp / "node/train");
}

TEST(Staging, DamagedVerifiedDestinationIsReplacedNotUsed) {
  TempDir tmp;
  const std::string src = make_source(tmp);
  stage_dataset(src, tmp / "node/train");
  damage(tmp / "node/train/shard-00002.h5");  // the node's disk, after the verification
  const StageResult r = stage_dataset(src, tmp / "node/train");
  EXPECT_FALSE(r.reused);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("shard-00002.h5 is damaged"), std::string::npos) << r.notes[0];
  expect_verified_copy(src, tmp / "node/train");
}

TEST(Staging, CopyOfAnEarlierVersionOfTheSourceIsReplaced) {
  TempDir tmp;
  const std::string src = make_source(tmp);
  stage_dataset(src, tmp / "node/train");
  make_source(tmp, 30);  // the dataset made again since (another job, same job id after a requeue)
  const StageResult r = stage_dataset(src, tmp / "node/train");
  EXPECT_FALSE(r.reused);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("changed since it was copied"), std::string::npos) << r.notes[0];
  expect_verified_copy(src, tmp / "node/train");
  EXPECT_EQ(read_dataset_index(tmp / "node/train").num_samples, 30);
}

TEST(Staging, VerifiedDestinationIsKeptAfterItVerifiesAgain) {
  TempDir tmp;
  const std::string src = make_source(tmp);
  stage_dataset(src, tmp / "node/train");
  const auto marker = test::read_text(tmp / "node/train/" + kStagedMarker);
  const StageResult r = stage_dataset(src, tmp / "node/train");
  EXPECT_TRUE(r.reused);
  EXPECT_TRUE(r.notes.empty());
  EXPECT_EQ(test::read_text(tmp / "node/train/" + kStagedMarker), marker);
  expect_verified_copy(src, tmp / "node/train");
}

TEST(Staging, LeftoversOfDeadProcessesOfThisHostAreRemovedOthersKept) {
  TempDir tmp;
  const std::string src = make_source(tmp);
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);  // a pid that no process has now
  const std::string host = this_host();
  const std::string dead = tmp / ("node/train.partial-" + host + "-" + std::to_string(child));
  const std::string alive = tmp / ("node/train.partial-" + host + "-" + std::to_string(getppid()));
  const std::string elsewhere = tmp / "node/train.partial-othernode-1";
  for (const auto& d : {dead, alive, elsewhere}) {
    fs::create_directories(d);
    test::write_text(d + "/index.json", "{");
  }
  const StageResult r = stage_dataset(src, tmp / "node/train");
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(alive)) << "the folder of a stage still running was removed";
  EXPECT_TRUE(fs::exists(elsewhere)) << "another node's folder (a shared stage folder) was removed";
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find(dead), std::string::npos) << r.notes[0];
  expect_verified_copy(src, tmp / "node/train");
}

TEST(Staging, RanksRefuseAFolderThatWasNotVerified) {
  TempDir tmp;
  const std::string src = make_source(tmp);
  const std::string node = "node " + this_host() + ": ";
  EXPECT_ERROR_CONTAINS(require_staged_copy(tmp / "node/train"), node + tmp / "node/train does not exist");
  // A plain copy (what the job script's `cp -r` made) is a dataset, but not a verified one.
  fs::create_directories(tmp / "node");
  fs::copy(src, tmp / "node/train");
  EXPECT_NO_THROW(open_dataset(tmp / "node/train"));
  EXPECT_ERROR_CONTAINS(require_staged_copy(tmp / "node/train"),
                        node + tmp / "node/train is not a verified staged copy: it has no " + kStagedMarker);
  // A verified copy whose index.json changed afterwards.
  fs::remove_all(tmp / "node/train");
  stage_dataset(src, tmp / "node/train");
  test::write_text(tmp / "node/train/index.json", test::read_text(src + "/index.json") + " ");
  EXPECT_ERROR_CONTAINS(require_staged_copy(tmp / "node/train"), "its index.json changed");
}

}  // namespace
}  // namespace dlscale
