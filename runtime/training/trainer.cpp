// The training loop: sample, forward, loss, backward, all-reduce, update;
// validation, checkpoints, preemption and metrics; rank 0 writes the run
// directory.
#include "runtime/training/trainer.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <thread>
#include <nlohmann/json.hpp>

#include "io/loader.h"
#include "io/model_file.h"
#include "io/staging.h"
#include "layers/softmax.h"
#include "runtime/core/blas.h"
#include "runtime/training/checkpoint.h"
#include "runtime/training/evaluation.h"
#include "runtime/training/gpu_training.h"
#include "runtime/parallel/gradient_buckets.h"
#include "runtime/parallel/idle_wait.h"
#include "runtime/parallel/job_setup.h"
#include "runtime/parallel/lost_ranks.h"
#include "runtime/training/loss_scaler.h"
#include "runtime/parallel/nccl_env.h"
#include "runtime/training/preemption.h"
#include "runtime/monitoring/progress_table.h"
#include "runtime/monitoring/run_directory.h"
#include "runtime/monitoring/telemetry.h"

namespace dlscale {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
std::string hash_text(const std::string& text) { return std::to_string(std::hash<std::string>{}(text)); }

// summary.json's "stragglers": every rank named during the run (rank 0's telemetry).
nlohmann::json stragglers_json(const std::vector<StragglerReport>& reports) {
  nlohmann::json all = nlohmann::json::array();
  for (const auto& r : reports)
    all.push_back({{"rank", r.rank},
                   {"host", r.host},
                   {"whole_node", r.whole_node},
                   {"first_time_s", r.first_time_s},
                   {"steps", r.steps},
                   {"mean_excess_s", r.mean_excess_s},
                   {"share_of_step", r.share_of_step},
                   {"recovered", r.recovered}});
  return all;
}

nlohmann::json link_stragglers_json(const std::vector<LinkStragglerReport>& reports) {
  nlohmann::json all = nlohmann::json::array();
  for (const auto& r : reports)
    all.push_back({{"host", r.host},
                   {"ranks", r.ranks},
                   {"first_time_s", r.first_time_s},
                   {"steps", r.steps},
                   {"mean_cost_s", r.mean_cost_s},
                   {"share_of_step", r.share_of_step},
                   {"recovered", r.recovered}});
  return all;
}

DType precision_dtype(const std::string& precision, const ExecutionPlan& plan) {
  if (precision == "single") return DType::f32;
  if (precision == "double") return DType::f64;
  if (precision == "automatic-mixed" && plan.gpu_index < 0)
    fail("training-precision=automatic-mixed needs a GPU; this rank trains on the CPU (use single or double)");
  // The master weights (and the returned network) are single precision; the
  // GPU computes dense and conv2d in mixed-precision-type.
  if (precision == "automatic-mixed") return DType::f32;
  fail("unknown training-precision '" + precision + "' (expected single, double or automatic-mixed)");
}

// Every rank must train the same thing: a differing config means a broken
// job script, and continuing would hang or silently diverge.
void check_ranks_agree(const std::string& config, Communicator& comm) {
  auto all = comm.allgather(hash_text(config));
  for (int r = 1; r < comm.size(); ++r)
    if (all[r] != all[0])
      fail("rank " + std::to_string(r) + " has a different configuration than rank 0; every rank must be started "
           "with the same options and config file");
}

// DLSCALE_FAIL_AT=RANK:ITERATION makes that rank throw at that iteration, and
// DLSCALE_STOP_AT=ITERATION acts as if a preemption signal arrived then, so
// tests can check failure and resume paths (LBANN has the same kind of hook).
// DLSCALE_HANG_AT=RANK:ITERATION makes that rank stop answering,
// DLSCALE_SIGNAL_AT=RANK:ITERATION:SIGNAL makes it send itself that signal
// (SIGKILL: a killed rank; SIGTERM: a preemption reaching one rank first), and
// DLSCALE_CHECKPOINT_DELAY=SECONDS makes rank 0's checkpoint writes that slow,
// and DLSCALE_SLOW_RANK=RANK:MILLISECONDS makes that rank (every rank for
// RANK *) sleep that long in each step's compute: a straggler.
// DLSCALE_HANG_AT=RANK:0 makes that rank hang before job setup (it never
// reaches start-up), and DLSCALE_IDLE_RANKS=R,S,... makes those ranks idle as
// ranks without a GPU of their own are under parallel-auto when the others
// have one (this machine has none).
struct TestHooks {
  int fail_rank = -1, hang_rank = -1, signal_rank = -1, signal = 0, slow_rank = -1;
  std::int64_t fail_iteration = -1, stop_iteration = -1, hang_iteration = -1, signal_iteration = -1;
  double checkpoint_delay_s = 0, slow_s = 0;
  bool slow_every_rank = false;
  std::vector<int> idle_ranks;
  bool slow(int rank) const { return slow_s > 0 && (slow_every_rank || rank == slow_rank); }
  static TestHooks from_environment() {
    TestHooks h;
    if (const char* v = std::getenv("DLSCALE_SLOW_RANK")) {
      double ms = 0;
      h.slow_every_rank = v[0] == '*';
      if (h.slow_every_rank ? std::sscanf(v, "*:%lf", &ms) == 1 : std::sscanf(v, "%d:%lf", &h.slow_rank, &ms) == 2)
        h.slow_s = ms / 1000;
    }
    if (const char* v = std::getenv("DLSCALE_SIGNAL_AT"))
      std::sscanf(v, "%d:%ld:%d", &h.signal_rank, &h.signal_iteration, &h.signal);
    if (const char* v = std::getenv("DLSCALE_CHECKPOINT_DELAY")) h.checkpoint_delay_s = std::atof(v);
    if (const char* v = std::getenv("DLSCALE_FAIL_AT")) std::sscanf(v, "%d:%ld", &h.fail_rank, &h.fail_iteration);
    if (const char* v = std::getenv("DLSCALE_HANG_AT")) std::sscanf(v, "%d:%ld", &h.hang_rank, &h.hang_iteration);
    if (const char* v = std::getenv("DLSCALE_STOP_AT")) std::sscanf(v, "%ld", &h.stop_iteration);
    if (const char* v = std::getenv("DLSCALE_IDLE_RANKS"))
      for (const char* p = v; *p;) {
        char* end = nullptr;
        const long r = std::strtol(p, &end, 10);
        if (end == p) break;
        h.idle_ranks.push_back(static_cast<int>(r));
        p = *end == ',' ? end + 1 : end;
      }
    return h;
  }
};

// One training run on the communicator of the computing ranks.
class TrainingRun {
 public:
  // plan: this rank's device (CPU, or the GPU it trains on).
  // watchdog: bounds every collective wait (set on comm for the run's length).
  TrainingRun(const TrainingOptions& o, Communicator& comm, const JobSetup& job, const ExecutionPlan& plan,
              CollectiveWatchdog& watchdog, Clock::time_point t_start);
  ~TrainingRun() {
    comm_.set_watchdog(nullptr);
    comm_.set_fixed_order_sums(false);
  }
  TrainingResult run();

