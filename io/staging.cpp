// stage_dataset and require_staged_copy (see staging.h). Each shard is read
// once from the source (the copy and its CRC-32 come from the same bytes) and
// once back from the node's disk: the copy's page cache is dropped after the
// fsync, so the check reads what the disk holds, not what was just written.
#include "io/staging.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "io/dataset.h"
#include "io/dataset_format.h"
#include "io/file_checksum.h"
#include "io/hdf5.h"
#include "runtime/core/error.h"

namespace dlscale {

namespace fs = std::filesystem;
using nlohmann::json;

std::string this_host() {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  return host;
}

namespace {

std::string normal_path(const std::string& path) {
  fs::path p = fs::absolute(path).lexically_normal();
  if (p.has_parent_path() && p.filename().empty()) p = p.parent_path();  // drop a trailing '/'
  return p.string();
}

class Fd {
 public:
  Fd(const std::string& path, int flags, mode_t mode = 0) : fd_(::open(path.c_str(), flags | O_CLOEXEC, mode)) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

void write_all(int fd, const unsigned char* data, std::size_t size, const std::string& path) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot write " + path + ": " + std::strerror(errno));
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

struct Copied {
  std::uint32_t source_crc = 0;  // of the bytes read from the source, which are the bytes written
  std::uintmax_t bytes = 0;
};

// Copies src to the new file dst; fsyncs it and drops its cached pages.
Copied copy_file(const std::string& src, const std::string& dst) {
  Fd in(src, O_RDONLY);
  if (in.get() < 0) fail("cannot open " + src + ": " + std::strerror(errno));
  (void)::posix_fadvise(in.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  Fd out(dst, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (out.get() < 0) fail("cannot create " + dst + ": " + std::strerror(errno));
  std::vector<unsigned char> block(std::size_t{1} << 20);
  Copied c;
  Crc32 crc;
  while (true) {
    ssize_t n = ::read(in.get(), block.data(), block.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot read " + src + ": " + std::strerror(errno));
    if (n == 0) break;
    crc.update(block.data(), static_cast<std::size_t>(n));
    write_all(out.get(), block.data(), static_cast<std::size_t>(n), dst);
    c.bytes += static_cast<std::uintmax_t>(n);
  }
  if (::fsync(out.get()) != 0) fail("cannot write " + dst + " (fsync): " + std::strerror(errno));
  (void)::posix_fadvise(out.get(), 0, 0, POSIX_FADV_DONTNEED);
  if (::close(out.release()) != 0) fail("cannot write " + dst + " (close): " + std::strerror(errno));
  c.source_crc = crc.value();
  return c;
}

// The copy `copy` of `src`, Copied as c, must hold exactly what index.json says.
void verify_copy(const std::string& src, const std::string& copy, const Copied& c, std::uint32_t expected) {
  if (c.source_crc != expected)
    fail(src + ": the source file is damaged or was changed after index.json was written (its CRC-32 is " +
         crc32_text(c.source_crc) + ", index.json says " + crc32_text(expected) +
         "); nothing was staged. Copy it again, or make the dataset again with `dlscale shard`");
  const auto size = fs::file_size(copy);
  if (size != c.bytes)
    fail("the copy " + copy + " holds " + std::to_string(size) + " bytes, the source " + src + " " +
         std::to_string(c.bytes));
  const std::uint32_t read_back = file_crc32(copy);
  if (read_back != expected)
    fail("the copy " + copy + " does not read back as written (CRC-32 " + crc32_text(read_back) + ", expected " +
         crc32_text(expected) + "): the node's disk at " + fs::path(copy).parent_path().string() +
         " lost or changed bytes");
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}

void write_marker(const std::string& dir, const std::string& source, std::uint32_t index_crc,
                  const StageResult& r) {
  const std::string path = dir + "/" + kStagedMarker;
  {
    std::ofstream out(path);
    out << json{{"source", source},   {"index_crc32", crc32_text(index_crc)}, {"shards", r.shards},
                {"bytes", r.bytes},   {"host", this_host()},                 {"verified", utc_now()}}
               .dump(2)
        << "\n";
    if (!out.flush()) fail("cannot write " + path);
  }
  sync_path(path);
}

// Why dest is not a verified copy of source, or "" when it is: its marker
// names this source and the index.json both hold now, and every shard has
// the source's size and index.json's CRC-32, read back from the disk.
std::string stale_reason(const std::string& source, const std::string& dest) {
  try {
    const std::string marker_path = dest + "/" + kStagedMarker;
    std::ifstream in(marker_path);
    if (!in) return "no " + std::string(kStagedMarker) + ": it was never verified (a partial copy?)";
    const json marker = json::parse(in);
    if (marker.value("source", "") != source) return "it is a copy of " + marker.value("source", "?");
    const std::string index = std::string("/") + dataset_format::kIndexFile;
    const std::string recorded = marker.value("index_crc32", "");
    if (crc32_text(file_crc32(source + index)) != recorded) return source + index + " changed since it was copied";
    if (crc32_text(file_crc32(dest + index)) != recorded) return dest + index + " changed since it was verified";
    for (const ShardInfo& shard : read_dataset_index(dest).shards) {
      const std::string name = fs::path(shard.path).filename().string();
      if (fs::file_size(shard.path) != fs::file_size(source + "/" + name))
        return shard.path + " differs in size from the source's";
      if (file_crc32(shard.path) != shard.crc32) return shard.path + " is damaged (its CRC-32 is not index.json's)";
    }
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

// Removes a folder by renaming it first, so that a removal cut short never
// leaves something named DEST.
void remove_folder(const std::string& dir) {
  const std::string doomed = dir + ".removing-" + this_host() + "-" + std::to_string(::getpid());
  fs::rename(dir, doomed);
  fs::remove_all(doomed);
}

// DEST.partial-<host>-<pid> and DEST.removing-<host>-<pid> left by a process
// of this host that is gone (killed, or its node restarted).
void remove_leftovers(const fs::path& dest, StageResult& r) {
  const std::string host = this_host();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dest.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    for (const std::string kind : {".partial-", ".removing-"}) {
      const std::string prefix = dest.filename().string() + kind + host + "-";
      if (name.rfind(prefix, 0) != 0) continue;
      const std::string pid = name.substr(prefix.size());
      if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) continue;
      if (::kill(std::stoi(pid), 0) == 0 || errno != ESRCH) continue;  // its process still runs
      fs::remove_all(entry.path());
      r.notes.push_back("removed " + entry.path().string() + ", left by an earlier stage that did not finish");
    }
  }
}

// Copies and verifies source into partial; returns the index's CRC-32.
std::uint32_t copy_verified(const std::string& source, const std::string& partial, StageResult& r) {
  const std::string index = std::string("/") + dataset_format::kIndexFile;
  fs::create_directories(partial);
  (void)read_dataset_index(source);  // a source that is no dataset fails with its own message
  const Copied index_copy = copy_file(source + index, partial + index);
  if (file_crc32(partial + index) != index_copy.source_crc)
    fail("the copy " + partial + index + " does not read back as written");
  // The shard list of the bytes copied, not of a second read of the source.
  const DatasetInfo info = read_dataset_index(partial);
  r.bytes = index_copy.bytes;
  for (const ShardInfo& shard : info.shards) {
    const std::string src = source + "/" + fs::path(shard.path).filename().string();
    const Copied c = copy_file(src, shard.path);
    verify_copy(src, shard.path, c, shard.crc32);
    r.bytes += c.bytes;
  }
  r.shards = info.shards.size();
  return index_copy.source_crc;
}

}  // namespace

StageResult stage_dataset(const std::string& source_arg, const std::string& dest_arg) {
  StageResult r;
  const std::string source = normal_path(source_arg);
  r.dest = normal_path(dest_arg);
  if (source == r.dest) fail("stage: the source and the destination are both " + source);
  fs::create_directories(fs::path(r.dest).parent_path());
  remove_leftovers(r.dest, r);
  std::error_code ec;
  if (fs::exists(r.dest, ec)) {
    const std::string why = stale_reason(source, r.dest);
    if (why.empty()) {
      r.reused = true;
      r.shards = read_dataset_index(r.dest).shards.size();
      return r;
    }
    remove_folder(r.dest);
    r.notes.push_back("removed " + r.dest + ", not a verified copy of " + source + ": " + why);
  }
  const std::string partial = r.dest + ".partial-" + this_host() + "-" + std::to_string(::getpid());
  fs::remove_all(partial);  // named after this process: only a leftover of an earlier one with the same pid
  try {
    const std::uint32_t index_crc = copy_verified(source, partial, r);
    write_marker(partial, source, index_crc, r);
    sync_path(partial);
  } catch (...) {
    fs::remove_all(partial, ec);
    throw;
  }
  if (::rename(partial.c_str(), r.dest.c_str()) != 0) {
    const int err = errno;
    fs::remove_all(partial, ec);
    // Another process staged the same folder first (a stage folder on a shared filesystem).
    if ((err == ENOTEMPTY || err == EEXIST) && stale_reason(source, r.dest).empty()) {
      r.reused = true;
      return r;
    }
    fail("cannot rename " + partial + " to " + r.dest + ": " + std::strerror(err));
  }
  sync_path(fs::path(r.dest).parent_path().string());
  return r;
}

void require_staged_copy(const std::string& dir_arg) {
  const std::string dir = normal_path(dir_arg);
  const std::string where = "node " + this_host() + ": " + dir;
  const std::string marker_path = dir + "/" + kStagedMarker;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail(where + " does not exist: the data were not staged on this node (see the job's log for `dlscale stage`)");
  std::ifstream in(marker_path);
  if (!in)
    fail(where + " is not a verified staged copy: it has no " + kStagedMarker +
         " (`dlscale stage` did not finish copying and verifying it on this node)");
  std::string recorded;
  try {
    recorded = json::parse(in).value("index_crc32", "");
  } catch (const json::exception& e) {
    fail(where + ": " + kStagedMarker + " is not valid JSON: " + e.what());
  }
  const std::string index = dir + "/" + dataset_format::kIndexFile;
  if (crc32_text(file_crc32(index)) != recorded)
    fail(where + " is not the staged copy that was verified: its index.json changed after `dlscale stage` checked it");
}

}  // namespace dlscale
