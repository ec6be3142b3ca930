// Kernels that move streaming accessors around and misuse them on purpose.
#include <stdint.h>
#include <torch/torch.h>

#include <utility>

// Copies x through streams that are moved mid-way: the moved-to streams carry the cursor and cached window.
torch::Tensor stream_moves(const torch::Tensor& x) {
  torch::Tensor out = torch::zeros(x.sizes(), torch::kFloat);
  torch::Tensor scratch = torch::zeros(x.sizes(), torch::kFloat);
  auto in = x.read_stream_accessor<float>();
  auto first = out.write_stream_accessor<float>();
  const int64_t half = x.numel() / 2;
  for (int64_t i = 0; i < half; i++) first.write(in.read());
  auto reader = std::move(in);  // move construction
  auto writer = scratch.write_stream_accessor<float>();
  writer = std::move(first);  // move assignment: closes the scratch stream, takes over out's
  for (int64_t i = half; i < x.numel(); i++) writer.write(reader.read());
  writer.close();
  return out;
}

// Mode 0 reads one element past the end; mode 1 writes after close().
torch::Tensor stream_misuse(const torch::Tensor& x, int64_t mode) {
  torch::Tensor out = torch::zeros(x.sizes(), torch::kFloat);
  if (mode == 0) {
    auto in = x.read_stream_accessor<float>();
    for (int64_t i = 0; i <= x.numel(); i++) in.read();
  } else {
    auto writer = out.write_stream_accessor<float>();
    writer.close();
    writer.write(1.0f);
  }
  return out;
}
