// Formatting of the verbose training table.
#include "runtime/monitoring/progress_table.h"

#include <algorithm>
#include <cmath>
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

double progress_fraction(std::int64_t done, std::int64_t total) {
  if (total <= 0) return 0;
  return std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0);
}

std::string format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const long s = std::lround(seconds);
  char buf[32];
  if (s < 3600)
    std::snprintf(buf, sizeof buf, "%02ld:%02ld", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

std::string progress_bar(const ProgressBarState& st, int width) {
  const double f = progress_fraction(st.batch, st.batches_per_epoch);
  const int filled = static_cast<int>(f * width);
  const bool known = st.seconds_per_iteration > 0;
  const double epoch_left = known ? (st.batches_per_epoch - st.batch) * st.seconds_per_iteration : -1;
  const double run_left = known ? st.iterations_left * st.seconds_per_iteration : -1;
  char speed[32] = "-";
  if (known) std::snprintf(speed, sizeof speed, "%.0f", st.global_batch / st.seconds_per_iteration);
  const int digits = static_cast<int>(std::to_string(st.batches_per_epoch).size());
  char buf[256];
  std::snprintf(buf, sizeof buf, "epoch %lld/%lld [%s%s] %*lld/%lld  %s samples/s  ETA %s  run %s",
                static_cast<long long>(st.epoch), static_cast<long long>(st.max_epochs),
                std::string(filled, '#').c_str(), std::string(width - filled, '-').c_str(), digits,
                static_cast<long long>(st.batch), static_cast<long long>(st.batches_per_epoch), speed,
                format_eta(epoch_left).c_str(), format_eta(run_left).c_str());
  return buf;
}

ProgressBar::ProgressBar(std::int64_t max_epochs, std::int64_t batches_per_epoch, std::int64_t global_batch)
    : max_epochs_(max_epochs), batches_per_epoch_(batches_per_epoch), global_batch_(global_batch) {}

std::string ProgressBar::update(std::int64_t iteration, std::int64_t epochs_done, std::int64_t batch_in_epoch) {
  const auto now = Clock::now();
  const bool first = first_iteration_ < 0, epoch_end = batch_in_epoch == 0;
  if (first) first_iteration_ = iteration, t_first_ = now;
  if (!first && !epoch_end && now - t_drawn_ < std::chrono::milliseconds(100)) return "";
  t_drawn_ = now;
  ProgressBarState st;
  st.max_epochs = max_epochs_, st.batches_per_epoch = batches_per_epoch_, st.global_batch = global_batch_;
  st.epoch = epoch_end ? epochs_done : epochs_done + 1;
  st.batch = epoch_end ? batches_per_epoch_ : batch_in_epoch;
  st.iterations_left = std::max<std::int64_t>(0, max_epochs_ * batches_per_epoch_ - iteration);
  // The first step of this run sets the clock: its own time is not known.
  if (iteration > first_iteration_)
    st.seconds_per_iteration =
        std::chrono::duration<double>(now - t_first_).count() / static_cast<double>(iteration - first_iteration_);
  return progress_bar(st);
}

}  // namespace dlscale
