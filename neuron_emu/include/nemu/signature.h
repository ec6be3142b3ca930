// Compile-time checks and type-erased callers for shape functions and kernels.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "nemu/core.h"

namespace nemu {
namespace detail {

template <class A>
struct ArgTraits {
  static constexpr bool allowed = false;
  static constexpr char kind = '?';
  static constexpr bool writable = false;
};
template <>
struct ArgTraits<Tensor> {
  static constexpr bool allowed = true;
  static constexpr char kind = 'T';
  static constexpr bool writable = true;  // a by-value tensor shares the caller's storage
};
template <>
struct ArgTraits<const Tensor&> {
  static constexpr bool allowed = true;
  static constexpr char kind = 'T';
  static constexpr bool writable = false;
};
template <>
struct ArgTraits<Tensor&> {
  static constexpr bool allowed = true;
  static constexpr char kind = 'T';
  static constexpr bool writable = true;
};
template <>
struct ArgTraits<double> {
  static constexpr bool allowed = true;
  static constexpr char kind = 'd';
  static constexpr bool writable = false;
};
template <>
struct ArgTraits<const double&> : ArgTraits<double> {};
template <>
struct ArgTraits<int64_t> {
  static constexpr bool allowed = true;
  static constexpr char kind = 'i';
  static constexpr bool writable = false;
};
template <>
struct ArgTraits<const int64_t&> : ArgTraits<int64_t> {};
template <>
struct ArgTraits<Scalar> {
  static constexpr bool allowed = true;
  static constexpr char kind = 'S';
  static constexpr bool writable = false;
};
template <>
struct ArgTraits<const Scalar&> : ArgTraits<Scalar> {};

struct ArgValue {
  char kind = 'T';
  Tensor tensor;
  double d = 0.0;
  int64_t i = 0;
  Scalar scalar;
};

using ErasedFn = void (*)();
using Invoker = Tensor (*)(ErasedFn fn, std::vector<ArgValue>& args);

struct FnInfo {
  ErasedFn fn = nullptr;
  Invoker invoke = nullptr;
  const char* signature = "";
  bool writes_inputs = false;
  int nargs = 0;
};

template <class A>
decltype(auto) unpack(ArgValue& value) {
  if constexpr (ArgTraits<A>::kind == 'T') {
    return (value.tensor);
  } else if constexpr (ArgTraits<A>::kind == 'd') {
    return (value.d);
  } else if constexpr (ArgTraits<A>::kind == 'i') {
    return (value.i);
  } else {
    return (value.scalar);
  }
}

template <class R, class... A>
constexpr bool valid_signature = std::is_same_v<R, Tensor> && (ArgTraits<A>::allowed && ... && true);

template <class R, class... A, size_t... I>
Tensor invoke_with(R (*fn)(A...), std::vector<ArgValue>& args, std::index_sequence<I...>) {
  return fn(unpack<A>(args[I])...);
}

template <class R, class... A>
Tensor invoke(ErasedFn erased, std::vector<ArgValue>& args) {
  if constexpr (valid_signature<R, A...>) {
    auto fn = reinterpret_cast<R (*)(A...)>(erased);
    return invoke_with(fn, args, std::index_sequence_for<A...>{});
  } else {
    return Tensor();
  }
}

template <class R, class... A>
FnInfo fn_info(R (*fn)(A...)) {
  static constexpr char signature[] = {ArgTraits<A>::kind..., '\0'};
  FnInfo info;
  info.fn = reinterpret_cast<ErasedFn>(fn);
  info.invoke = &invoke<R, A...>;
  info.signature = signature;
  info.writes_inputs = (ArgTraits<A>::writable || ... || false);
  info.nargs = static_cast<int>(sizeof...(A));
  return info;
}

template <class R, class... A>
FnInfo shape_fn_info(R (*fn)(A...)) {
  static_assert(std::is_same_v<R, Tensor>,
                "NEURON_LIBRARY m.def(): the shape function must return exactly one torch::Tensor (custom ops "
                "return a single Tensor; no std::tuple or std::vector)");
  static_assert((ArgTraits<A>::allowed && ... && true),
                "NEURON_LIBRARY m.def(): shape-function arguments must be torch::Tensor, torch::Scalar, double or "
                "int64_t (no std::vector, std::tuple, float, int or bool)");
  static_assert(sizeof...(A) <= NEMU_MAX_ARGS, "NEURON_LIBRARY m.def(): at most 16 arguments per custom op");
  return fn_info(fn);
}

template <class R, class... A>
FnInfo kernel_fn_info(R (*fn)(A...)) {
  static_assert(std::is_same_v<R, Tensor>,
                "custom-op kernel must return exactly one torch::Tensor (no std::tuple or std::vector)");
  static_assert((ArgTraits<A>::allowed && ... && true),
                "custom-op kernel arguments must be torch::Tensor, torch::Scalar, double or int64_t (no std::vector, "
                "std::tuple, float, int or bool)");
  static_assert(sizeof...(A) <= NEMU_MAX_ARGS, "custom-op kernel: at most 16 arguments");
  return fn_info(fn);
}

struct KernelEntry {
  const char* name;
  const char* source;
  FnInfo info;
};

// Generated per library by neuron_emu's build step (the kernel index translation unit).
const KernelEntry* generated_kernels(size_t* count);
int generated_multicore();
const char* generated_library_file();

}  // namespace detail

class LibraryBuilder {
 public:
  template <class R, class... A>
  void def(const char* op_name, R (*shape_fn)(A...), const char* kernel_name) {
    add(op_name, kernel_name, detail::shape_fn_info(shape_fn));
  }
  void add(const char* op_name, const char* kernel_name, const detail::FnInfo& shape);

  struct Decl {
    std::string op_name;
    std::string kernel_name;
    detail::FnInfo shape;
  };
  std::vector<Decl> decls;
};

struct LibraryRegistrar {
  LibraryRegistrar(const char* ns, void (*init)(LibraryBuilder&), const char* file, int line) noexcept;
};

}  // namespace nemu
