// neuron_emu bridge: registers a custom-op library's ops with the real torch dispatcher (CPU kernel that runs the
// emulated NeuronCore kernel, Meta kernel that runs the shape function) and hands tensors across nemu/abi.h.
// The only translation unit of a library that sees the real libtorch headers.
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/empty.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "nemu/abi.h"

namespace {

constexpr int64_t kMaxDimSize = 65535;

bool supported_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
    case c10::ScalarType::BFloat16:
    case c10::ScalarType::Half:
    case c10::ScalarType::Int:
    case c10::ScalarType::Short:
    case c10::ScalarType::Char:
    case c10::ScalarType::Byte:
      return true;
    default:
      return false;
  }
}

std::string python_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
      return "torch.float32";
    case c10::ScalarType::Double:
      return "torch.float64";
    case c10::ScalarType::BFloat16:
      return "torch.bfloat16";
    case c10::ScalarType::Half:
      return "torch.float16";
    case c10::ScalarType::Int:
      return "torch.int32";
    case c10::ScalarType::Long:
      return "torch.int64";
    case c10::ScalarType::Short:
      return "torch.int16";
    case c10::ScalarType::Char:
      return "torch.int8";
    case c10::ScalarType::Byte:
      return "torch.uint8";
    case c10::ScalarType::Bool:
      return "torch.bool";
    default:
      return std::string("torch.") + c10::toString(type);
  }
}

void* host_alloc(const int64_t* sizes, int32_t ndim, int32_t dtype, void** owner) {
  at::Tensor tensor = at::detail::empty_cpu(c10::IntArrayRef(sizes, static_cast<size_t>(ndim)),
                                            static_cast<c10::ScalarType>(dtype), false, std::nullopt);
  auto* holder = new at::Tensor(std::move(tensor));
  *owner = holder;
  return holder->data_ptr();
}

void* host_retain(void* owner) { return new at::Tensor(*static_cast<at::Tensor*>(owner)); }

void host_release(void* owner) { delete static_cast<at::Tensor*>(owner); }

const nemu_allocator_t kHostAllocator = {&host_alloc, &host_retain, &host_release};

std::string schema_for(const nemu_op_t& op) {
  std::string schema = std::string(op.name) + "(";
  for (int32_t i = 0; i < op.nargs; ++i) {
    if (i) schema += ", ";
    switch (op.signature[i]) {
      case 'T':
        schema += "Tensor";
        break;
      case 'd':
        schema += "float";
        break;
      case 'i':
        schema += "int";
        break;
      default:
        schema += "Scalar";
    }
    schema += " arg" + std::to_string(i);
  }
  return schema + ") -> Tensor";
}

class OpKernel final : public c10::OperatorKernel {
 public:
  OpKernel(const nemu_library_t* library, int32_t index, bool meta)
      : library_(library),
        op_(library->ops[index]),
        meta_(meta),
        name_(std::string(library->ns) + "::" + library->ops[index].name) {}

  void operator()(const c10::OperatorHandle& /*handle*/, c10::DispatchKeySet /*keys*/, torch::jit::Stack* stack) {
    const int32_t nargs = op_.nargs;
    nemu_arg_t args[NEMU_MAX_ARGS];
    c10::SmallVector<at::Tensor, 4> keep;
    auto values = torch::jit::last(*stack, static_cast<size_t>(nargs));
    for (int32_t i = 0; i < nargs; ++i) {
      nemu_arg_t& arg = args[i];
      std::memset(&arg, 0, sizeof(arg));
      const c10::IValue& value = values[static_cast<size_t>(i)];
      switch (op_.signature[i]) {
        case 'T': {
          arg.kind = NEMU_ARG_TENSOR;
          keep.push_back(tensor_argument(value, i, arg.tensor));
          break;
        }
        case 'd':
          arg.kind = NEMU_ARG_DOUBLE;
          arg.d = value.toDouble();
          break;
        case 'i':
          arg.kind = NEMU_ARG_INT;
          arg.i = value.toInt();
          break;
        default: {
          const c10::Scalar scalar = value.toScalar();
          if (scalar.isFloatingPoint()) {
            arg.kind = NEMU_ARG_SCALAR_DOUBLE;
            arg.d = scalar.toDouble();
          } else if (scalar.isIntegral(true)) {
            arg.kind = NEMU_ARG_SCALAR_INT;
            arg.i = scalar.toLong();
          } else {
            fail("argument " + std::to_string(i) + " is a complex or symbolic scalar; custom ops take real scalars");
          }
        }
      }
    }
    torch::jit::drop(*stack, static_cast<size_t>(nargs));
    char error[2048] = {0};
    if (meta_) {
      nemu_tensor_t out;
      if (library_->shape(op_.op, args, nargs, &out, error, sizeof(error)) != 0) fail(error);
      torch::jit::push(*stack, at::empty(c10::IntArrayRef(out.sizes, static_cast<size_t>(out.ndim)),
                                         at::TensorOptions()
                                             .dtype(static_cast<c10::ScalarType>(out.dtype))
                                             .device(c10::DeviceType::Meta)));
      return;
    }
    nemu_result_t result;
    std::memset(&result, 0, sizeof(result));
    if (library_->call(op_.op, args, nargs, &kHostAllocator, &result, error, sizeof(error)) != 0) fail(error);
    std::unique_ptr<at::Tensor> owner(static_cast<at::Tensor*>(result.owner));
    at::Tensor out = *owner;
    const c10::IntArrayRef sizes(result.tensor.sizes, static_cast<size_t>(result.tensor.ndim));
    if (!out.sizes().equals(sizes)) out = out.view(sizes);
    torch::jit::push(*stack, std::move(out));
  }

