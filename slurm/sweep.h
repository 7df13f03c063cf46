// Hyper-parameter sweeps: a SWEEP.ini names a base config and the options to
// vary (a grid, random samples, or both); each trial is one independent
// training of the base config with its overrides. The trials run as one job
// array (JOB/trials/<i>/, see job_script.h): queued by Slurm on a slurm
// profile, started at most K at a time by `dlscale sweep` on the local one.
// When all have ended, JOB/results.csv and a printed table rank them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "slurm/job_folder.h"
#include "slurm/job_status.h"

namespace dlscale {

using Overrides = std::vector<std::pair<std::string, std::string>>;  // option -> value, in sweep-file order

struct RandomRange {
  std::string option;
  double lo = 0, hi = 0;
  bool log = false;      // log-uniform
  bool integer = false;  // both ends written as integers: draws are rounded
};

struct SweepSpec {
  std::string file;     // the sweep file
  std::string base;     // the base config, absolute (given relative to the sweep file)
  std::string name;     // job name; default: the sweep file's stem
  std::string metric = "validation_accuracy";
  int parallel = 0;     // at most this many trials at once; 0: decided by where they run
  int threads_per_trial = 1;  // CPU threads each trial may use when trials share the CPUs
  int samples = 0;      // random draws per grid point (0: no random options)
  unsigned long long seed = 0;
  std::vector<std::pair<std::string, std::vector<std::string>>> grid;
  std::vector<RandomRange> random;
};

// Reads a sweep file. `known_options` are the `dlscale train` option names a
// grid or random key may vary. Mistakes are a UsageError naming file, line and key.
SweepSpec parse_sweep(const std::string& path, const std::vector<std::string>& known_options);

// Whether `metric` ranks a higher value first (accuracies) or a lower (losses).
bool metric_higher_is_better(const std::string& metric);

// The trials: the cartesian product of the grid (last option varying
// fastest), each with `samples` random draws from a generator seeded by `seed`.
std::vector<Overrides> expand_trials(const SweepSpec& spec);

// The swept option names, in order (the columns of the results table).
std::vector<std::string> swept_options(const SweepSpec& spec);

// The base config with the overrides in place of its own lines for those
// options, so that each trial's config.ini says exactly what it trains.
std::string trial_config(const std::string& base_config_text, const Overrides& overrides);

struct TrialResult {
  int trial = 0;
  Overrides overrides;
  JobState state = JobState::unknown;
  std::string detail;
  // From trials/<i>/run/summary.json; NaN where the run has none.
  double validation_accuracy, validation_loss, test_accuracy, test_loss, wall_time_s;
};

// Reads each trial's summary. `states` has one entry per trial.
std::vector<TrialResult> collect_results(const JobRecord& job, const std::vector<Overrides>& trials,
                                         const std::vector<JobStatus>& states);

// Best first by `metric`; finished trials without the metric next, then the
// ones that did not finish. Ties keep trial order.
void sort_results(std::vector<TrialResult>& results, const std::string& metric);

// results.csv and the printed table (best trial marked '*') of sorted results.
std::string results_csv(const std::vector<TrialResult>& results, const std::vector<std::string>& options);
std::string results_table(const std::vector<TrialResult>& results, const std::vector<std::string>& options,
                          const std::string& metric);

}  // namespace dlscale
