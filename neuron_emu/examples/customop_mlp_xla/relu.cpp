// ReLU forward and backward as Neuron custom-op kernels (element accessors, as in the Neuron MLP tutorial).
#include <stdint.h>
#include <stdlib.h>
#include <torch/torch.h>

torch::Tensor relu_forward(const torch::Tensor& t_in) {
  torch::Tensor t_out = torch::zeros(t_in.sizes(), torch::kFloat);
  auto t_in_acc = t_in.accessor<float, 2>();
  auto t_out_acc = t_out.accessor<float, 2>();
  for (int64_t i = 0; i < t_in.size(0); i++) {
    for (int64_t j = 0; j < t_in.size(1); j++) {
      t_out_acc[i][j] = t_in_acc[i][j] > 0.0 ? t_in_acc[i][j] : 0.0;
    }
  }
  return t_out;
}

torch::Tensor relu_backward(const torch::Tensor& t_grad, const torch::Tensor& t_in) {
  torch::Tensor t_out = torch::zeros(t_in.sizes(), torch::kFloat);
  auto t_in_acc = t_in.accessor<float, 2>();
  auto t_grad_acc = t_grad.accessor<float, 2>();
  auto t_out_acc = t_out.accessor<float, 2>();
  for (int64_t i = 0; i < t_in.size(0); i++) {
    for (int64_t j = 0; j < t_in.size(1); j++) {
      t_out_acc[i][j] = t_in_acc[i][j] > 0.0 ? t_grad_acc[i][j] : 0.0;
    }
  }
  return t_out;
}
