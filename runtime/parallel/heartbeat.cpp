#include "runtime/parallel/heartbeat.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace dlscale {

std::string heartbeat_file(const std::string& dir, int rank) { return dir + "/rank-" + std::to_string(rank); }

std::string to_json_line(const Heartbeat& b) {
  nlohmann::json j = {{"rank", b.rank},   {"host", b.host},         {"pid", b.pid},
                      {"process_started", b.process_started}, {"time", b.time}, {"computes", b.computes}};
  if (b.last)
    j["last"] = {{"seq", b.last->seq},           {"kind", b.last->kind},       {"bytes", b.last->bytes},
                 {"iteration", b.last->iteration}, {"started", b.last->started}, {"ended", b.last->ended}};
  j["progress"] = b.progress.count;
  if (!b.progress.activity.empty())
    j["activity"] = {{"what", b.progress.activity}, {"limit", b.progress.activity_limit}};
  return j.dump() + "\n";
}

std::optional<Heartbeat> parse_heartbeat(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("rank") || !j.contains("time")) return std::nullopt;
  try {
    Heartbeat b;
    b.rank = j.at("rank").get<int>();
    b.host = j.value("host", "");
    b.pid = j.value("pid", 0L);
    b.process_started = j.value("process_started", 0.0);
    b.time = j.at("time").get<double>();
    b.computes = j.value("computes", true);
    if (j.contains("last")) {
      const auto& l = j["last"];
      b.last = CollectiveEntry{l.value("seq", std::int64_t{0}), l.value("kind", ""), l.value("bytes", std::int64_t{0}),
                               l.value("iteration", std::int64_t{-1}), l.value("started", 0.0), l.value("ended", 0.0)};
    }
    b.progress.count = j.value("progress", std::int64_t{0});
    if (j.contains("activity")) {
      b.progress.activity = j["activity"].value("what", "");
      b.progress.activity_limit = j["activity"].value("limit", 0.0);
    }
    return b;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

std::optional<Heartbeat> read_heartbeat(const std::string& dir, int rank) {
  std::ifstream in(heartbeat_file(dir, rank));
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return parse_heartbeat(text.str());
}

std::vector<std::optional<Heartbeat>> read_heartbeats(const std::string& dir, int world_size) {
  std::vector<std::optional<Heartbeat>> beats;
  for (int r = 0; r < world_size; ++r) beats.push_back(read_heartbeat(dir, r));
  return beats;
}

HeartbeatWriter::HeartbeatWriter(std::string dir, int rank, const CollectiveRecord& record, double period_s)
    : dir_(std::move(dir)), record_(record), link_(dir_, rank), period_s_(period_s) {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  beat_.rank = rank;
  beat_.host = host;
  beat_.pid = static_cast<long>(getpid());
  beat_.process_started = wall_seconds();
  write_once();  // at once: a peer naming the silent ranks finds this start's file, not the last start's
  thread_ = std::thread([this] { run(); });
}

HeartbeatWriter::~HeartbeatWriter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void HeartbeatWriter::set_computes(bool computes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    beat_.computes = computes;
  }
  write_once();
}

bool HeartbeatWriter::superseded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return superseded_;
}

bool HeartbeatWriter::write_once() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (superseded_) return true;
  const std::string path = heartbeat_file(dir_, beat_.rank);
  // A later start of the job (requeued while this process hung on a node cut
  // off) owns the file now: leave it to that one.
  if (auto other = read_heartbeat(dir_, beat_.rank);
      other && other->pid != beat_.pid && other->process_started > beat_.process_started) {
    superseded_ = true;
    return true;
  }
  beat_.time = wall_seconds();
  beat_.last = record_.last();
  beat_.progress = record_.progress();
  const std::string text = to_json_line(beat_);
  lock.unlock();
  // Best effort: a full disk or a folder not there yet costs one beat, not
  // the run (beats missing for collective-timeout read as silence, to peers
  // and to idle ranks alike). Only the last level is made: the run directory
  // is rank 0's to create, after every check a user's mistake could fail.
  std::error_code ec;
  std::filesystem::create_directory(dir_, ec);
  link_.beat();
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return false;
  const bool written = std::fputs(text.c_str(), f) >= 0;
  return std::fclose(f) == 0 && written && std::rename(tmp.c_str(), path.c_str()) == 0;
}

void HeartbeatWriter::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  // Until the run directory exists (rank 0 makes it after the start-up
  // checks) a beat fails: try again soon, so a rank stopped early in
  // training has left a file.
  bool written = false;
  while (!cv_.wait_for(lock, std::chrono::duration<double>(written ? period_s_ : 0.1), [this] { return stop_; })) {
    lock.unlock();
    written = write_once();
    lock.lock();
  }
}

}  // namespace dlscale
