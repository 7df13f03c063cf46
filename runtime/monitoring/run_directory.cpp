// Creating and writing the run directory.
#include "runtime/monitoring/run_directory.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "runtime/core/error.h"

namespace dlscale {

namespace fs = std::filesystem;

namespace {

// Open MPI gives every rank a pseudo-terminal for stdout, whatever mpirun's
// own stdout is: under it, the terminal that counts is mpirun's (the parent).
bool stdout_is_terminal() {
  if (!isatty(STDOUT_FILENO)) return false;
  if (!std::getenv("OMPI_COMM_WORLD_SIZE")) return true;
  char target[4096];
  const std::string link = "/proc/" + std::to_string(getppid()) + "/fd/1";
  const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
  if (n <= 0) return false;
  const std::string path(target, static_cast<std::size_t>(n));
  return path.rfind("/dev/pts/", 0) == 0 || path.rfind("/dev/tty", 0) == 0;
}

}  // namespace

RunDirectory::RunDirectory(std::string path, bool writer, bool verbose, bool resuming)
    : path_(std::move(path)), writer_(writer), verbose_(verbose) {
  if (!writer_) return;
  if (fs::exists(file("model.h5")))
    fail("output folder " + path_ + " already holds a finished run (model.h5); choose another --output");
  std::error_code ec;
  fs::create_directories(file("checkpoints"), ec);
  if (ec) fail("cannot create the run directory " + path_ + ": " + ec.message());
  log_.open(file("log.txt"), std::ios::app);
  metrics_.open(file("metrics.jsonl"), resuming ? std::ios::app : std::ios::trunc);
  if (!log_ || !metrics_) fail("cannot write log.txt and metrics.jsonl in " + path_);
  live_ = verbose_ && stdout_is_terminal();
}

RunDirectory::~RunDirectory() { clear_status(); }

void RunDirectory::status(const std::string& line) {
  if (!live_ || line.empty()) return;
  std::cout << '\r' << line << "\033[K" << std::flush;  // erase what a longer line left
  status_shown_ = true;
}

void RunDirectory::clear_status() {
  if (status_shown_) std::cout << "\r\033[K" << std::flush;
  status_shown_ = false;
}

void RunDirectory::log(const std::string& line) {
  if (!writer_) return;
  clear_status();
  if (verbose_) std::cout << line << std::endl;
  log_ << line << std::endl;
}

void RunDirectory::say(const std::string& line) {
  if (!writer_) return;
  clear_status();
  std::cout << line << std::endl;
  log_ << line << std::endl;
}

void RunDirectory::write_metric(const std::string& json_line) {
  if (!writer_) return;
  metrics_ << json_line << "\n";
  metrics_.flush();  // `dlscale jobs` reads progress from here while the run goes on
}

void RunDirectory::write_text(const std::string& name, const std::string& text) {
  if (!writer_) return;
  const std::string final_path = file(name), tmp = final_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) fail("cannot write " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, final_path, ec);
  if (ec) fail("cannot rename " + tmp + " to " + final_path + ": " + ec.message());
}

}  // namespace dlscale