 private:
  void announce();
  void resume_if_asked();
  // false: stop training. next: the batch after this one, staged to the GPU during this step.
  bool train_one_batch(const Batch& batch, const Batch* next);
  // The loss of one step on the CPU; false in *stepped when the loss scaler skipped it.
  LossResult cpu_step(const Batch& batch, double lr, double normalizer, bool* stepped);
  bool log_step(const LossResult& loss, double lr);
  std::string eval_line(const char* what, double accuracy, double loss) const;
  void run_validation();
  void sync_buffers();
  EvalResult evaluate_on(const DatasetInfo& data);  // on the GPU for a GPU rank
  void checkpoint();
  bool stop_requested(double local_loss);
  // Seconds this rank has waited for the others in gradient all-reduces, over
  // all steps: left out of the compute time telemetry compares (stragglers.h).
  double peer_wait_seconds() const {
    return buckets_->exposed_wait_seconds() + (gpu_ ? gpu_->peer_wait_seconds() : 0);
  }
  [[noreturn]] void fail_out_of_memory();
  TrainingResult finish();

  const TrainingOptions& o_;
  Communicator& comm_;
  const JobSetup& job_;
  const ExecutionPlan& plan_;
  Clock::time_point t_start_, t_last_checkpoint_;
  DType dtype_;
  DatasetInfo train_;
  std::optional<DatasetInfo> validation_, test_;
  std::unique_ptr<Network> net_;
  std::optional<DistributedSampler> sampler_;
  std::optional<LearnRateSchedule> schedule_;
  std::unique_ptr<Optimizer> optimizer_;
  std::optional<GradientBuckets> buckets_;
  std::optional<LossScaler> loss_scaler_;  // when loss scaling is on
  // A GPU rank's device copy of the network and its step; net_ and
  // optimizer_ stay the master copy (updated by pull_from_device()).
  std::unique_ptr<GpuTraining> gpu_;
  std::optional<RunDirectory> dir_;
  // Observability: RUN/telemetry.jsonl and peak memory (every rank), the progress bar (rank 0 on a terminal).
  std::optional<Telemetry> telemetry_;
  std::optional<ProgressBar> bar_;
  bool telemetry_due_ = false;  // some rank's sample timer fired (learnt in stop_requested)
  CheckpointIdentity identity_;
  std::string checkpoint_dir_;
  std::vector<std::pair<std::int64_t, std::string>> checkpoints_;  // written by this run: (iteration, path)
  TrainingState state_;
  TestHooks hooks_ = TestHooks::from_environment();
  CollectiveWatchdog& watchdog_;
  TrainingResult result_;
  std::optional<double> last_val_acc_, last_val_loss_;
  double eval_time_ = 0;  // validation time, excluded from samples_per_second
  Tensor dlogits_;
};

TrainingRun::TrainingRun(const TrainingOptions& o, Communicator& comm, const JobSetup& job, const ExecutionPlan& plan,
                         CollectiveWatchdog& watchdog, Clock::time_point t_start)
    : o_(o), comm_(comm), job_(job), plan_(plan), t_start_(t_start), t_last_checkpoint_(t_start),
      dtype_(precision_dtype(o.training_precision, plan)), watchdog_(watchdog) {
  comm_.set_watchdog(&watchdog_);
  set_step_boundary_wait(o.collective_timeout_s);
  // Deterministic mode fixes the order of every floating-point sum over ranks
  // (gradients, losses, evaluation sums) itself, so a run does not depend on
  // which all-reduce algorithm MPI picks for the rank count and placement.
  comm_.set_fixed_order_sums(o.deterministic);
  // Everything a user can get wrong is checked before the run directory exists.
  // The ranks of a node read the same files (shared or staged there): they
  // split the shards' CRC checks, so each node reads a dataset once at start.
  const ShardChecks shard_checks{comm.local_rank(), comm.local_size(), [&comm](const std::string& mine) {
                                   const auto all = comm.allgather(mine);
                                   for (std::size_t r = 0; r < all.size(); ++r)
                                     if (!all[r].empty())
                                       return all.size() > 1 ? "rank " + std::to_string(r) + ": " + all[r] : all[r];
                                   return std::string();
                                 }};
  if (o.staged_data)
    for (const std::string* dir : {&o.train_data, &o.validation_data, &o.test_data})
      if (!dir->empty()) require_staged_copy(*dir);
  train_ = open_dataset(o.train_data, shard_checks);
  if (!o.validation_data.empty()) validation_ = open_dataset(o.validation_data, shard_checks);
  if (!o.test_data.empty()) test_ = open_dataset(o.test_data, shard_checks);
  net_ = std::make_unique<Network>(o.network, dtype_, o.seed);
  check_data_fits(*net_, train_, "training");
  if (validation_) check_data_fits(*net_, *validation_, "validation");
  if (test_) check_data_fits(*net_, *test_, "test");
  sampler_.emplace(train_.num_samples, o.mini_batch_size, comm.rank(), comm.size(), o.shuffle, o.seed);
  schedule_.emplace(o.schedule, sampler_->batches_per_epoch(), o.max_epochs);
  optimizer_ = make_optimizer(o.solver);
  // Each rank's gradient is d(sum of its losses / global batch): the sum over
  // ranks is exactly the mean gradient of the global batch.
  buckets_.emplace(net_->params(), comm, static_cast<std::size_t>(o.gradient_bucket_mib * (1 << 20)));
  check_ranks_agree(o.config_text + "\nbuckets " + buckets_->plan_signature(), comm);
  for (auto& [name, t] : net_->named_tensors()) comm.broadcast(*t, 0);
  net_->decorrelate_random_streams(comm.rank());
  std::string network_text = to_string(o.network.input_shape) + "\n" + o.training_precision + "\n";
  if (!o.half_type().empty()) network_text += o.half_type() + "\n";
  for (const auto& line : o.network.layer_lines) network_text += line + "\n";
  identity_ = {hash_text(network_text), hash_text(o.config_text), o.mini_batch_size, o.seed, shuffle_name(o.shuffle),
               loss_scaling_enabled(o.loss_scale, o.half_type())};
  // A NCCL_ALGO that deterministic mode cannot keep fails here, before the run directory exists.
  if (o.deterministic && job.plan.all_gpu() && comm.size() > 1)
    deterministic_nccl_algo(std::getenv("NCCL_ALGO"), comm.rank());
  checkpoint_dir_ = o.checkpoint_path.empty() ? o.output + "/checkpoints" : o.checkpoint_path;
  std::vector<std::string> claim_notes;
  if (o.resume.empty()) claim_checkpoint_folder(checkpoint_dir_, o.overwrite, comm, claim_notes);
  dir_.emplace(o.output, comm.rank() == 0, o.verbose, !o.resume.empty());
  for (const auto& n : claim_notes) dir_->say("note: " + n);
  telemetry_.emplace(comm, job, dir_->file("telemetry.jsonl"), dir_->writer(), !o.resume.empty());
  telemetry_->on_notice([this](const std::string& line) { dir_->say(line); });
  telemetry_->set_reduce_bytes(net_->parameter_count() * static_cast<std::int64_t>(size_of(dtype_)));
  if (dir_->live()) bar_.emplace(o.max_epochs, sampler_->batches_per_epoch(), o.mini_batch_size);
  if (loss_scaling_enabled(o.loss_scale, o.half_type())) {
    state_.loss_scale.scale = o.loss_scale.initial_scale;  // a resumed run takes the checkpoint's
    loss_scaler_.emplace(o.loss_scale, state_.loss_scale);
  }
}

void TrainingRun::announce() {
  for (const auto& d : job_.devices)
    if (d != "idle") result_.devices.push_back(d);
  dir_->write_text("config.ini", o_.config_text);
  dir_->say("dlscale: " + std::to_string(job_.ranks.size()) + " rank(s), " + std::to_string(comm_.size()) +
            " computing, execution-environment " + job_.plan.ranks[0].environment + ", precision " +
            o_.training_precision +
            (o_.half_type().empty()
                 ? std::string()
                 : " (" + o_.half_type() + (loss_scaler_ ? " math, dynamic loss scaling)" : " math)")));
  dir_->say(job_.table);
  for (const auto& note : job_.notes) dir_->say("note: " + note);
  // Drop-last with the same order every epoch drops the same samples every
  // epoch: they are never trained on.
  const std::int64_t dropped = train_.num_samples % o_.mini_batch_size;
  if (dropped > 0 && o_.shuffle != ShuffleMode::every_epoch)
    dir_->say("warning: shuffle = " + shuffle_name(o_.shuffle) + " drops the same " + std::to_string(dropped) + " of " +
              std::to_string(train_.num_samples) + " training samples every epoch (" +
              (o_.shuffle == ShuffleMode::never ? std::string("the file's last ones") : "the permutation's last ones") +
              ", the rest of " + std::to_string(train_.num_samples) + " / mini-batch-size " +
              std::to_string(o_.mini_batch_size) + "); they are never trained on: use shuffle = every-epoch or a "
              "mini-batch-size that divides the sample count");
  dir_->log("network:\n" + net_->describe());
}

void TrainingRun::resume_if_asked() {
  if (o_.resume.empty()) return;
  std::vector<std::string> notes;
  const std::string path = choose_resume_checkpoint(o_.resume, checkpoint_dir_, comm_, notes);
  for (const auto& w : notes) dir_->say("warning: " + w);
  notes.clear();
  if (path.empty()) {
    dir_->say("resume auto: no checkpoint in " + checkpoint_dir_ + ", starting from the beginning");
    return;
  }
  state_ = restore_checkpoint(path, *net_, *optimizer_, identity_, comm_, notes, state_.loss_scale);
  for (const auto& n : notes) dir_->say("note: " + n);
  dir_->say("resumed from " + path + " at iteration " + std::to_string(state_.iteration));
}

bool TrainingRun::stop_requested(double local_loss) {
  // One small all-reduce per step: every rank stops at the same boundary,
  // and a non-finite loss on any rank is seen at the step it happened; a
  // telemetry timer that fired on any rank makes every rank sample.
  double flags[3] = {preemption_requested() || state_.iteration == hooks_.stop_iteration ? 1.0 : 0.0,
                     std::isfinite(local_loss) ? 0.0 : 1.0, telemetry_->timer_due() ? 1.0 : 0.0};
  comm_.allreduce_sum(flags, 3);
  if (flags[0] > 0) step_boundary_reached();  // the checkpoint and exit come next, bounded by their own timeouts
  telemetry_due_ = flags[2] > 0;
  if (flags[1] > 0) {
    // Weights after step j are good when step j+1's loss was finite.
    std::string good;
    for (const auto& [iteration, path] : checkpoints_)
      if (iteration + 1 < state_.iteration) good = path;
    fail("the training loss became NaN or infinite at iteration " + std::to_string(state_.iteration) +
         "; lower initial-learn-rate or set gradient-threshold" +
         (good.empty() ? std::string(" (no good checkpoint written yet)") : "; the last good checkpoint is " + good));
  }
  return flags[0] > 0;
}

// std::bad_alloc says nothing a user can act on; this says what to change and
// what is safe on disk (checkpoints are written atomically, so the last one
// is whole).
void TrainingRun::fail_out_of_memory() {
  const std::string last = checkpoints_.empty() ? std::string("no checkpoint was written by this run")
                                                : "the last checkpoint is " + checkpoints_.back().second;
  fail("rank " + std::to_string(comm_.rank()) + " ran out of memory at iteration " +
       std::to_string(state_.iteration + 1) + " with " + std::to_string(sampler_->local_batch_size()) +
       " samples per mini-batch on this rank; lower mini-batch-size, use more ranks or a smaller network; " + last);
}

bool TrainingRun::train_one_batch(const Batch& batch, const Batch* next) {
  if (comm_.rank() == hooks_.fail_rank && state_.iteration + 1 == hooks_.fail_iteration)
    fail("injected failure at iteration " + std::to_string(hooks_.fail_iteration) + " (DLSCALE_FAIL_AT)");
  if (comm_.rank() == hooks_.hang_rank && state_.iteration + 1 == hooks_.hang_iteration)
    for (;;) pause();
  if (comm_.rank() == hooks_.signal_rank && state_.iteration + 1 == hooks_.signal_iteration) kill(getpid(), hooks_.signal);
  watchdog_.set_context("iteration " + std::to_string(state_.iteration + 1));
  watchdog_.set_iteration(state_.iteration + 1);
  StepScope step_scope(*telemetry_);
  const double wait_before = peer_wait_seconds();
  if (hooks_.slow(comm_.rank())) std::this_thread::sleep_for(std::chrono::duration<double>(hooks_.slow_s));
  const double lr = schedule_->rate(state_.iteration);
  // A scaled loss gradient: dividing the normalizer by the scale multiplies it.
  // Token data: one prediction per position, so the mean is per token.
  const double normalizer = static_cast<double>(o_.mini_batch_size * net_->positions()) /
                            (loss_scaler_ ? loss_scaler_->scale() : 1.0);
  bool take_step = true;
  LossResult loss{};
  if (gpu_) {
    GpuStepResult r = gpu_->step(batch, next, normalizer, lr, state_.iteration, loss_scaler_ ? &*loss_scaler_ : nullptr);
    loss = r.loss, take_step = r.step_taken;
  } else {
    loss = cpu_step(batch, lr, normalizer, &take_step);
  }
  if (!take_step)
    dir_->log("iteration " + std::to_string(state_.iteration + 1) +
              ": gradients overflowed, step skipped, loss scale lowered to " + std::to_string(loss_scaler_->scale()));
  telemetry_->step_done(batch.x.dim(0), peer_wait_seconds() - wait_before);
  ++state_.iteration, ++state_.batch_in_epoch;
  state_.samples_seen += o_.mini_batch_size;
  const bool epoch_end = state_.batch_in_epoch == sampler_->batches_per_epoch();
  if (epoch_end) ++state_.epoch, state_.batch_in_epoch = 0;
  bool go_on = log_step(loss, lr);
  if (bar_) dir_->status(bar_->update(state_.iteration, state_.epoch, state_.batch_in_epoch));
  const bool due = o_.checkpoint_frequency > 0 &&
                   (o_.checkpoint_frequency_unit == "iteration" ? state_.iteration % o_.checkpoint_frequency == 0
                                                                : epoch_end && state_.epoch % o_.checkpoint_frequency == 0);
  const bool timed = o_.checkpoint_minutes > 0 &&
                     comm_.allreduce_max(seconds_since(t_last_checkpoint_)) >= o_.checkpoint_minutes * 60;
  if (stop_requested(take_step ? loss.loss_sum : 0.0)) {  // the loss scaler handled a skipped step
    checkpoint();
    result_.stop_reason = "preempted";
    return false;
  }
  if (epoch_end || telemetry_due_) telemetry_->sample(seconds_since(t_start_), state_.iteration);
  if (due || timed) checkpoint();
  return go_on;
}

LossResult TrainingRun::cpu_step(const Batch& batch, double lr, double normalizer, bool* stepped) {
  Tensor logits = net_->forward_logits(batch.x, true);
  LossResult loss = softmax_cross_entropy(logits, batch.labels.data(), normalizer, dlogits_);
  net_->backward(dlogits_, [&](const std::vector<Param*>& ready) { buckets_->mark_ready(ready); });
  buckets_->finish();
  *stepped = !loss_scaler_ ||
             loss_scaler_->unscale_or_skip(net_->params(), std::isfinite(loss.loss_sum), state_.iteration + 1, comm_);
  if (*stepped) optimizer_->step(net_->params(), lr);
  return loss;
}

// Reduces and logs the mini-batch figures when a row is due; false when
// validation patience ran out.
bool TrainingRun::log_step(const LossResult& loss, double lr) {
  const std::int64_t it = state_.iteration;
  const bool last = state_.epoch == o_.max_epochs && state_.batch_in_epoch == 0;
  const bool validate_now = validation_ && (it % o_.validation_frequency == 0 || it == 1);
  if (!(it == 1 || it % o_.verbose_frequency == 0 || last || validate_now)) return true;
  double sums[2] = {loss.loss_sum, static_cast<double>(loss.correct)};
  comm_.allreduce_sum(sums, 2);
  const double predictions = static_cast<double>(o_.mini_batch_size * net_->positions());
  const double mb_loss = sums[0] / predictions;
  result_.final_minibatch_loss = mb_loss;
  if (validate_now) run_validation();
  const std::int64_t epoch_shown = state_.batch_in_epoch == 0 ? state_.epoch : state_.epoch + 1;
  ProgressRow row{epoch_shown, it, seconds_since(t_start_), sums[1] / predictions, mb_loss,
                  validate_now ? last_val_acc_ : std::nullopt, validate_now ? last_val_loss_ : std::nullopt, lr};
  nlohmann::json m = {{"type", "iteration"}, {"epoch", epoch_shown},  {"iteration", it},
                      {"loss", mb_loss},     {"accuracy", row.minibatch_accuracy}, {"learn_rate", lr},
                      {"time_s", row.elapsed_s}};
  if (net_->positions() > 1) m["perplexity"] = std::exp(mb_loss);
  dir_->write_metric(m.dump());
  dir_->log(progress_row(row));
  telemetry_->sample(row.elapsed_s, it);
  if (state_.validations_without_improvement >= o_.validation_patience) {
    result_.stop_reason = "validation patience";
    return false;
  }
  return true;
}

// Batch-norm running statistics follow each rank's own samples; as in
// PyTorch DDP, rank 0's win, so evaluations and checkpoints agree on every rank.
// On a GPU rank the host copy is brought up to date first (everything a
// checkpoint, evaluation or model file reads) and the result sent back.
void TrainingRun::sync_buffers() {
  if (gpu_) gpu_->to_host();
  for (Tensor* t : net_->buffers()) comm_.broadcast(*t, 0);
  if (gpu_) gpu_->from_host();
}

EvalResult TrainingRun::evaluate_on(const DatasetInfo& data) {
  if (!gpu_) return evaluate(*net_, data, o_.mini_batch_size, comm_);
  return evaluate([&](const Batch& batch) { return gpu_->evaluate(batch); }, dtype_, data, o_.mini_batch_size, comm_);
}

void TrainingRun::run_validation() {
  const auto t_eval = Clock::now();
  sync_buffers();
  EvalResult v = evaluate_on(*validation_);
  last_val_acc_ = v.accuracy, last_val_loss_ = v.loss;
  nlohmann::json m = {{"type", "validation"}, {"epoch", state_.epoch}, {"iteration", state_.iteration},
                      {"loss", v.loss},       {"accuracy", v.accuracy}, {"time_s", seconds_since(t_start_)}};
  if (net_->positions() > 1) m["perplexity"] = std::exp(v.loss);
  dir_->write_metric(m.dump());
  if (v.loss < state_.best_validation_loss) {
    state_.best_validation_loss = v.loss, state_.validations_without_improvement = 0;
  } else {
    ++state_.validations_without_improvement;
  }
  eval_time_ += seconds_since(t_eval);
}

void TrainingRun::checkpoint() {
  // Idle ranks watching a lone computing rank allow a write checkpoint-timeout (0: no limit), not collective-timeout.
  ScopedActivity writing(watchdog_, "writing a checkpoint", o_.checkpoint_timeout_s);
  sync_buffers();
  const std::string path =
      write_checkpoint(checkpoint_dir_, *net_, *optimizer_, state_, identity_, comm_, o_.checkpoint_keep);
  if (comm_.rank() == 0 && hooks_.checkpoint_delay_s > 0)  // as if the write itself took that long
    std::this_thread::sleep_for(std::chrono::duration<double>(hooks_.checkpoint_delay_s));
  // Every rank knows rank 0 is writing: the wait for it is bounded by
  // checkpoint-timeout, not by collective-timeout, so a slow but healthy
  // write on a busy filesystem does not end the job.
  const double limit = o_.checkpoint_timeout_s > 0 ? o_.checkpoint_timeout_s : 1e300;  // 0: no limit
  comm_.barrier("the wait for rank 0 to write a checkpoint", limit, "checkpoint-timeout");
  checkpoints_.emplace_back(state_.iteration, path);
  t_last_checkpoint_ = Clock::now();
}

TrainingResult TrainingRun::run() {
  announce();
  resume_if_asked();
  // After the broadcast and any resume: the device starts from the host's state.
  if (plan_.gpu_index >= 0) {
    GpuTrainingOptions g;
    g.device = plan_.gpu_index;
    g.batch_size = sampler_->local_batch_size();
    g.deterministic = o_.deterministic;
    g.nccl = job_.plan.all_gpu();
    g.dropout_seed = o_.seed * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(comm_.rank());
    g.half_type = o_.half_type();
    g.reduce_hook = gpu_reduce_hook_from_environment();
    gpu_ = make_gpu_training(*net_, *optimizer_, *buckets_, comm_, g);
  }
  dir_->log(progress_header());
  watchdog_.set_activity(nullptr, 0);  // start-up is over: steps show progress from here
  result_.stop_reason = "max epochs";
  const auto t_loop = Clock::now();
  const std::int64_t first_samples = state_.samples_seen;
  bool go_on = true;
  try {
    while (go_on && state_.epoch < o_.max_epochs) {
      auto batches = sampler_->epoch_batches(static_cast<int>(state_.epoch));
      // Every pass of this loop trains at least one batch or fails: a
      // position at or past the epoch's end (a checkpoint of older versions,
      // which did not store its batch size) would spin here for ever.
      if (state_.batch_in_epoch >= static_cast<std::int64_t>(batches.size()))
        fail("the checkpoint resumed from stopped after batch " + std::to_string(state_.batch_in_epoch) +
             " of an epoch, but with mini-batch-size " + std::to_string(o_.mini_batch_size) + " an epoch has " +
             std::to_string(batches.size()) + " batches; resume with the mini-batch-size it was written with");
      batches.erase(batches.begin(), batches.begin() + state_.batch_in_epoch);  // resumed mid-epoch
      // Augmentation draws from (seed, epoch, sample): a resumed epoch draws the same.
      AugmentOptions augment = o_.augment;
      augment.seed = o_.seed;
      PrefetchLoader loader(train_, std::move(batches), dtype_, 2, augment, state_.epoch);
      if (gpu_) gpu_->clear_staged();
      std::optional<Batch> batch = loader.next();
      while (go_on && batch) {
        // A GPU rank copies the next batch to the device while this one trains.
        std::optional<Batch> next;
        if (gpu_) next = loader.next();
        go_on = train_one_batch(*batch, next ? &*next : nullptr);
        if (go_on && state_.batch_in_epoch == 0) break;  // the epoch is complete
        batch = gpu_ ? std::move(next) : loader.next();
      }
    }
  } catch (const std::bad_alloc&) {
    fail_out_of_memory();
  }
  dir_->log(progress_rule());
  result_.iterations = state_.iteration;
  result_.loss_scale = state_.loss_scale;
  result_.epochs = static_cast<int>(state_.epoch + (state_.batch_in_epoch > 0));
  result_.samples_per_second =
      (state_.samples_seen - first_samples) / std::max(seconds_since(t_loop) - eval_time_, 1e-9);
  if (result_.stop_reason == "preempted") {
    dir_->say("stopped by a signal at iteration " + std::to_string(state_.iteration) + "; checkpoint written to " +
              checkpoint_dir_ + "; continue with --resume auto");
    result_.last_checkpoint = checkpoints_.back().second;
    result_.network = std::move(net_);
    return std::move(result_);
  }
  return finish();
}

// "validation accuracy: 0.9012  loss: 0.2874", and for token data the loss
// per token with its perplexity.
std::string TrainingRun::eval_line(const char* what, double accuracy, double loss) const {
  char line[160];
  if (net_->positions() > 1)
    std::snprintf(line, sizeof line, "%s loss per token: %.4f  perplexity: %.3f  accuracy: %.4f", what, loss,
                  std::exp(loss), accuracy);
  else
    std::snprintf(line, sizeof line, "%s accuracy: %.4f  loss: %.4f", what, accuracy, loss);
  return line;
}

TrainingResult TrainingRun::finish() {
  sync_buffers();
  if (validation_) {
    run_validation();
    result_.validation_accuracy = last_val_acc_, result_.validation_loss = last_val_loss_;
    dir_->say(eval_line("validation", *last_val_acc_, *last_val_loss_));
  }
  if (test_) {
    EvalResult t = evaluate_on(*test_);
    result_.test_accuracy = t.accuracy, result_.test_loss = t.loss;
    dir_->say(eval_line("test", t.accuracy, t.loss));
  }
  result_.wall_time_s = seconds_since(t_start_);
  const std::vector<double> peak_rss = telemetry_->gather_peak_memory();  // on rank 0
  if (dir_->writer()) {
    ScopedActivity writing(watchdog_, "writing the model", o_.checkpoint_timeout_s);
    save_model(dir_->file("model.h5"), *net_);
  }
  nlohmann::json summary = {{"epochs", result_.epochs},
                            {"iterations", result_.iterations},
                            {"wall_time_s", result_.wall_time_s},
                            {"samples_per_second", result_.samples_per_second},
                            {"world_size", comm_.size()},
                            {"device", result_.devices[0]},
                            {"devices", result_.devices},
                            {"execution_environment", job_.plan.ranks[0].environment},
                            {"precision", o_.training_precision},
                            {"mixed_precision_type",
                             o_.half_type().empty() ? nlohmann::json(nullptr) : nlohmann::json(o_.half_type())},
                            {"loss_scale", state_.loss_scale.scale},
                            {"skipped_steps", state_.loss_scale.skipped_steps},
                            {"final_minibatch_loss", result_.final_minibatch_loss},
                            {"stop_reason", result_.stop_reason}};
  auto put = [&](const char* key, const std::optional<double>& v) { summary[key] = v ? nlohmann::json(*v) : nullptr; };
  put("validation_accuracy", result_.validation_accuracy);
  put("validation_loss", result_.validation_loss);
  put("test_accuracy", result_.test_accuracy);
  put("test_loss", result_.test_loss);
  if (net_->positions() > 1) {  // token data: losses are per token
    auto perplexity = [](const std::optional<double>& loss) {
      return loss ? std::optional<double>(std::exp(*loss)) : std::nullopt;
    };
    put("final_minibatch_perplexity", perplexity(result_.final_minibatch_loss));
    put("validation_perplexity", perplexity(result_.validation_loss));
    put("test_perplexity", perplexity(result_.test_loss));
  }
  if (!peak_rss.empty()) {
    summary["peak_rss_mib"] = *std::max_element(peak_rss.begin(), peak_rss.end());
    summary["peak_rss_mib_per_rank"] = peak_rss;
  }
  summary["stragglers"] = stragglers_json(telemetry_->stragglers());
  summary["link_stragglers"] = link_stragglers_json(telemetry_->link_stragglers());
  dir_->write_text("summary.json", summary.dump(2) + "\n");
  dir_->say("run directory: " + dir_->path());
  result_.network = std::move(net_);
  return std::move(result_);
}

// An idle rank waits as long as the others train, so this wait cannot run
// under the collective timeout. A computing rank that fails aborts the job
// and ends it under mpirun and srun (--kill-on-bad-exit); one that is stopped,
// cut off or stuck is named from the heartbeats (idle_wait.h), which ends the
// job with the lost-ranks line a requeue acts on (the rank exits). It sleeps
// between tests instead of spinning a core.
void wait_for_computing_ranks(const TrainingOptions& o, Communicator& world, const JobSetup& job,
                              CollectiveWatchdog& watchdog) {
  watchdog.set_computes(false);
  world.set_watchdog(nullptr);
  std::vector<int> computing;
  for (int r = 0; r < world.size(); ++r)
    if (job.plan.ranks[r].computes) computing.push_back(r);
  IdleWaitWatch watch(computing, o.collective_timeout_s);
  const auto t0 = Clock::now();
  auto look = [&] {
    if (watchdog.heartbeat_dir().empty()) return;  // no run directory: nothing to read
    const std::string problem = watch.look(read_heartbeats(watchdog.heartbeat_dir(), world.size()), seconds_since(t0));
    if (problem.empty()) return;
    std::vector<std::string> lost_hosts;
    if (!watch.lost_host().empty()) lost_hosts.push_back(watch.lost_host());
    watchdog.write_lost_ranks_line(problem + "; idle " + rank_list({world.rank()}) + " waits for the computing ranks",
                                   lost_hosts);
    // Long work under way (start-up, a write) had checkpoint-timeout; the rest collective-timeout.
    const bool long_work = watch.lost_in_long_work();
    char limit[64];
    std::snprintf(limit, sizeof limit, "%s = %g s", long_work ? "checkpoint-timeout" : "collective-timeout",
                  long_work ? o.checkpoint_timeout_s : o.collective_timeout_s);
    // Not an exception and MPI_Abort: this rank's Ibarrier stays posted, and
    // a computing rank continued meanwhile (mpirun sends SIGCONT before it
    // ends a job) could complete it, take the job for finished and remove
    // the lost-rank marker the requeue needs. A rank that exits is what
    // mpirun and srun (--kill-on-bad-exit) end the job on.
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    std::fprintf(stderr, "dlscale: rank %d (%s): error: idle rank %d waited for the computing ranks, and %s (%s)\n",
                 world.rank(), host, world.rank(), problem.c_str(), limit);
    std::fflush(stderr);
    std::_Exit(1);
  };
  world.barrier_polled(0.05, look);
}

}  // namespace

