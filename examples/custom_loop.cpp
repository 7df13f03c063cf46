// A custom training loop over the dlscale library (the seed's "custom
// training loop" workflow): the program owns the loop and calls forward,
// loss, backward and the optimizer itself, reading mini-batches from the
// HDF5 dataset through the prefetching loader.
//
//   custom_loop TRAIN_DIR TEST_DIR [EPOCHS]
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <string>

#include "io/dataset.h"
#include "io/loader.h"
#include "io/sampler.h"
#include "layers/network.h"
#include "layers/softmax.h"
#include "runtime/parallel/communicator.h"
#include "runtime/training/evaluation.h"
#include "runtime/training/optimizer.h"

namespace {

int train(const std::string& train_dir, const std::string& test_dir, int epochs) {
  using namespace dlscale;
  Communicator comm;
  DatasetInfo train_data = open_dataset(train_dir);
  DatasetInfo test_data = open_dataset(test_dir);

  NetworkSpec spec;
  spec.input_shape = train_data.sample_shape;
  spec.layer_lines = {"dense units=128", "relu", "dense units=" + std::to_string(train_data.num_classes), "softmax"};
  Network net(spec, DType::f32, /*seed=*/1);

  SolverOptions solver;
  solver.solver = "adam";
  auto optimizer = make_optimizer(solver);
  const std::int64_t batch_size = 128;
  DistributedSampler sampler(train_data.num_samples, batch_size, comm.rank(), comm.size(), ShuffleMode::every_epoch, 1);

  Tensor dlogits;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    PrefetchLoader loader(train_data, sampler.epoch_batches(epoch), DType::f32);
    double loss_sum = 0;
    std::int64_t seen = 0;
    while (auto batch = loader.next()) {
      Tensor logits = net.forward_logits(batch->x, /*training=*/true);
      LossResult loss = softmax_cross_entropy(logits, batch->labels.data(), batch_size, dlogits);
      net.backward(dlogits);
      for (Param* p : net.params()) comm.allreduce_sum(p->grad);  // a no-op on one rank
      optimizer->step(net.params(), 1e-3);
      loss_sum += loss.loss_sum;
      seen += static_cast<std::int64_t>(batch->labels.size());
    }
    EvalResult test = evaluate(net, test_data, 512, comm);
    if (comm.rank() == 0)
      std::printf("epoch %d  train loss %.4f  test accuracy %.4f\n", epoch + 1, loss_sum / seen, test.accuracy);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int code = 2;
  if (argc < 3) {
    std::fprintf(stderr, "usage: custom_loop TRAIN_DIR TEST_DIR [EPOCHS]\n");
  } else {
    try {
      code = train(argv[1], argv[2], argc > 3 ? std::stoi(argv[3]) : 2);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "custom_loop: error: %s\n", e.what());
      code = 1;
    }
  }
  MPI_Finalize();
  return code;
}
