// SVG line charts and HTML escaping for report.html (launch/report): the
// plotting, apart from which plots a page shows.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlscale {

// Tested on their own (tests/launch/report_test.cpp).
std::string html_escape(std::string_view text);

struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y)
  bool markers = false;  // dots on the points too (sparse series such as validations)
};

struct Chart {
  std::string id, title, x_label, y_label;
  std::vector<ChartSeries> series;
  std::string no_data;  // what the chart says when it has no points
  double y_min = 0, y_max = 0;  // a fixed y range when y_max > y_min; else from the data
};

// An <svg class="plot" id="plot-ID"> line chart with axes, ticks, labels and
// a legend; one <polyline> per series that has points.
std::string svg_line_chart(const Chart& chart);

}  // namespace dlscale
