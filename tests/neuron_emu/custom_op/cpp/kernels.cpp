// Kernels written against the Neuron custom-op API, exercising its accessors, TCM and tensor library.
#include <stdint.h>
#include <stdlib.h>
#include <torch/torch.h>

static int32_t relu_calls = 0;

torch::Tensor relu_forward(const torch::Tensor& t_in) {
  ++relu_calls;
  size_t num_elem = t_in.numel();
  torch::Tensor t_out = torch::zeros({num_elem}, torch::kFloat);  // flat: the shape function gives the shape
  auto in = t_in.accessor<float, 2>();
  auto out = t_out.accessor<float, 1>();
  const int64_t cols = t_in.size(1);
  for (int64_t i = 0; i < t_in.size(0); i++) {
    for (int64_t j = 0; j < cols; j++) {
      out[i * cols + j] = in[i][j] > 0.0 ? in[i][j] : 0.0;
    }
  }
  return t_out;
}

torch::Tensor relu_backward(const torch::Tensor& t_grad, const torch::Tensor& t_in) {
  torch::Tensor t_out = torch::empty(t_in.sizes(), torch::kFloat);
  auto grad = t_grad.read_stream_accessor<float>();
  auto in = t_in.read_stream_accessor<float>();
  auto out = t_out.write_stream_accessor<float>();
  for (int64_t i = 0; i < t_in.numel(); i++) {
    float g = grad.read();
    out.write(in.read() > 0.0f ? g : 0.0f);
  }
  out.close();
  return t_out;
}

torch::Tensor scale_add(const torch::Tensor& a, const torch::Tensor& b, double alpha, int64_t offset,
                        const torch::Scalar& beta) {
  torch::Tensor out = torch::empty(a.sizes(), torch::kFloat);
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0; i < a.numel(); i++) {
    po[i] = static_cast<float>(pa[i] * alpha + pb[i] * beta.toDouble() + offset);
  }
  return out;
}

torch::Tensor tcm_negate(const torch::Tensor& t_in) {
  size_t num_elem = t_in.numel();
  torch::Tensor t_out = torch::empty(t_in.sizes(), torch::kFloat);
  static constexpr size_t buffer_size = 1024;
  float* tcm_buffer = (float*)torch::neuron::tcm_malloc(sizeof(float) * buffer_size);
  if (tcm_buffer != nullptr) {
    auto t_in_tcm_acc = t_in.tcm_accessor();
    auto t_out_tcm_acc = t_out.tcm_accessor();
    for (size_t i = 0; i < num_elem; i += buffer_size) {
      size_t remaining_elem = num_elem - i;
      size_t copy_size = (remaining_elem > buffer_size) ? buffer_size : remaining_elem;
      t_in_tcm_acc.tensor_to_tcm<float>(tcm_buffer, i, copy_size);
      for (size_t j = 0; j < copy_size; j++) tcm_buffer[j] *= -1;
      t_out_tcm_acc.tcm_to_tensor<float>(tcm_buffer, i, copy_size);
    }
    torch::neuron::tcm_free(tcm_buffer);
  }
  return t_out;
}

torch::Tensor tensor_math(const torch::Tensor& x) {
  torch::Tensor e = torch::exp(x);
  torch::Tensor doubled = torch::mul(e, 2);
  torch::Tensor quarter = torch::div(x, 4.0);
  torch::Tensor diff = torch::sub(doubled, quarter);
  torch::Tensor squared = torch::pow(x, 2);
  torch::Tensor total = torch::empty(x.sizes(), torch::kFloat);
  torch::add_out(total, diff, squared);
  return torch::clamp(total, -5.0, 5.0);
}

torch::Tensor bf16_double(const torch::Tensor& x) {
  torch::Tensor out = torch::empty(x.sizes(), torch::kFloat);
  auto in = x.accessor<c10::BFloat16, 1>();
  auto o = out.accessor<float, 1>();
  for (int64_t i = 0; i < x.size(0); i++) o[i] = 2.0f * static_cast<float>(in[i]);
  return out;
}

torch::Tensor kernel_calls(const torch::Tensor& x) { return torch::full({1}, relu_calls, torch::kInt); }

torch::Tensor tcm_alloc(const torch::Tensor& x, int64_t nbytes) {
  void* buffer = torch::neuron::tcm_malloc(static_cast<size_t>(nbytes));
  torch::Tensor out = torch::full({1}, buffer != nullptr ? 1 : 0, torch::kInt);
  torch::neuron::tcm_free(buffer);
  if (nbytes < 0) {  // misuse on purpose: hand a null TCM buffer to the accessor
    auto acc = x.tcm_accessor();
    acc.tensor_to_tcm<float>(static_cast<float*>(nullptr), 0, 1);
  }
  return out;
}

torch::Tensor incoherent(const torch::Tensor& x) {
  torch::Tensor out = torch::zeros(x.sizes(), torch::kFloat);
  auto writer = out.write_stream_accessor<float>();
  writer.write(1.0f);
  auto reader = out.accessor<float, 1>();  // still open write stream: incoherent under COHERENT
  return out;
}

torch::Tensor dst_single(const torch::Tensor& x) {
  torch::Tensor dst = get_dst_tensor();
  auto acc = dst.tcm_accessor();
  float* buffer = (float*)torch::neuron::tcm_malloc(sizeof(float) * x.numel());
  auto in = x.tcm_accessor();
  in.tensor_to_tcm<float>(buffer, 0, x.numel());
  for (int64_t i = 0; i < x.numel(); i++) buffer[i] += 1.0f;
  acc.tcm_to_tensor<float>(buffer, 0, x.numel());
  torch::neuron::tcm_free(buffer);
  return torch::zeros({3}, torch::kFloat);  // ignored: the kernel wrote get_dst_tensor()
}
