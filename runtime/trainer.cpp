// The training loop: sample, forward, loss, backward, all-reduce, update;
// validation, checkpoints and metrics; rank 0 writes the run directory.
#include "runtime/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/loader.h"
#include "io/model_file.h"
#include "layers/softmax.h"
#include "runtime/blas.h"
#include "runtime/evaluation.h"
#include "runtime/execution.h"
#include "runtime/gradient_buckets.h"
#include "runtime/job_setup.h"
#include "runtime/progress_table.h"
#include "runtime/run_directory.h"

namespace dlscale {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

DType precision_dtype(const std::string& precision) {
  if (precision == "single") return DType::f32;
  if (precision == "double") return DType::f64;
  if (precision == "automatic-mixed")
    fail("training-precision=automatic-mixed needs a GPU; this rank trains on the CPU (use single or double)");
  fail("unknown training-precision '" + precision + "' (expected single, double or automatic-mixed)");
}

// Every rank must train the same thing: a differing config means a broken
// job script, and continuing would hang or silently diverge.
void check_ranks_agree(const std::string& config, Communicator& comm) {
  auto all = comm.allgather(std::to_string(std::hash<std::string>{}(config)));
  for (int r = 1; r < comm.size(); ++r)
    if (all[r] != all[0])
      fail("rank " + std::to_string(r) + " has a different configuration than rank 0; every rank must be started "
           "with the same options and config file");
}

void broadcast_parameters(Network& net, Communicator& comm) {
  for (auto& [name, t] : net.named_tensors()) comm.broadcast(*t, 0);
}

// DLSCALE_FAIL_AT=RANK:ITERATION makes that rank throw at that iteration, so
// tests can check a failing rank brings the job down (LBANN has the same hook).
struct InjectedFailure {
  int rank = -1;
  std::int64_t iteration = -1;
  static InjectedFailure from_environment() {
    InjectedFailure f;
    if (const char* v = std::getenv("DLSCALE_FAIL_AT")) std::sscanf(v, "%d:%ld", &f.rank, &f.iteration);
    return f;
  }
  void maybe_fail(int rank_now, std::int64_t iteration_now) const {
    if (rank_now == rank && iteration_now == iteration)
      fail("injected failure at iteration " + std::to_string(iteration) + " (DLSCALE_FAIL_AT)");
  }
};

struct Checkpointer {
  std::string dir;
  std::int64_t frequency = 0;
  bool per_iteration = false;
  bool due(std::int64_t iteration, bool epoch_end) const {
    if (frequency <= 0) return false;
    if (per_iteration) return iteration % frequency == 0;
    return epoch_end;
  }
};

TrainingResult train_on(const TrainingOptions& o, Communicator& comm, const JobSetup& job,
                        std::chrono::steady_clock::time_point t_start);

}  // namespace

TrainingResult trainnet(const TrainingOptions& o, Communicator& world) {
  const auto t_start = Clock::now();
  if (o.threads > 0) set_cpu_threads(o.threads);
  JobSetup job = setup_job(o.execution_environment, world);
  const ExecutionPlan& plan = job.plan.ranks[world.rank()];
  // Idle ranks (parallel-auto with GPUs elsewhere) wait for the others.
  std::unique_ptr<Communicator> computing = world.split(plan.computes);
  if (!computing) {
    world.barrier();
    return {};
  }
  TrainingResult result = train_on(o, *computing, job, t_start);
  world.barrier();
  return result;
}

