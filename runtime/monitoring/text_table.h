// Plain-text tables for terminals and logs (jobs, monitor, sweep results).
#pragma once

#include <string>
#include <vector>

namespace dlscale {

// Rows with their cells left-aligned in columns two spaces apart, trailing
// spaces trimmed, one "\n"-terminated line per row.
std::string align_columns(const std::vector<std::vector<std::string>>& rows);

}  // namespace dlscale