TrainingResult trainnet(const TrainingOptions& o, Communicator& world) {
  const auto t_start = Clock::now();
  const TestHooks hooks = TestHooks::from_environment();
  if (hooks.hang_rank == world.rank() && hooks.hang_iteration == 0)
    for (;;) pause();  // before its heartbeat and job setup: a rank that never reaches start-up
  if (o.threads > 0) set_cpu_threads(o.threads);
  // One watchdog for every collective of the job, from job setup on: a rank
  // that failed before them (a config file missing on its node) must not
  // leave the others waiting for ever.
  CollectiveWatchdog watchdog(o.collective_timeout_s, world.rank());
  watchdog.set_context("job setup");
  if (!o.output.empty()) watchdog.set_stop_marker(o.output + "/" + kLostRankMarker);
  // A previous start's line is history (the Slurm script removes it too); a rank names lost ones only while none is there.
  if (!o.output.empty() && world.rank() == 0) {
    std::remove((o.output + "/" + kLostRankMarker).c_str());
    std::remove((o.output + "/" + kLostHostsFile).c_str());
  }
  // Each rank's heartbeat in the run directory, so whichever rank notices a
  // silent one can name it (runtime/parallel/heartbeat.h, lost_ranks.h).
  if (!o.output.empty()) watchdog.start_heartbeat(o.output + "/heartbeat", world.size(), o.output + "/log.txt");
  // Start-up (shard checks that read a dataset, a checkpoint restored, GPU
  // set-up) advances no step: idle ranks allow it checkpoint-timeout.
  watchdog.set_activity("starting up", o.checkpoint_timeout_s);
  world.set_watchdog(&watchdog);
  // However trainnet ends, an exception included, the caller's Communicator
  // must not keep a pointer to this watchdog: its next collective would use
  // freed memory (the address lane found it after a refused resume).
  struct ForgetWatchdog {
    Communicator& world;
    ~ForgetWatchdog() { world.set_watchdog(nullptr); }
  } forget_watchdog{world};
  JobSetup job = setup_job(o.execution_environment, world);
  for (int r : hooks.idle_ranks)
    if (r > 0 && r < world.size()) job.plan.ranks[r].computes = false;  // rank 0 always computes
  // Idle ranks (parallel-auto with GPUs elsewhere) wait for the others.
  std::unique_ptr<Communicator> computing = world.split(job.plan.ranks[world.rank()].computes);
  TrainingResult result;
  if (computing) {
    try {
      result = TrainingRun(o, *computing, job, job.plan.ranks[world.rank()], watchdog, t_start).run();
    } catch (const MpiError&) {
      watchdog.name_lost_ranks_after_mpi_error();
      throw;
    }
    // Non-blocking, as the idle ranks' wait is: MPI never matches a blocking
    // collective with a non-blocking one, so a blocking barrier here hung
    // every job with idle ranks at its end (IdleRank.* found it).
    world.barrier_polled(0.01);
    // Every rank got here: a line naming a rank silent for a while (stopped,
    // then continued) must not requeue a job that finished. Only then: an
    // idle rank's part of this barrier was posted when it began to wait, so
    // the barrier completes even after that rank gave up on a stopped
    // computing rank, which mpirun's SIGCONT and TERM then stop at a
    // checkpoint (its preempted marker requeues, and the line stays).
    if (world.rank() == 0 && !o.output.empty() && result.stop_reason != "preempted") {
      std::remove((o.output + "/" + kLostRankMarker).c_str());
      std::remove((o.output + "/" + kLostHostsFile).c_str());
    }
  } else {
    wait_for_computing_ranks(o, world, job, watchdog);
  }
  world.set_watchdog(nullptr);
  return result;
}

}  // namespace dlscale
