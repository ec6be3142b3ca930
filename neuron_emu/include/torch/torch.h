// neuron_emu: the NeuronCore port of <torch/torch.h> (a subset of the torch C++ API).
// Kernels compile unchanged against this header; the real libtorch is never visible to them.
#pragma once

#include <cstdint>
#include <cstdlib>

#include "nemu/core.h"
#include "nemu/ops.h"

namespace torch {
using nemu::BFloat16;
using nemu::CoherencyEnforcer;
using nemu::Half;
using nemu::IntArrayRef;
using nemu::Scalar;
using nemu::ScalarType;
using nemu::Tensor;
using nemu::TensorAccessor;
using nemu::TensorOptions;
using nemu::TensorReadStreamAccessor;
using nemu::TensorTcmAccessor;
using nemu::TensorWriteStreamAccessor;

using nemu::dtype;

using nemu::empty;
using nemu::eye;
using nemu::full;
using nemu::ones;
using nemu::zeros;

using nemu::abs;
using nemu::abs_out;
using nemu::add;
using nemu::add_out;
using nemu::bitwise_and;
using nemu::bitwise_and_out;
using nemu::bitwise_not;
using nemu::bitwise_not_out;
using nemu::bitwise_or;
using nemu::bitwise_or_out;
using nemu::ceil;
using nemu::ceil_out;
using nemu::clamp;
using nemu::clamp_out;
using nemu::cos;
using nemu::cos_out;
using nemu::div;
using nemu::div_out;
using nemu::exp;
using nemu::exp_out;
using nemu::floor;
using nemu::floor_out;
using nemu::log;
using nemu::log10;
using nemu::log10_out;
using nemu::log2;
using nemu::log2_out;
using nemu::log_out;
using nemu::mul;
using nemu::mul_out;
using nemu::pow;
using nemu::pow_out;
using nemu::sin;
using nemu::sin_out;
using nemu::sub;
using nemu::sub_out;
using nemu::tan;
using nemu::tan_out;

constexpr ScalarType kByte = ScalarType::Byte;
constexpr ScalarType kUInt8 = ScalarType::Byte;
constexpr ScalarType kChar = ScalarType::Char;
constexpr ScalarType kInt8 = ScalarType::Char;
constexpr ScalarType kShort = ScalarType::Short;
constexpr ScalarType kInt16 = ScalarType::Short;
constexpr ScalarType kInt = ScalarType::Int;
constexpr ScalarType kInt32 = ScalarType::Int;
constexpr ScalarType kHalf = ScalarType::Half;
constexpr ScalarType kFloat16 = ScalarType::Half;
constexpr ScalarType kFloat = ScalarType::Float;
constexpr ScalarType kFloat32 = ScalarType::Float;
constexpr ScalarType kBFloat16 = ScalarType::BFloat16;
// Named so code that mentions them still parses; using one is a compile-time error (see TensorOptions).
constexpr nemu::UnsupportedDtype<ScalarType::Double> kDouble{};
constexpr nemu::UnsupportedDtype<ScalarType::Double> kFloat64{};
constexpr nemu::UnsupportedDtype<ScalarType::Long> kLong{};
constexpr nemu::UnsupportedDtype<ScalarType::Long> kInt64{};
constexpr nemu::UnsupportedDtype<ScalarType::Bool> kBool{};

namespace neuron {
using nemu::tcm_free;
using nemu::tcm_malloc;
}  // namespace neuron
}  // namespace torch

namespace c10 {
using nemu::BFloat16;
using nemu::Half;
using nemu::IntArrayRef;
using nemu::Scalar;
using nemu::ScalarType;
using nemu::TensorOptions;
}  // namespace c10

namespace at {
using nemu::BFloat16;
using nemu::Half;
using nemu::IntArrayRef;
using nemu::Scalar;
using nemu::ScalarType;
using nemu::Tensor;
using nemu::TensorOptions;
using torch::kBFloat16;
using torch::kByte;
using torch::kChar;
using torch::kFloat;
using torch::kHalf;
using torch::kInt;
using torch::kShort;
}  // namespace at

// Writing directly to the op's output buffer (its shape and dtype come from the shape function).
inline torch::Tensor get_dst_tensor() { return nemu::detail::dst_tensor(); }
