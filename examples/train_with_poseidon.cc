// A plain LibTorch training loop made data-parallel with Poseidon. The lines marked
// "Poseidon" are all a LibTorch user adds. Run:
//   mpirun -np 2 --oversubscribe build/examples/train_with_poseidon
#include <torch/torch.h>

#include <cstdio>

#include "poseidon/runtime.h"  // Poseidon
#include "poseidon/torch.h"    // Poseidon

int main(int argc, char** argv) {
  poseidon::Runtime runtime(&argc, &argv);  // Poseidon: MPI + transport for this process
  torch::manual_seed(0);
  torch::set_num_threads(1);

  // A small regression problem: learn y = x . w_true from random x.
  torch::nn::Sequential net(torch::nn::Linear(16, 32), torch::nn::ReLU(), torch::nn::Linear(32, 1));
  const auto w_true = torch::randn({16, 1});

  poseidon::Options options;  // Poseidon: the optimizer runs on the parameter servers
  options.lr = 0.05f;
  options.momentum = 0.9f;
  poseidon::TorchModel model(runtime.transport(), net, "example", options);  // Poseidon

  torch::manual_seed(1 + runtime.rank());  // each worker draws its own data
  float last = 0;
  for (int it = 0; it < 200; ++it) {
    auto x = torch::randn({64, 16});
    auto loss = torch::mse_loss(model.forward(x), x.matmul(w_true));  // Poseidon: model.forward
    loss.backward();
    model.step();  // Poseidon: replaces optimizer.step(); syncs already started during backward
    last = loss.item<float>();
    if (runtime.rank() == 0 && it % 50 == 0) std::printf("iteration %d loss %.4f\n", it, last);
  }
  model.finish();  // Poseidon: wait for the last syncs
  if (runtime.rank() == 0) std::printf("done: loss %.4f\n", last);
  return 0;
}