namespace {

// The training run proper, on the communicator of the computing ranks.
TrainingResult train_on(const TrainingOptions& o, Communicator& comm, const JobSetup& job,
                        std::chrono::steady_clock::time_point t_start) {
  const ExecutionPlan& plan = job.plan.ranks[0];  // for the environment, the same on every rank
  DType dtype = precision_dtype(o.training_precision);

  // Everything a user can get wrong is checked before the run directory exists.
  DatasetInfo train = open_dataset(o.train_data);
  std::optional<DatasetInfo> validation, test;
  if (!o.validation_data.empty()) validation = open_dataset(o.validation_data);
  if (!o.test_data.empty()) test = open_dataset(o.test_data);
  auto net = std::make_unique<Network>(o.network, dtype, o.seed);
  check_data_fits(*net, train, "training");
  if (validation) check_data_fits(*net, *validation, "validation");
  if (test) check_data_fits(*net, *test, "test");
  DistributedSampler sampler(train.num_samples, o.mini_batch_size, comm.rank(), comm.size(), o.shuffle, o.seed);
  const std::int64_t per_epoch = sampler.batches_per_epoch();
  LearnRateSchedule schedule(o.schedule, per_epoch, o.max_epochs);
  auto optimizer = make_optimizer(o.solver);
  // Each rank's gradient is d(sum of its losses / global batch): the sum over
  // ranks is exactly the mean gradient of the global batch.
  GradientBuckets buckets(net->params(), comm, static_cast<std::size_t>(o.gradient_bucket_mib * (1 << 20)));
  check_ranks_agree(o.config_text + "\nbuckets " + buckets.plan_signature(), comm);
  broadcast_parameters(*net, comm);

  RunDirectory run(o.output, comm.rank() == 0, o.verbose);
  run.write_text("config.ini", o.config_text);
  Checkpointer ckpt{o.checkpoint_path.empty() ? run.file("checkpoints") : o.checkpoint_path, o.checkpoint_frequency,
                    o.checkpoint_frequency_unit == "iteration"};

  TrainingResult result;
  for (const auto& d : job.devices)
    if (d != "idle") result.devices.push_back(d);
  run.say("dlscale: " + std::to_string(job.ranks.size()) + " rank(s), " + std::to_string(comm.size()) +
          " computing, execution-environment " + plan.environment);
  run.say(job.table);
  for (const auto& note : job.notes) run.say("note: " + note);
  run.log("network:\n" + net->describe());
  run.log(progress_header());

  std::optional<double> last_val_acc, last_val_loss;
  double best_val_loss = INFINITY;
  int validations_without_improvement = 0;
  double eval_time = 0;  // validation time, excluded from samples_per_second
  std::int64_t iteration = 0, samples_seen = 0;
  auto run_validation = [&](std::int64_t epoch) {
    const auto t_eval = Clock::now();
    EvalResult v = evaluate(*net, *validation, o.mini_batch_size, comm);
    last_val_acc = v.accuracy, last_val_loss = v.loss;
    nlohmann::json m = {{"type", "validation"}, {"epoch", epoch}, {"iteration", iteration},
                        {"loss", v.loss},       {"accuracy", v.accuracy}, {"time_s", seconds_since(t_start)}};
    run.write_metric(m.dump());
    if (v.loss < best_val_loss) {
      best_val_loss = v.loss, validations_without_improvement = 0;
    } else {
      ++validations_without_improvement;
    }
    eval_time += seconds_since(t_eval);
  };
  auto save_checkpoint = [&](std::int64_t epoch) {
    if (!run.writer()) return;
    char name[64];
    std::snprintf(name, sizeof name, "/ckpt-%lld.h5", static_cast<long long>(iteration));
    TrainingPosition pos{iteration, epoch};
    save_model(ckpt.dir + name, *net, optimizer->state(), &pos);
  };

  const InjectedFailure failure = InjectedFailure::from_environment();
  result.stop_reason = "max epochs";
  bool stop = false;
  const auto t_loop = Clock::now();
  for (int epoch = 0; epoch < o.max_epochs && !stop; ++epoch) {
    PrefetchLoader loader(train, sampler.epoch_batches(epoch), dtype);
    Tensor dlogits;
    while (auto batch = loader.next()) {
      failure.maybe_fail(comm.rank(), iteration + 1);
      Tensor logits = net->forward_logits(batch->x, true);
      LossResult loss = softmax_cross_entropy(logits, batch->labels.data(),
                                              static_cast<double>(o.mini_batch_size), dlogits);
      net->backward(dlogits, [&](const std::vector<Param*>& ready) { buckets.mark_ready(ready); });
      buckets.finish();
      const double lr = schedule.rate(iteration);
      optimizer->step(net->params(), lr);
      ++iteration;
      samples_seen += o.mini_batch_size;
      const bool epoch_end = iteration % per_epoch == 0;
      const bool log_now = iteration == 1 || iteration % o.verbose_frequency == 0 ||
                           (epoch_end && epoch + 1 == o.max_epochs);
      const bool validate_now = validation && (iteration % o.validation_frequency == 0 || iteration == 1);
      if (log_now || validate_now) {
        double sums[2] = {loss.loss_sum, static_cast<double>(loss.correct)};
        comm.allreduce_sum(sums, 2);
        const double mb_loss = sums[0] / static_cast<double>(o.mini_batch_size);
        result.final_minibatch_loss = mb_loss;
        if (!std::isfinite(mb_loss))
          fail("the training loss became " + std::to_string(mb_loss) + " at iteration " + std::to_string(iteration) +
               "; lower initial-learn-rate or set gradient-threshold");
        if (validate_now) run_validation(epoch + 1);
        ProgressRow row{epoch + 1, iteration, seconds_since(t_start), sums[1] / o.mini_batch_size, mb_loss,
                        validate_now ? last_val_acc : std::nullopt, validate_now ? last_val_loss : std::nullopt, lr};
        nlohmann::json m = {{"type", "iteration"},           {"epoch", epoch + 1},  {"iteration", iteration},
                            {"loss", mb_loss},                {"accuracy", row.minibatch_accuracy},
                            {"learn_rate", lr},               {"time_s", row.elapsed_s}};
        run.write_metric(m.dump());
        if (log_now || validate_now) run.log(progress_row(row));
        if (validations_without_improvement >= o.validation_patience) {
          stop = true;
          result.stop_reason = "validation patience";
          break;
        }
      }
      if (ckpt.due(iteration, epoch_end)) save_checkpoint(epoch + (epoch_end ? 1 : 0));
    }
    result.epochs = epoch + 1;
  }
  run.log(progress_rule());
  const double loop_time = seconds_since(t_loop) - eval_time;
  result.iterations = iteration;
  result.samples_per_second = samples_seen / std::max(loop_time, 1e-9);

  if (validation) {
    run_validation(result.epochs);
    result.validation_accuracy = last_val_acc, result.validation_loss = last_val_loss;
    char line[128];
    std::snprintf(line, sizeof line, "validation accuracy: %.4f  loss: %.4f", *last_val_acc, *last_val_loss);
    run.say(line);
  }
  if (test) {
    EvalResult t = evaluate(*net, *test, o.mini_batch_size, comm);
    result.test_accuracy = t.accuracy, result.test_loss = t.loss;
    char line[128];
    std::snprintf(line, sizeof line, "test accuracy: %.4f  loss: %.4f", t.accuracy, t.loss);
    run.say(line);
  }
  result.wall_time_s = seconds_since(t_start);
  if (run.writer()) save_model(run.file("model.h5"), *net);

  nlohmann::json summary = {{"epochs", result.epochs},
                            {"iterations", result.iterations},
                            {"wall_time_s", result.wall_time_s},
                            {"samples_per_second", result.samples_per_second},
                            {"world_size", comm.size()},
                            {"device", result.devices[0]},
                            {"devices", result.devices},
                            {"execution_environment", plan.environment},
                            {"precision", o.training_precision},
                            {"final_minibatch_loss", result.final_minibatch_loss},
                            {"stop_reason", result.stop_reason}};
  auto put = [&](const char* key, const std::optional<double>& v) { summary[key] = v ? nlohmann::json(*v) : nullptr; };
  put("validation_accuracy", result.validation_accuracy);
  put("validation_loss", result.validation_loss);
  put("test_accuracy", result.test_accuracy);
  put("test_loss", result.test_loss);
  run.write_text("summary.json", summary.dump(2) + "\n");
  run.say("run directory: " + run.path());
  result.network = std::move(net);
  return result;
}

}  // namespace

}  // namespace dlscale
