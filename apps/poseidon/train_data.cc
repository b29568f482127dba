#include "train_data.h"

#include <algorithm>

#include "poseidon/errors.h"

namespace poseidon::app {

Data loadData(const TrainOptions& o, const NetChoice& net) {
  Data d;
  if (o.synthetic) {
    d.train_set = syntheticDataset(8192, net.channels, net.height, net.width, net.classes, o.seed);
    d.test_set = syntheticDataset(2048, net.channels, net.height, net.width, net.classes, o.seed + 1);
  } else {
    d.train_set = loadFashionMnist(o.data, true);
    d.test_set = loadFashionMnist(o.data, false);
    if (d.train_set.channels != net.channels || d.train_set.height != net.height || d.train_set.width != net.width ||
        net.classes != 10) {
      throw InputError(detail::cat("model ", net.name, " expects input ", net.channels, "x", net.height, "x", net.width,
                                   " and ", net.classes,
                                   " classes; Fashion-MNIST is 1x28x28 with 10 "
                                   "classes (use --synthetic for other shapes)"));
    }
  }
  auto view = [](Dataset& s, torch::Tensor& x, torch::Tensor& y) {
    x = torch::from_blob(s.images.data(), {s.count, s.channels, s.height, s.width}, torch::kFloat);
    y = torch::from_blob(s.labels.data(), {s.count}, torch::kLong);
  };
  view(d.train_set, d.train_x, d.train_y);
  view(d.test_set, d.test_x, d.test_y);
  return d;
}

std::pair<torch::Tensor, torch::Tensor> batchOf(const Data& d, const std::vector<std::int64_t>& indices) {
  auto index = torch::from_blob(const_cast<std::int64_t*>(indices.data()), {static_cast<std::int64_t>(indices.size())},
                                torch::kLong);
  return {d.train_x.index_select(0, index), d.train_y.index_select(0, index)};
}

std::pair<double, double> evaluate(TrainNet& net, const Data& d, std::int64_t begin, std::int64_t end) {
  torch::NoGradGuard no_grad;
  net.module().eval();
  double correct = 0;
  for (std::int64_t i = begin; i < end; i += 500) {
    const std::int64_t n = std::min<std::int64_t>(500, end - i);
    auto pred = net.forward(d.test_x.narrow(0, i, n).to(net.device())).argmax(1).to(torch::kCPU);
    correct += pred.eq(d.test_y.narrow(0, i, n)).sum().item<double>();
  }
  net.module().train();
  return {correct, static_cast<double>(end - begin)};
}

}  // namespace poseidon::app
