// The verbose training table, in the layout of MATLAB's trainNetwork output.
#pragma once

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

}  // namespace dlscale
