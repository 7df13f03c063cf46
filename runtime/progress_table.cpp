// Formatting of the verbose training table.
#include "runtime/progress_table.h"

#include <cstdio>

namespace dlscale {

namespace {
const char* kTitles =
    "|  Epoch  |  Iteration  |  Time Elapsed  |  Mini-batch  |  Validation  |  Mini-batch  |  Validation  |"
    "  Base Learning  |";
const char* kUnits =
    "|         |             |   (hh:mm:ss)   |   Accuracy   |   Accuracy   |     Loss     |     Loss     |"
    "      Rate       |";
}  // namespace

std::string progress_rule() { return std::string(std::string(kTitles).size(), '='); }

std::string progress_header() {
  return progress_rule() + "\n" + kTitles + "\n" + kUnits + "\n" + progress_rule();
}

std::string format_elapsed(double seconds) {
  long s = static_cast<long>(seconds);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

std::string progress_row(const ProgressRow& r) {
  char val_acc[16] = "", val_loss[16] = "";
  if (r.validation_accuracy) std::snprintf(val_acc, sizeof val_acc, "%.2f%%", *r.validation_accuracy * 100);
  if (r.validation_loss) std::snprintf(val_loss, sizeof val_loss, "%.4f", *r.validation_loss);
  char buf[256];
  std::snprintf(buf, sizeof buf, "| %7lld | %11lld | %14s | %11.2f%% | %12s | %12.4f | %12s | %15.4g |",
                static_cast<long long>(r.epoch), static_cast<long long>(r.iteration),
                format_elapsed(r.elapsed_s).c_str(), r.minibatch_accuracy * 100, val_acc, r.minibatch_loss,
                val_loss, r.learn_rate);
  return buf;
}

}  // namespace dlscale
