// Node-local copies of dataset folders (`dlscale stage`, docs/slurm.md "Data
// staging"). A copy is made in DEST.partial-<host>-<pid>, checked against
// the source's index.json (every shard's size and CRC-32, read back from the
// node's disk, and the index itself), marked as verified, and only then
// renamed to DEST in one step: DEST is either absent or a verified copy,
// never a partial one. An existing DEST (a requeued job on the same node, an
// earlier start killed midway) is verified again and replaced when it does
// not pass, never trusted because it exists.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlscale {

// Written into a copy after it verified, before the rename to DEST.
inline constexpr const char* kStagedMarker = "dlscale-staged.json";

struct StageResult {
  std::string dest;               // absolute
  bool reused = false;            // DEST was a verified copy of the source already
  std::size_t shards = 0;
  std::uintmax_t bytes = 0;       // of the shards and index.json
  std::vector<std::string> notes;  // what was found and removed first (a stale copy, leftovers)
};

// Copies the dataset folder `source` (its index.json and the shards that
// lists) to `dest`, verified as above. A damaged source shard fails naming
// it, and nothing is left at DEST. Leftover DEST.partial-<host>-<pid>
// folders of this host whose process is gone are removed; other hosts'
// (a stage folder on a shared filesystem) are left alone.
StageResult stage_dataset(const std::string& source, const std::string& dest);

// For the ranks that train on a staged copy: refuses `dir` unless it carries
// kStagedMarker for the index.json it holds now. The error names this node
// and the folder. (The shards' CRC-32s are checked again by open_dataset.)
void require_staged_copy(const std::string& dir);

// This machine's host name (the node, in messages).
std::string this_host();

}  // namespace dlscale