 private:
  [[noreturn]] void fail(const std::string& message) const { throw std::runtime_error(name_ + ": " + message); }

  at::Tensor tensor_argument(const c10::IValue& value, int32_t index, nemu_tensor_t& out) const {
    const std::string which = "argument " + std::to_string(index);
    if (!value.isTensor()) fail(which + " must be a Tensor");
    at::Tensor tensor = value.toTensor();
    if (!tensor.defined()) fail(which + " is an undefined tensor");
    if (!supported_dtype(tensor.scalar_type())) {
      fail(which + " has dtype " + python_dtype(tensor.scalar_type()) +
           "; NeuronCore custom ops support torch.float32, torch.bfloat16, torch.float16, torch.int32, "
           "torch.int16, torch.int8 and torch.uint8");
    }
    if (tensor.is_complex()) fail(which + " is complex");
    if (tensor.sym_sizes().size() > static_cast<size_t>(NEMU_MAX_DIMS)) {
      fail(which + " has " + std::to_string(tensor.dim()) +
           " dimensions; NeuronCore custom-op tensors have at most 8");
    }
    for (const c10::SymInt& size : tensor.sym_sizes()) {
      if (!size.maybe_as_int().has_value()) {
        fail(which + " has a symbolic (dynamic) size; Neuron compiles fixed shapes, so custom-op shape functions "
                     "need static sizes");
      }
    }
    if (meta_) {
      if (!tensor.is_meta() && tensor.device().type() != c10::DeviceType::CPU) fail(which + " is not a CPU tensor");
    } else {
      if (tensor.device().type() != c10::DeviceType::CPU) fail(which + " is not a CPU tensor");
      tensor = tensor.contiguous();
    }
    out.ndim = static_cast<int32_t>(tensor.dim());
    out.dtype = static_cast<int32_t>(tensor.scalar_type());
    for (int64_t d = 0; d < tensor.dim(); ++d) {
      const int64_t size = tensor.size(d);
      if (size > kMaxDimSize) {
        fail(which + " has size " + std::to_string(size) + " in dimension " + std::to_string(d) +
             "; NeuronCore custom-op tensors allow at most 65535 elements per dimension");
      }
      out.sizes[d] = size;
    }
    out.data = meta_ ? nullptr : tensor.data_ptr();
    return tensor;
  }

  const nemu_library_t* library_;
  const nemu_op_t op_;
  const bool meta_;
  const std::string name_;
};

std::vector<std::unique_ptr<torch::Library>>& libraries() {
  static auto* kept = new std::vector<std::unique_ptr<torch::Library>>();  // registrations live for the process
  return *kept;
}

}  // namespace

extern "C" int nemu_bridge_register(const nemu_library_t* library, char* error, size_t error_len) {
  try {
    if (library->abi_version != NEMU_ABI_VERSION) throw std::runtime_error("ABI version mismatch");
    for (int32_t i = 0; i < library->nops; ++i) {
      if (library->ops[i].nargs > NEMU_MAX_ARGS) throw std::runtime_error("too many arguments");
    }
    auto def = std::make_unique<torch::Library>(torch::Library::DEF, std::string(library->ns), std::nullopt,
                                                library->origin, 0);
    for (int32_t i = 0; i < library->nops; ++i) def->def(schema_for(library->ops[i]).c_str());
    auto cpu = std::make_unique<torch::Library>(torch::Library::IMPL, std::string(library->ns),
                                                c10::DispatchKey::CPU, library->origin, 0);
    auto meta = std::make_unique<torch::Library>(torch::Library::IMPL, std::string(library->ns),
                                                 c10::DispatchKey::Meta, library->origin, 0);
    for (int32_t i = 0; i < library->nops; ++i) {
      const char* name = library->ops[i].name;
      cpu->impl(name, torch::CppFunction::makeFromBoxedFunctor(std::make_unique<OpKernel>(library, i, false)));
      meta->impl(name, torch::CppFunction::makeFromBoxedFunctor(std::make_unique<OpKernel>(library, i, true)));
    }
    libraries().push_back(std::move(def));
    libraries().push_back(std::move(cpu));
    libraries().push_back(std::move(meta));
    return 0;
  } catch (const c10::Error& e) {
    std::string message = e.what_without_backtrace();
    const size_t newline = message.find('\n');
    if (newline != std::string::npos) message.resize(newline);
    if (message.find("Only a single TORCH_LIBRARY") != std::string::npos) {
      message = std::string("the namespace '") + library->ns +
                "' is already registered in this process (by another custom-op library or torch itself)";
    }
    std::snprintf(error, error_len, "%s", message.c_str());
  } catch (const std::exception& e) {
    std::snprintf(error, error_len, "%s", e.what());
  }
  return 1;
}
