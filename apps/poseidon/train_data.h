// `poseidon train`'s data: the training and test sets as tensors, and the test-set
// evaluation of a worker's share.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <utility>

#include "data/dataset.h"
#include "train_net.h"
#include "train_options.h"

namespace poseidon::app {

struct Data {
  Dataset train_set, test_set;
  torch::Tensor train_x, train_y, test_x, test_y;  // views of the sets above
};

// Fashion-MNIST (checked against the net's input), or synthetic data of the net's shape.
Data loadData(const TrainOptions& o, const NetChoice& net);

// The examples of `indices` as a batch (images, labels).
std::pair<torch::Tensor, torch::Tensor> batchOf(const Data& d, const std::vector<std::int64_t>& indices);

// Correct predictions and count on test examples [begin, end). In eval mode (BatchNorm
// uses its running statistics, dropout is off), outside Poseidon, without gradients.
std::pair<double, double> evaluate(TrainNet& net, const Data& d, std::int64_t begin, std::int64_t end);

}  // namespace poseidon::app
