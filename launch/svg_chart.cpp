// SVG line charts for report.html: axes with ticks at 1-2-5 steps, labels,
// one polyline per series, a legend that wraps; no JavaScript, no library.
#include "launch/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace dlscale {

namespace {

// The Tableau 10 colours; a dash pattern tells series apart once the
// colours repeat (sweeps of more than ten trials).
const char* const kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                               "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
const char* const kDashes[] = {"", "6 3", "2 3", "8 3 2 3"};

constexpr double kWidth = 600, kLeft = 68, kRight = 16, kTop = 34, kPlotHeight = 230;
constexpr double kLegendRow = 18;

struct Axis {
  double lo, hi, step;
};

// 1, 2 or 5 times a power of ten, giving about `target` intervals.
double nice_step(double range, int target) {
  const double raw = range / target, magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / magnitude;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * magnitude;
}

Axis make_axis(double lo, double hi, bool integer) {
  if (!(hi > lo)) {  // one value: a range around it
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= pad, hi += pad;
  }
  double step = nice_step(hi - lo, 5);
  if (integer) step = std::max(step, 1.0);
  return {std::floor(lo / step + 1e-9) * step, std::ceil(hi / step - 1e-9) * step, step};
}

std::string tick_label(double v, double step) {
  if (std::abs(v) < step * 1e-6) v = 0;
  char buf[32];
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  if (decimals > 6 || std::abs(v) >= 1e7)
    std::snprintf(buf, sizeof buf, "%.3g", v);
  else
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string fixed1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

bool finite_point(const std::pair<double, double>& p) { return std::isfinite(p.first) && std::isfinite(p.second); }

// Where each legend entry goes: left to right, wrapping at the chart's width.
std::vector<std::pair<double, double>> legend_layout(const std::vector<ChartSeries>& series, double top) {
  std::vector<std::pair<double, double>> at;
  double x = kLeft, y = top;
  for (const auto& s : series) {
    const double w = 30 + 6.2 * static_cast<double>(s.name.size()) + 14;
    if (x > kLeft && x + w > kWidth - kRight) x = kLeft, y += kLegendRow;
    at.emplace_back(x, y);
    x += w;
  }
  return at;
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string svg_line_chart(const Chart& chart) {
  double x_lo = 0, x_hi = 0, y_lo = 0, y_hi = 0;
  bool any = false;
  for (const auto& s : chart.series)
    for (const auto& p : s.points) {
      if (!finite_point(p)) continue;
      if (!any) x_lo = x_hi = p.first, y_lo = y_hi = p.second, any = true;
      x_lo = std::min(x_lo, p.first), x_hi = std::max(x_hi, p.first);
      y_lo = std::min(y_lo, p.second), y_hi = std::max(y_hi, p.second);
    }
  if (chart.y_max > chart.y_min) y_lo = std::min(y_lo, chart.y_min), y_hi = std::max(y_hi, chart.y_max);
  const Axis xa = make_axis(x_lo, x_hi, true), ya = make_axis(y_lo, y_hi, false);
  const double plot_w = kWidth - kLeft - kRight, bottom = kTop + kPlotHeight;
  auto px = [&](double x) { return kLeft + (x - xa.lo) / (xa.hi - xa.lo) * plot_w; };
  auto py = [&](double y) { return bottom - (y - ya.lo) / (ya.hi - ya.lo) * kPlotHeight; };

  std::vector<ChartSeries> shown;
  for (const auto& s : chart.series)
    if (std::any_of(s.points.begin(), s.points.end(), finite_point)) shown.push_back(s);
  const auto legend = legend_layout(shown, bottom + 52);
  const double height = (legend.empty() ? bottom + 44 : legend.back().second + kLegendRow) + 8;

  std::ostringstream o;
  o << "<svg class=\"plot\" id=\"plot-" << html_escape(chart.id) << "\" width=\"" << kWidth << "\" height=\""
    << fixed1(height) << "\" viewBox=\"0 0 " << kWidth << " " << fixed1(height)
    << "\" font-family=\"sans-serif\" font-size=\"11\" role=\"img\">\n"
    << "<title>" << html_escape(chart.title) << "</title>\n"
    << "<text x=\"" << kLeft << "\" y=\"20\" font-size=\"14\" font-weight=\"bold\">" << html_escape(chart.title)
    << "</text>\n";
  // Grid and ticks; the y ticks only when there is data to scale them by.
  o << "<g stroke=\"#e6e6e6\" stroke-width=\"1\">\n";
  const int x_ticks = static_cast<int>(std::lround((xa.hi - xa.lo) / xa.step));
  const int y_ticks = static_cast<int>(std::lround((ya.hi - ya.lo) / ya.step));
  if (any) {
    for (int i = 0; i <= x_ticks; ++i)
      o << "<line x1=\"" << fixed1(px(xa.lo + i * xa.step)) << "\" y1=\"" << kTop << "\" x2=\""
        << fixed1(px(xa.lo + i * xa.step)) << "\" y2=\"" << bottom << "\"/>\n";
    for (int i = 0; i <= y_ticks; ++i)
      o << "<line x1=\"" << kLeft << "\" y1=\"" << fixed1(py(ya.lo + i * ya.step)) << "\" x2=\"" << kWidth - kRight
        << "\" y2=\"" << fixed1(py(ya.lo + i * ya.step)) << "\"/>\n";
  }
  o << "</g>\n<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << plot_w << "\" height=\"" << kPlotHeight
    << "\" fill=\"none\" stroke=\"#888\"/>\n";
  if (any) {
    o << "<g class=\"x-ticks\" text-anchor=\"middle\">\n";
    for (int i = 0; i <= x_ticks; ++i)
      o << "<text x=\"" << fixed1(px(xa.lo + i * xa.step)) << "\" y=\"" << bottom + 15 << "\">"
        << tick_label(xa.lo + i * xa.step, xa.step) << "</text>\n";
    o << "</g>\n<g class=\"y-ticks\" text-anchor=\"end\">\n";
    for (int i = 0; i <= y_ticks; ++i)
      o << "<text x=\"" << kLeft - 6 << "\" y=\"" << fixed1(py(ya.lo + i * ya.step) + 4) << "\">"
        << tick_label(ya.lo + i * ya.step, ya.step) << "</text>\n";
    o << "</g>\n";
  }
  o << "<text x=\"" << fixed1(kLeft + plot_w / 2) << "\" y=\"" << bottom + 34 << "\" text-anchor=\"middle\">"
    << html_escape(chart.x_label) << "</text>\n"
    << "<text transform=\"translate(14 " << fixed1(kTop + kPlotHeight / 2) << ") rotate(-90)\" text-anchor=\"middle\">"
    << html_escape(chart.y_label) << "</text>\n";
  if (!any) {
    o << "<text class=\"no-data\" x=\"" << fixed1(kLeft + plot_w / 2) << "\" y=\"" << fixed1(kTop + kPlotHeight / 2)
      << "\" text-anchor=\"middle\" font-size=\"13\" fill=\"#777\">"
      << html_escape(chart.no_data.empty() ? "no data" : chart.no_data) << "</text>\n";
  }
  for (std::size_t i = 0; i < shown.size(); ++i) {
    const ChartSeries& s = shown[i];
    const std::string color = kColors[i % 10], dash = kDashes[(i / 10) % 4];
    o << "<polyline class=\"series\" data-series=\"" << html_escape(s.name) << "\" fill=\"none\" stroke=\"" << color
      << "\" stroke-width=\"1.6\"" << (dash.empty() ? "" : " stroke-dasharray=\"" + dash + "\"") << " points=\"";
    bool first = true;
    for (const auto& p : s.points)
      if (finite_point(p)) {
        o << (first ? "" : " ") << fixed1(px(p.first)) << "," << fixed1(py(p.second));
        first = false;
      }
    o << "\"/>\n";
    if (s.markers) {
      o << "<g fill=\"" << color << "\">";
      for (const auto& p : s.points)
        if (finite_point(p)) o << "<circle cx=\"" << fixed1(px(p.first)) << "\" cy=\"" << fixed1(py(p.second)) << "\" r=\"2.5\"/>";
      o << "</g>\n";
    }
    const auto [lx, ly] = legend[i];
    o << "<g class=\"legend\"><line x1=\"" << fixed1(lx) << "\" y1=\"" << fixed1(ly - 4) << "\" x2=\"" << fixed1(lx + 24)
      << "\" y2=\"" << fixed1(ly - 4) << "\" stroke=\"" << color << "\" stroke-width=\"2.5\""
      << (dash.empty() ? "" : " stroke-dasharray=\"" + dash + "\"") << "/><text x=\"" << fixed1(lx + 30) << "\" y=\""
      << fixed1(ly) << "\">" << html_escape(s.name) << "</text></g>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace dlscale
