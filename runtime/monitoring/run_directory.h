// The run directory contract (DESIGN.md): config.ini, metrics.jsonl,
// summary.json, model.h5, checkpoints/, log.txt. Only rank 0 writes; other
// ranks hold a RunDirectory that prints and writes nothing.
#pragma once

#include <fstream>
#include <string>

namespace dlscale {

class RunDirectory {
 public:
  // writer: this rank writes (rank 0). Creates the folder and checkpoints/;
  // refuses a folder that already holds a finished run (model.h5). A resumed
  // run appends to metrics.jsonl instead of starting it anew.
  RunDirectory(std::string path, bool writer, bool verbose, bool resuming = false);

  const std::string& path() const { return path_; }
  bool writer() const { return writer_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

  // Prints a line on stdout (when verbose) and appends it to log.txt.
  void log(const std::string& line);
  // Always printed (warnings, the start table), also to log.txt.
  void say(const std::string& line);
  void write_metric(const std::string& json_line);
  // A status line (the progress bar) redrawn in place when this rank prints
  // to a terminal; cleared before every printed line, never written to log.txt.
  bool live() const { return live_; }
  void status(const std::string& line);
  ~RunDirectory();
  // Writes config.ini / summary.json atomically.
  void write_text(const std::string& name, const std::string& text);

 private:
  std::string path_;
  void clear_status();
  bool writer_, verbose_, live_ = false, status_shown_ = false;
  std::ofstream log_, metrics_;
};

}  // namespace dlscale
