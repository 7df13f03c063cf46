// Seeded random numbers with results that do not depend on the standard
// library's distribution implementations, so a seed means the same weights
// on every machine.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace dlscale {

class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0) : engine_(seed) {}
  std::uint64_t next() { return engine_(); }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  double normal(double mean = 0.0, double stddev = 1.0);
  // Uniform integer in [0, n).
  std::uint64_t below(std::uint64_t n) { return n ? next() % n : 0; }
  std::mt19937_64& engine() { return engine_; }
  void reseed(std::uint64_t seed) { *this = Rng(seed); }
  // The whole generator state as text (checkpoints restore it exactly).
  std::string state() const;
  void set_state(const std::string& text);

 private:
  std::mt19937_64 engine_;
  bool have_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace dlscale
