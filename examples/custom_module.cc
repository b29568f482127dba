// A custom torch::nn::Module (its own forward: a residual connection and BatchNorm) trained
// data-parallel with Poseidon and torch::optim::Adam, in gradient mode: Poseidon delivers
// the workers' mean gradient into every .grad and Adam steps on each worker, identically.
// The lines marked "Poseidon" are all a LibTorch user adds. Run:
//   mpirun -np 2 --oversubscribe build/examples/custom_module
#include <torch/torch.h>

#include <cstdio>

#include "poseidon/runtime.h"  // Poseidon
#include "poseidon/torch.h"    // Poseidon

// Classifies 20-feature vectors into 10 classes: Linear + BatchNorm, a residual block,
// and an output Linear.
struct ResidualMlpImpl : torch::nn::Module {
  ResidualMlpImpl()
      : input(register_module("input", torch::nn::Linear(20, 64))),
        bn(register_module("bn", torch::nn::BatchNorm1d(64))),
        hidden(register_module("hidden", torch::nn::Linear(64, 64))),
        output(register_module("output", torch::nn::Linear(64, 10))) {}

  torch::Tensor forward(torch::Tensor x) {
    auto h = torch::relu(bn(input(x)));
    h = h + torch::relu(hidden(h));
    return poseidon::linear(output, h);  // Poseidon (optional): lets this layer go by sufficient factors
  }

  torch::nn::Linear input;
  torch::nn::BatchNorm1d bn;
  torch::nn::Linear hidden, output;
};
TORCH_MODULE(ResidualMlp);

int main(int argc, char** argv) {
  poseidon::Runtime runtime(&argc, &argv);  // Poseidon: MPI + transport for this process
  torch::manual_seed(0);
  torch::set_num_threads(1);
  const int batch = 64;

  // The task: the label is the largest of 10 fixed random projections of the input.
  const auto projection = torch::randn({20, 10});
  auto labels = [&](const torch::Tensor& x) { return x.matmul(projection).argmax(1); };
  const auto test_x = torch::randn({1000, 20});
  const auto test_y = labels(test_x);
  auto test_loss = [&](ResidualMlp& net) {
    torch::NoGradGuard no_grad;
    net->eval();  // BatchNorm's running statistics
    const double loss = torch::nn::functional::cross_entropy(net->forward(test_x), test_y).item<double>();
    net->train();
    return loss;
  };

  ResidualMlp net;
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(1e-2));

  poseidon::Options options;     // Poseidon
  options.gradient_mode = true;  // Poseidon: the mean gradient in .grad; Adam steps locally
  options.batch = batch;         // Poseidon: examples per worker per step, for the cost model
  const auto example = torch::randn({batch, 20});
  poseidon::TorchModel model(runtime.transport(), net, "residual_mlp", options,  // Poseidon
                             [&] { net->forward(example); });                    // Poseidon: a probe forward
  const double before = test_loss(net);

  torch::manual_seed(1 + runtime.rank());  // each worker draws its own data
  for (int it = 0; it < 200; ++it) {
    auto x = torch::randn({batch, 20});
    auto loss = torch::nn::functional::cross_entropy(
        model.forward([&] { return net->forward(x); }),  // Poseidon: model.forward around the module's forward
        labels(x));
    loss.backward();
    model.step();  // Poseidon: returns once every .grad holds the workers' mean gradient
    optimizer.step();
    optimizer.zero_grad();
    if (runtime.rank() == 0 && it % 50 == 0) std::printf("iteration %d loss %.4f\n", it, loss.item<float>());
  }
  model.synchronize();  // Poseidon: the same buffers (BatchNorm statistics) on every worker
  const double after = test_loss(net);
  model.finish();  // Poseidon: wait for the last syncs
  if (runtime.rank() == 0) std::printf("test loss before %.4f after %.4f\ndone\n", before, after);
  return 0;
}
