// One ReLU in the styles the Neuron custom-op documentation contrasts: element accessors (as in the MLP
// tutorial), TCM block transfers (as in the performance tutorial) and streaming accessors.
#include <stdint.h>
#include <stdlib.h>
#include <torch/torch.h>

torch::Tensor relu_accessor(const torch::Tensor& t_in) {
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

torch::Tensor relu_tcm(const torch::Tensor& t_in) {
  size_t num_elem = t_in.numel();
  torch::Tensor t_out = torch::zeros(t_in.sizes(), torch::kFloat);
  static constexpr size_t buffer_size = 1024;
  float* tcm_buffer = (float*)torch::neuron::tcm_malloc(sizeof(float) * buffer_size);
  if (tcm_buffer != nullptr) {
    auto t_in_tcm_acc = t_in.tcm_accessor();
    auto t_out_tcm_acc = t_out.tcm_accessor();
    for (size_t i = 0; i < num_elem; i += buffer_size) {
      size_t remaining_elem = num_elem - i;
      size_t copy_size = (remaining_elem > buffer_size) ? buffer_size : remaining_elem;
      t_in_tcm_acc.tensor_to_tcm<float>(tcm_buffer, i, copy_size);
      for (size_t j = 0; j < copy_size; j++) tcm_buffer[j] = tcm_buffer[j] > 0.0 ? tcm_buffer[j] : 0.0;
      t_out_tcm_acc.tcm_to_tensor<float>(tcm_buffer, i, copy_size);
    }
  }
  torch::neuron::tcm_free(tcm_buffer);
  return t_out;
}

torch::Tensor relu_stream(const torch::Tensor& t_in) {
  torch::Tensor t_out = torch::empty(t_in.sizes(), torch::kFloat);
  auto in = t_in.read_stream_accessor<float>();
  auto out = t_out.write_stream_accessor<float>();
  for (int64_t i = 0; i < t_in.numel(); i++) {
    float v = in.read();
    out.write(v > 0.0f ? v : 0.0f);
  }
  out.close();
  return t_out;
}

// The same streaming ReLU with the TCM pool already full: the streams get no 4 KB window, so every element
// goes straight to NeuronCore memory (the API guide: streams beyond the 4th perform like standard accessors).
torch::Tensor relu_stream_pool_full(const torch::Tensor& t_in) {
  void* hog = torch::neuron::tcm_malloc(16 * 1024);
  torch::Tensor t_out = relu_stream(t_in);
  torch::neuron::tcm_free(hog);
  return t_out;
}

// Computes through the torch:: tensor library and reads a raw pointer: counted as library elements and as a
// data_ptr() call (what the kernel does through the pointer is invisible to the profile).
torch::Tensor relu_library(const torch::Tensor& t_in) {
  torch::Tensor clamped = torch::clamp(t_in, 0.0, 3.0e38);
  const float* raw = clamped.data_ptr<float>();
  (void)raw;
  return clamped;
}
