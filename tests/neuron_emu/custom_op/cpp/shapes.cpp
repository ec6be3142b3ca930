#include <stdint.h>
#include <stdlib.h>
#include <torch/torch.h>
#include "torchneuron/register.h"

torch::Tensor same_shape(torch::Tensor t_in) { return torch::zeros(t_in.sizes(), torch::kFloat); }
torch::Tensor second_shape(torch::Tensor t_grad, torch::Tensor t_in) { return torch::zeros(t_in.sizes(), torch::kFloat); }
torch::Tensor scale_add_shape(torch::Tensor a, torch::Tensor b, double alpha, int64_t offset, torch::Scalar beta) {
  return torch::zeros(a.sizes(), torch::kFloat);
}
torch::Tensor one_int(torch::Tensor x) { return torch::zeros({1}, torch::kInt); }
torch::Tensor tcm_alloc_shape(torch::Tensor x, int64_t nbytes) { return torch::zeros({1}, torch::kInt); }

NEURON_LIBRARY(nemu_test, m) {
  m.def("relu_forward", &same_shape, "relu_forward");
  m.def("relu_backward", &second_shape, "relu_backward");
  m.def("scale_add", &scale_add_shape, "scale_add");
  m.def("tcm_negate", &same_shape, "tcm_negate");
  m.def("tensor_math", &same_shape, "tensor_math");
  m.def("bf16_double", &same_shape, "bf16_double");
  m.def("kernel_calls", &one_int, "kernel_calls");
  m.def("tcm_alloc", &tcm_alloc_shape, "tcm_alloc");
  m.def("incoherent", &same_shape, "incoherent");
  m.def("dst_single", &same_shape, "dst_single");
}
