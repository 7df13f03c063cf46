// The verbose training table, in the layout of MATLAB's trainNetwork output,
// and the live progress bar drawn under it on a terminal.
#pragma once

#include <chrono>

#include <cstdint>
#include <optional>
#include <string>

namespace dlscale {

struct ProgressRow {
  std::int64_t epoch = 0;  // 1-based
  std::int64_t iteration = 0;
  double elapsed_s = 0;
  double minibatch_accuracy = 0, minibatch_loss = 0;
  std::optional<double> validation_accuracy, validation_loss;
  double learn_rate = 0;
};

std::string progress_header();
std::string progress_row(const ProgressRow& row);
std::string progress_rule();
std::string format_elapsed(double seconds);  // hh:mm:ss

// One state of the progress bar (rank 0, stdout a terminal).
struct ProgressBarState {
  std::int64_t epoch = 1, max_epochs = 1;  // the epoch in progress, 1-based
  std::int64_t batch = 0, batches_per_epoch = 1;  // batches done in this epoch
  std::int64_t iterations_left = 0;               // in the whole run
  double seconds_per_iteration = 0;               // <= 0: not known yet
  std::int64_t global_batch = 0;                  // samples per iteration, all ranks
};

// done / total within [0, 1]; 0 when total <= 0.
double progress_fraction(std::int64_t done, std::int64_t total);
// mm:ss below an hour, h:mm:ss above; "--:--" when unknown (negative, NaN, inf).
std::string format_eta(double seconds);
// e.g. "epoch 2/6 [#########-----------]  23/47  6100 samples/s  ETA 00:04  run 01:12"
std::string progress_bar(const ProgressBarState& state, int width = 24);

// Paces the bar: the speed since training began, and at most ten redraws a
// second (always at the first step and at the end of an epoch).
class ProgressBar {
 public:
  ProgressBar(std::int64_t max_epochs, std::int64_t batches_per_epoch, std::int64_t global_batch);
  // After a step: epochs_done and batch_in_epoch as the trainer counts them
  // (batch_in_epoch 0 right after an epoch ends). "" when no redraw is due.
  std::string update(std::int64_t iteration, std::int64_t epochs_done, std::int64_t batch_in_epoch);

 private:
  using Clock = std::chrono::steady_clock;
  std::int64_t max_epochs_, batches_per_epoch_, global_batch_, first_iteration_ = -1;
  Clock::time_point t_first_, t_drawn_;
};

}  // namespace dlscale
