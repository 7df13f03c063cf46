// Box-Muller normal samples on top of mt19937_64.
#include "runtime/core/rng.h"

#include <cmath>
#include <sstream>

#include "runtime/core/error.h"

namespace dlscale {

double Rng::normal(double mean, double stddev) {
  if (have_spare_) {
    have_spare_ = false;
    return mean + stddev * spare_;
  }
  double u1 = 0.0;
  while (u1 <= 0.0) u1 = uniform();
  double u2 = uniform();
  double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = r * std::sin(2.0 * M_PI * u2);
  have_spare_ = true;
  return mean + stddev * r * std::cos(2.0 * M_PI * u2);
}

std::string Rng::state() const {
  std::ostringstream out;
  out.precision(17);
  out << engine_ << ' ' << have_spare_ << ' ' << spare_;
  return out.str();
}

void Rng::set_state(const std::string& text) {
  std::istringstream in(text);
  in >> engine_ >> have_spare_ >> spare_;
  if (!in) fail("corrupt random-number state in a checkpoint");
}

}  // namespace dlscale
