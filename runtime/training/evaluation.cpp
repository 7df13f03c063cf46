// Evaluation over a dataset with prefetching and a cross-rank reduction.
#include "runtime/training/evaluation.h"

#include "io/loader.h"
#include "io/sampler.h"
#include "layers/softmax.h"

namespace dlscale {

void check_data_fits(const Network& net, const DatasetInfo& data, const std::string& role) {
  if (data.sample_shape != net.spec().input_shape)
    fail(role + " data " + data.dir + " has samples of shape " + to_string(data.sample_shape) +
         " but the network input is " + to_string(net.spec().input_shape) + " (the 'input' option)");
  if (data.num_classes > net.num_classes())
    fail(role + " data " + data.dir + " has " + std::to_string(data.num_classes) + " classes but the network outputs " +
         std::to_string(net.num_classes()) + " (units of the last dense layer)");
  if (data.labels_per_sample() != net.positions())
    fail(role + " data " + data.dir + (data.tokens ? " holds token windows with " : " holds ") +
         std::to_string(data.labels_per_sample()) + " target(s) per sample but the network makes " +
         std::to_string(net.positions()) + " prediction(s) per sample (" +
         (net.positions() > 1 ? "a softmax over T×K" : "a softmax over K") + ")");
}

EvalResult evaluate(Network& net, const DatasetInfo& data, std::int64_t batch_size, Communicator& comm) {
  const BatchLoss on_cpu = [&](const Batch& batch) {
    return softmax_cross_entropy_eval(net.forward_logits(batch.x, false), batch.labels.data());
  };
  return evaluate(on_cpu, net.dtype(), data, batch_size, comm);
}

EvalResult evaluate(const BatchLoss& batch_loss, DType dtype, const DatasetInfo& data, std::int64_t batch_size,
                    Communicator& comm) {
  PrefetchLoader loader(data, evaluation_batches(data.num_samples, batch_size, comm.rank(), comm.size()), dtype);
  double sums[3] = {0, 0, 0};  // loss, correct, samples
  while (auto batch = loader.next()) {
    LossResult r = batch_loss(*batch);
    sums[0] += r.loss_sum;
    sums[1] += static_cast<double>(r.correct);
    sums[2] += static_cast<double>(batch->labels.size());
    comm.note_progress();  // idle ranks watch a lone computing rank by it
  }
  comm.allreduce_sum(sums, 3);
  EvalResult result;
  result.samples = static_cast<std::int64_t>(sums[2]);
  if (result.samples > 0) {
    result.loss = sums[0] / sums[2];
    result.accuracy = sums[1] / sums[2];
  }
  return result;
}

}  // namespace dlscale
