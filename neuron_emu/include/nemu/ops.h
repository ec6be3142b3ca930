// Tensor factories and the element-wise operations the Neuron custom-op tensor library documents.
// None of them broadcast: operand shapes must match.
#pragma once

#include "nemu/core.h"

namespace nemu {

Tensor empty(IntArrayRef size, TensorOptions options);
Tensor zeros(IntArrayRef size, TensorOptions options);
Tensor ones(IntArrayRef size, TensorOptions options);
Tensor full(IntArrayRef size, const Scalar& fill_value, TensorOptions options);
Tensor eye(int64_t n, TensorOptions options);
Tensor eye(int64_t n, int64_t m, TensorOptions options);

#define NEMU_UNARY_OP(name)                                 \
  Tensor& name##_out(Tensor& result, const Tensor& self); \
  Tensor name(const Tensor& self);

NEMU_UNARY_OP(abs)
NEMU_UNARY_OP(ceil)
NEMU_UNARY_OP(floor)
NEMU_UNARY_OP(sin)
NEMU_UNARY_OP(cos)
NEMU_UNARY_OP(tan)
NEMU_UNARY_OP(log)
NEMU_UNARY_OP(log2)
NEMU_UNARY_OP(log10)
NEMU_UNARY_OP(exp)
NEMU_UNARY_OP(bitwise_not)
#undef NEMU_UNARY_OP

Tensor& pow_out(Tensor& result, const Tensor& self, const Scalar& exponent);
Tensor& pow_out(Tensor& result, const Scalar& self, const Tensor& exponent);
Tensor& pow_out(Tensor& result, const Tensor& self, const Tensor& exponent);
Tensor pow(const Tensor& self, const Scalar& exponent);
Tensor pow(const Scalar& self, const Tensor& exponent);
Tensor pow(const Tensor& self, const Tensor& exponent);

Tensor& clamp_out(Tensor& result, const Tensor& self, const Scalar& minval, const Scalar& maxval);
Tensor clamp(const Tensor& self, const Scalar& minval, const Scalar& maxval);

Tensor& add_out(Tensor& result, const Tensor& self, const Scalar& other, const Scalar& alpha = 1);
Tensor& add_out(Tensor& result, const Tensor& self, const Tensor& other, const Scalar& alpha = 1);
Tensor add(const Tensor& self, const Scalar& other, const Scalar& alpha = 1);
Tensor add(const Tensor& self, const Tensor& other, const Scalar& alpha = 1);

Tensor& sub_out(Tensor& result, const Tensor& self, const Scalar& other, const Scalar& alpha = 1);
Tensor& sub_out(Tensor& result, const Tensor& self, const Tensor& other, const Scalar& alpha = 1);
Tensor sub(const Tensor& self, const Scalar& other, const Scalar& alpha = 1);
Tensor sub(const Tensor& self, const Tensor& other, const Scalar& alpha = 1);

Tensor& mul_out(Tensor& result, const Tensor& self, const Scalar& other);
Tensor& mul_out(Tensor& result, const Tensor& self, const Tensor& other);
Tensor mul(const Tensor& self, const Scalar& other);
Tensor mul(const Tensor& self, const Tensor& other);

Tensor& div_out(Tensor& result, const Tensor& self, const Scalar& other);
Tensor& div_out(Tensor& result, const Tensor& self, const Tensor& other);
Tensor div(const Tensor& self, const Scalar& other);
Tensor div(const Tensor& self, const Tensor& other);

Tensor& bitwise_and_out(Tensor& result, const Tensor& self, const Tensor& other);
Tensor& bitwise_and_out(Tensor& result, const Tensor& self, const Scalar& other);
Tensor& bitwise_and_out(Tensor& result, const Scalar& self, const Tensor& other);
Tensor bitwise_and(const Tensor& self, const Tensor& other);
Tensor bitwise_and(const Tensor& self, const Scalar& other);
Tensor bitwise_and(const Scalar& self, const Tensor& other);

Tensor& bitwise_or_out(Tensor& result, const Tensor& self, const Tensor& other);
Tensor& bitwise_or_out(Tensor& result, const Tensor& self, const Scalar& other);
Tensor& bitwise_or_out(Tensor& result, const Scalar& self, const Tensor& other);
Tensor bitwise_or(const Tensor& self, const Tensor& other);
Tensor bitwise_or(const Tensor& self, const Scalar& other);
Tensor bitwise_or(const Scalar& self, const Tensor& other);

}  // namespace nemu
