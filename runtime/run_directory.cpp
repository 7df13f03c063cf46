// Creating and writing the run directory.
#include "runtime/run_directory.h"

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "runtime/error.h"

namespace dlscale {

namespace fs = std::filesystem;

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
}

void RunDirectory::log(const std::string& line) {
  if (!writer_) return;
  if (verbose_) std::cout << line << std::endl;
  log_ << line << std::endl;
}

void RunDirectory::say(const std::string& line) {
  if (!writer_) return;
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
