// neuron_emu runtime: the emulated NeuronCore side of a custom-op library (tensors, TCM, GPSIMD cores,
// the element-wise tensor library) and the registration of NEURON_LIBRARY blocks. Compiled against the
// shim headers only; it talks to torch through the C boundary in nemu/abi.h.
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nemu/abi.h"
#include "nemu/core.h"
#include "nemu/ops.h"
#include "nemu/signature.h"

#define NEMU_EXPORT extern "C" __attribute__((visibility("default")))

namespace nemu {

void fail(const std::string& message) { throw Error(message); }

const char* dtype_name(ScalarType type) {
  switch (type) {
    case ScalarType::Byte:
      return "uint8";
    case ScalarType::Char:
      return "int8";
    case ScalarType::Short:
      return "int16";
    case ScalarType::Int:
      return "int32";
    case ScalarType::Long:
      return "int64";
    case ScalarType::Half:
      return "float16";
    case ScalarType::Float:
      return "float32";
    case ScalarType::Double:
      return "float64";
    case ScalarType::Bool:
      return "bool";
    case ScalarType::BFloat16:
      return "bfloat16";
    default:
      return "undefined";
  }
}

bool is_supported_dtype(ScalarType type) {
  switch (type) {
    case ScalarType::Byte:
    case ScalarType::Char:
    case ScalarType::Short:
    case ScalarType::Int:
    case ScalarType::Half:
    case ScalarType::Float:
    case ScalarType::BFloat16:
      return true;
    default:
      return false;
  }
}

bool is_floating_dtype(ScalarType type) {
  return type == ScalarType::Half || type == ScalarType::Float || type == ScalarType::BFloat16 ||
         type == ScalarType::Double;
}

size_t dtype_size(ScalarType type) {
  switch (type) {
    case ScalarType::Byte:
    case ScalarType::Char:
    case ScalarType::Bool:
      return 1;
    case ScalarType::Short:
    case ScalarType::Half:
    case ScalarType::BFloat16:
      return 2;
    case ScalarType::Int:
    case ScalarType::Float:
      return 4;
    case ScalarType::Long:
    case ScalarType::Double:
      return 8;
    default:
      return 0;
  }
}

namespace {

constexpr size_t kTcmPoolBytes = 16 * 1024;
constexpr size_t kTcmAlignment = 16;
constexpr uint32_t kGpsimdCores = 8;
constexpr size_t kMaxFunctionsPerLibrary = 10;

const char* const kSupportedDtypes = "float32, bfloat16, float16, int32, int16, int8, uint8";
const char* const kShapeOnlyMessage =
    "shape functions cannot read tensor data (they run on the host at compile time, before any data "
    "exists); use sizes(), dim(), numel() or scalar_type()";

std::string join_sizes(IntArrayRef sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(sizes[i]);
  }
  return out + "]";
}

// ---------------------------------------------------------------- TCM pool (one per GPSIMD core)
class TcmPool {
 public:
  TcmPool() = default;
  TcmPool(const TcmPool&) = delete;
  TcmPool& operator=(const TcmPool&) = delete;
  ~TcmPool() { std::free(arena_); }

  void* allocate(size_t nbytes) {
    if (nbytes == 0 || nbytes > kTcmPoolBytes) return nullptr;
    if (arena_ == nullptr) {
      arena_ = static_cast<unsigned char*>(std::aligned_alloc(64, kTcmPoolBytes));
      if (arena_ == nullptr) return nullptr;
    }
    const size_t reserved = (nbytes + kTcmAlignment - 1) / kTcmAlignment * kTcmAlignment;
    size_t cursor = 0;
    size_t index = 0;
    for (; index < blocks_.size(); ++index) {
      if (blocks_[index].offset - cursor >= reserved) break;
      cursor = blocks_[index].offset + blocks_[index].reserved;
    }
    if (index == blocks_.size() && kTcmPoolBytes - cursor < reserved) return nullptr;
    blocks_.insert(blocks_.begin() + static_cast<std::ptrdiff_t>(index), Block{cursor, nbytes, reserved});
    return arena_ + cursor;
  }

  bool release(const void* ptr) {
    for (size_t i = 0; i < blocks_.size(); ++i) {
      if (arena_ + blocks_[i].offset == ptr) {
        blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(i));
        return true;
      }
    }
    return false;
  }

  bool contains(const void* ptr, size_t nbytes) const {
    if (arena_ == nullptr) return false;
    const auto* p = static_cast<const unsigned char*>(ptr);
    for (const Block& block : blocks_) {
      const unsigned char* begin = arena_ + block.offset;
      if (p >= begin && p < begin + block.size) return p + nbytes <= begin + block.size;
    }
    return false;
  }

  size_t used() const {
    size_t total = 0;
    for (const Block& block : blocks_) total += block.reserved;
    return total;
  }

 private:
  struct Block {
    size_t offset;
    size_t size;
    size_t reserved;
  };
  unsigned char* arena_ = nullptr;
  std::vector<Block> blocks_;
};

// ---------------------------------------------------------------- per-call and per-core state
struct CallState {
  const nemu_allocator_t* allocator = nullptr;
  std::vector<int64_t> out_sizes;
  ScalarType out_dtype = ScalarType::Undefined;
  std::mutex dst_mutex;
  Tensor dst;
  bool dst_used = false;
};

struct CoreState {
  uint32_t id = 0;
  uint32_t count = 1;
  bool multicore = false;
  CallState* call = nullptr;
  TcmPool pool;
  CoreProfile profile;
};

thread_local CoreState* tl_core = nullptr;
thread_local CoreProfile tl_scratch_profile;  // counts what code outside any kernel call does (never reported)

// ---------------------------------------------------------------- call profiles (neuron_emu.custom_op.profile)
// While recording is on, every successful call appends the access profile of each core that ran it. The log is
// taken once per call, after the kernel returned: the kernels' hot loops only bump their own core's counters.
#define NEMU_PROFILE_FIELDS(X)                                                                                \
  X(accessor_reads) X(accessor_writes) X(stream_reads) X(stream_writes) X(stream_uncached_reads)             \
  X(stream_uncached_writes) X(stream_transfers) X(stream_bytes) X(tcm_transfers) X(tcm_bytes) X(tcm_elements_out) \
  X(library_elements) X(data_ptr_calls)
#define NEMU_COUNT_FIELD(name) +1
static_assert(sizeof(CoreProfile) == sizeof(uint64_t) * (0 NEMU_PROFILE_FIELDS(NEMU_COUNT_FIELD)),
              "NEMU_PROFILE_FIELDS must list every CoreProfile counter");
#undef NEMU_COUNT_FIELD

constexpr size_t kMaxRecordedCalls = size_t{1} << 16;  // at most ~55 MB of 8-core profiles; later calls dropped

struct OpRecord;

struct CallProfileRecord {
  const OpRecord* op;
  bool multicore;
  std::vector<CoreProfile> cores;
};

struct ProfileLog {
  std::atomic<bool> recording{false};
  std::mutex mutex;
  std::vector<CallProfileRecord> calls;
  uint64_t dropped = 0;
};

ProfileLog& profile_log() {
  static ProfileLog* log = new ProfileLog();  // never destroyed: kernels may run during process exit
  return *log;
}
thread_local int tl_shape_mode = 0;

struct CoreGuard {
  explicit CoreGuard(CoreState* core) : previous(tl_core) { tl_core = core; }
  ~CoreGuard() { tl_core = previous; }
  CoreState* previous;
};

struct ShapeModeGuard {
  ShapeModeGuard() { ++tl_shape_mode; }
  ~ShapeModeGuard() { --tl_shape_mode; }
};

void validate_shape(IntArrayRef sizes, const char* what) {
  if (static_cast<int64_t>(sizes.size()) > kMaxDims) {
    fail(std::string(what) + ": a NeuronCore custom-op tensor has at most 8 dimensions, got " +
         std::to_string(sizes.size()));
  }
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0) fail(std::string(what) + ": negative size in " + join_sizes(sizes));
    if (sizes[d] > kMaxDimSize) {
      fail(std::string(what) + ": dimension " + std::to_string(d) + " has size " + std::to_string(sizes[d]) +
           "; NeuronCore custom-op tensors allow at most 65535 elements per dimension");
    }
  }
}

void validate_dtype(ScalarType type, const char* what) {
  if (type == ScalarType::Undefined) {
    fail(std::string(what) + ": TensorOptions must specify a dtype (e.g. torch::kFloat)");
  }
  if (!is_supported_dtype(type)) {
    fail(std::string(what) + ": dtype " + dtype_name(type) + " is not supported by NeuronCore custom ops (" +
         kSupportedDtypes + ")");
  }
}

int64_t numel_of(IntArrayRef sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

Tensor allocate_with(const nemu_allocator_t* allocator, IntArrayRef sizes, ScalarType type, const char* what) {
  validate_shape(sizes, what);
  validate_dtype(type, what);
  if (tl_shape_mode > 0) return Tensor(nullptr, sizes, type);
  auto storage = std::make_shared<Storage>();
  storage->nbytes = static_cast<size_t>(numel_of(sizes)) * dtype_size(type);
  if (allocator != nullptr) {
    storage->data = allocator->alloc(sizes.data(), static_cast<int32_t>(sizes.size()), static_cast<int32_t>(type),
                                     &storage->owner);
    storage->allocator = allocator;
  } else {
    storage->data = std::malloc(storage->nbytes > 0 ? storage->nbytes : 1);
    storage->heap = true;
  }
  if (storage->data == nullptr && storage->nbytes > 0) fail(std::string(what) + ": out of memory");
  return Tensor(std::move(storage), sizes, type);
}

const nemu_allocator_t* current_allocator() {
  return (tl_core != nullptr && tl_core->call != nullptr) ? tl_core->call->allocator : nullptr;
}

Tensor allocate(IntArrayRef sizes, ScalarType type, const char* what) {
  return allocate_with(current_allocator(), sizes, type, what);
}

void coherence_violation(Storage& storage, const std::string& message) {
  switch (storage.policy) {
    case CoherencyEnforcer::COHERENT:
      fail("incoherent tensor access: " + message +
           " (policy COHERENT; see Tensor::set_accessor_coherence_policy)");
    case CoherencyEnforcer::INCOHERENT_VERBOSE:
      std::fprintf(stderr, "neuron_emu warning: incoherent tensor access: %s\n", message.c_str());
      return;
    case CoherencyEnforcer::INCOHERENT_QUIET:
      return;
  }
}

// ---------------------------------------------------------------- element access for the tensor library
double load(const void* data, ScalarType type, int64_t i) {
  switch (type) {
    case ScalarType::Float:
      return static_cast<const float*>(data)[i];
    case ScalarType::BFloat16:
      return static_cast<float>(static_cast<const BFloat16*>(data)[i]);
    case ScalarType::Half:
      return static_cast<float>(static_cast<const Half*>(data)[i]);
    case ScalarType::Int:
      return static_cast<const int32_t*>(data)[i];
    case ScalarType::Short:
      return static_cast<const int16_t*>(data)[i];
    case ScalarType::Char:
      return static_cast<const int8_t*>(data)[i];
    case ScalarType::Byte:
      return static_cast<const uint8_t*>(data)[i];
    default:
      fail(std::string("unsupported dtype ") + dtype_name(type));
  }
}

int64_t to_integer(double value) {
  if (std::isnan(value)) return 0;
  if (value >= 9.2e18) return INT64_MAX;
  if (value <= -9.2e18) return INT64_MIN;
  return static_cast<int64_t>(value);
}

void store(void* data, ScalarType type, int64_t i, double value) {
  switch (type) {
    case ScalarType::Float:
      static_cast<float*>(data)[i] = static_cast<float>(value);
      return;
    case ScalarType::BFloat16:
      static_cast<BFloat16*>(data)[i] = BFloat16(static_cast<float>(value));
      return;
    case ScalarType::Half:
      static_cast<Half*>(data)[i] = Half(static_cast<float>(value));
      return;
    case ScalarType::Int:
      static_cast<int32_t*>(data)[i] = static_cast<int32_t>(to_integer(value));
      return;
    case ScalarType::Short:
      static_cast<int16_t*>(data)[i] = static_cast<int16_t>(to_integer(value));
      return;
    case ScalarType::Char:
      static_cast<int8_t*>(data)[i] = static_cast<int8_t>(to_integer(value));
      return;
    case ScalarType::Byte:
      static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(to_integer(value));
      return;
    default:
      fail(std::string("unsupported dtype ") + dtype_name(type));
  }
}

bool has_data(const Tensor& t) { return t.storage() != nullptr; }

void require_defined(const Tensor& t, const char* op) {
  if (!t.defined()) fail(std::string(op) + ": undefined tensor");
}

void require_same_shape(const Tensor& a, const Tensor& b, const char* op) {
  require_defined(a, op);
  require_defined(b, op);
  if (a.sizes() != b.sizes()) {
    fail(std::string(op) + ": shapes " + join_sizes(a.sizes()) + " and " + join_sizes(b.sizes()) +
         " differ (NeuronCore custom-op tensor operations do not broadcast)");
  }
}

Tensor& require_out(Tensor& result, IntArrayRef sizes, const char* op) {
  require_defined(result, op);
  if (result.sizes() != sizes) {
    fail(std::string(op) + "_out: the result tensor has shape " + join_sizes(result.sizes()) +
         " but the operation produces " + join_sizes(sizes));
  }
  return result;
}

ScalarType promote(ScalarType a, ScalarType b) {
  if (is_floating_dtype(a)) return a;
  if (is_floating_dtype(b)) return b;
  return a;
}

ScalarType promote_scalar(ScalarType a, const Scalar& s) {
  if (is_floating_dtype(a)) return a;
  return s.isFloatingPoint() ? ScalarType::Float : a;
}

void require_integral(ScalarType type, const char* op) {
  if (is_floating_dtype(type)) {
    fail(std::string(op) + ": needs integral tensors (int32, int16, int8, uint8), got " + dtype_name(type));
  }
}

template <class F>
Tensor& map_unary(Tensor& out, const Tensor& self, F f) {
  if (!has_data(self) || !has_data(out)) return out;
  const int64_t n = self.numel();
  const void* src = self.storage()->data;
  void* dst = out.storage()->data;
  for (int64_t i = 0; i < n; ++i) store(dst, out.scalar_type(), i, f(load(src, self.scalar_type(), i)));
  detail::core_profile()->library_elements += static_cast<uint64_t>(n);
  return out;
}

template <class F>
Tensor& map_binary(Tensor& out, const Tensor& a, const Tensor& b, F f) {
  if (!has_data(a) || !has_data(b) || !has_data(out)) return out;
  const int64_t n = a.numel();
  const void* pa = a.storage()->data;
  const void* pb = b.storage()->data;
  void* dst = out.storage()->data;
  for (int64_t i = 0; i < n; ++i) {
    store(dst, out.scalar_type(), i, f(load(pa, a.scalar_type(), i), load(pb, b.scalar_type(), i)));
  }
  detail::core_profile()->library_elements += static_cast<uint64_t>(n);
  return out;
}

// ---------------------------------------------------------------- library registration state
struct OpRecord {
  std::string name;
  std::string kernel_name;
  std::string kernel_source;
  detail::FnInfo shape;
  detail::FnInfo kernel;
};

struct LibraryState {
  int blocks = 0;
  std::string ns;
  std::string origin;
  std::string error;
  std::string info;
  std::vector<OpRecord> ops;
  std::vector<nemu_op_t> c_ops;
  nemu_library_t c_library{};
};

LibraryState& library_state() {
  static LibraryState* state = new LibraryState();  // never destroyed: the dispatcher keeps pointers into it
  return *state;
}

std::string describe_signature(const std::string& signature) {
  std::string out = "(";
  for (size_t i = 0; i < signature.size(); ++i) {
    if (i) out += ", ";
    switch (signature[i]) {
      case 'T':
        out += "Tensor";
        break;
      case 'd':
        out += "double";
        break;
      case 'i':
        out += "int64_t";
        break;
      case 'S':
        out += "Scalar";
        break;
      default:
        out += "?";
    }
  }
  return out + ")";
}

bool is_identifier(const std::string& name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

std::string json_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
          out += buffer;
        } else {
          out += c;
        }
    }
  }
  return out;
}

void build_info(LibraryState& state) {
  std::ostringstream out;
  out << "{\"abi_version\": " << NEMU_ABI_VERSION << ", \"namespace\": \"" << json_escape(state.ns)
      << "\", \"library\": \"" << json_escape(detail::generated_library_file())
      << "\", \"multicore\": " << (detail::generated_multicore() ? "true" : "false") << ", \"origin\": \""
      << json_escape(state.origin) << "\", \"ops\": [";
  for (size_t i = 0; i < state.ops.size(); ++i) {
    const OpRecord& op = state.ops[i];
    if (i) out << ", ";
    out << "{\"name\": \"" << json_escape(op.name) << "\", \"kernel\": \"" << json_escape(op.kernel_name)
        << "\", \"kernel_source\": \"" << json_escape(op.kernel_source) << "\", \"signature\": \""
        << op.shape.signature << "\"}";
  }
  out << "], \"error\": \"" << json_escape(state.error) << "\"}";
  state.info = out.str();
}

std::vector<detail::ArgValue> make_args(const nemu_arg_t* args, int32_t nargs, bool shape_only, bool copy_tensors,
                                        const nemu_allocator_t* allocator) {
  std::vector<detail::ArgValue> values(static_cast<size_t>(nargs));
  for (int32_t k = 0; k < nargs; ++k) {
    const nemu_arg_t& arg = args[k];
    detail::ArgValue& value = values[static_cast<size_t>(k)];
    switch (arg.kind) {
      case NEMU_ARG_TENSOR: {
        value.kind = 'T';
        IntArrayRef sizes(arg.tensor.sizes, static_cast<size_t>(arg.tensor.ndim));
        const auto type = static_cast<ScalarType>(arg.tensor.dtype);
        if (shape_only || arg.tensor.data == nullptr) {
          value.tensor = Tensor(nullptr, sizes, type);
        } else if (copy_tensors) {
          value.tensor = allocate_with(allocator, sizes, type, "input copy");
          std::memcpy(value.tensor.storage()->data, arg.tensor.data, value.tensor.nbytes());
        } else {
          auto storage = std::make_shared<Storage>();
          storage->data = arg.tensor.data;
          storage->nbytes = static_cast<size_t>(numel_of(sizes)) * dtype_size(type);
          storage->borrowed = true;
          value.tensor = Tensor(std::move(storage), sizes, type);
        }
        break;
      }
      case NEMU_ARG_DOUBLE:
        value.kind = 'd';
        value.d = arg.d;
        break;
      case NEMU_ARG_INT:
        value.kind = 'i';
        value.i = arg.i;
        break;
      case NEMU_ARG_SCALAR_DOUBLE:
        value.kind = 'S';
        value.scalar = Scalar(arg.d);
        break;
      case NEMU_ARG_SCALAR_INT:
        value.kind = 'S';
        value.scalar = Scalar(arg.i);
        break;
      default:
        fail("unknown argument kind " + std::to_string(arg.kind));
    }
  }
  return values;
}

Tensor run_shape_function(const OpRecord& op, const nemu_arg_t* args, int32_t nargs) {
  if (nargs != op.shape.nargs) {
    fail("expected " + std::to_string(op.shape.nargs) + " arguments, got " + std::to_string(nargs));
  }
  std::vector<detail::ArgValue> values = make_args(args, nargs, true, false, nullptr);
  ShapeModeGuard guard;
  Tensor declared = op.shape.invoke(op.shape.fn, values);
  if (!declared.defined()) fail("shape function returned an undefined tensor");
  validate_shape(declared.sizes(), "shape function result");
  validate_dtype(declared.scalar_type(), "shape function result");
  return declared;
}

void to_c_tensor(IntArrayRef sizes, ScalarType type, void* data, nemu_tensor_t* out) {
  std::memset(out, 0, sizeof(*out));
  out->data = data;
  out->ndim = static_cast<int32_t>(sizes.size());
  out->dtype = static_cast<int32_t>(type);
  for (size_t d = 0; d < sizes.size(); ++d) out->sizes[d] = sizes[d];
}

void copy_error(const char* message, char* error, size_t error_len) {
  if (error == nullptr || error_len == 0) return;
  std::snprintf(error, error_len, "%s", message);
}

int library_shape(const void* op_ptr, const nemu_arg_t* args, int32_t nargs, nemu_tensor_t* result, char* error,
                  size_t error_len) {
  try {
    const OpRecord& op = *static_cast<const OpRecord*>(op_ptr);
    Tensor declared = run_shape_function(op, args, nargs);
    to_c_tensor(declared.sizes(), declared.scalar_type(), nullptr, result);
    return 0;
  } catch (const std::exception& e) {
    copy_error(e.what(), error, error_len);
  } catch (...) {
    copy_error("the shape function threw a non-standard exception", error, error_len);
  }
  return 1;
}

Tensor run_multicore(const OpRecord& op, CallState& call, const std::vector<detail::ArgValue>& kernel_args,
                     std::vector<CoreProfile>& profiles) {
  call.dst = allocate_with(call.allocator, IntArrayRef(call.out_sizes), call.out_dtype, "get_dst_tensor()");
  std::memset(call.dst.storage()->data, 0, call.dst.nbytes());
  call.dst_used = true;
  std::vector<std::string> errors(kGpsimdCores);
  auto run_core = [&](uint32_t id) {
    CoreState core;
    core.id = id;
    core.count = kGpsimdCores;
    core.multicore = true;
    core.call = &call;
    CoreGuard guard(&core);
    try {
      std::vector<detail::ArgValue> values = kernel_args;
      op.kernel.invoke(op.kernel.fn, values);  // the return value is ignored in multicore mode
    } catch (const std::exception& e) {
      errors[id] = e.what();
    } catch (...) {
      errors[id] = "the kernel threw a non-standard exception";
    }
    profiles[id] = core.profile;  // each core writes its own slot
  };
  std::vector<std::thread> threads;
  threads.reserve(kGpsimdCores - 1);
  for (uint32_t id = 1; id < kGpsimdCores; ++id) threads.emplace_back(run_core, id);
  run_core(0);
  for (std::thread& thread : threads) thread.join();
  for (uint32_t id = 0; id < kGpsimdCores; ++id) {
    if (!errors[id].empty()) fail("GPSIMD core " + std::to_string(id) + ": " + errors[id]);
  }
  return call.dst;
}

int library_call(const void* op_ptr, const nemu_arg_t* args, int32_t nargs, const nemu_allocator_t* allocator,
                 nemu_result_t* result, char* error, size_t error_len) {
  try {
    const OpRecord& op = *static_cast<const OpRecord*>(op_ptr);
    Tensor declared = run_shape_function(op, args, nargs);

    CallState call;
    call.allocator = allocator;
    call.out_sizes = declared.sizes().vec();
    call.out_dtype = declared.scalar_type();
    std::vector<detail::ArgValue> kernel_args = make_args(args, nargs, false, op.kernel.writes_inputs, allocator);

    Tensor out;
    const bool multicore = detail::generated_multicore();
    std::vector<CoreProfile> profiles;  // multicore: one per core (single core: `single`, no allocation)
    CoreProfile single;
    if (multicore) {
      profiles.resize(kGpsimdCores);
      out = run_multicore(op, call, kernel_args, profiles);
    } else {
      CoreState core;
      core.call = &call;
      CoreGuard guard(&core);
      Tensor returned = op.kernel.invoke(op.kernel.fn, kernel_args);
      out = call.dst_used ? call.dst : returned;
      single = core.profile;
    }

    if (!out.defined()) fail("the kernel " + op.kernel_name + " returned an undefined tensor");
    if (out.scalar_type() != declared.scalar_type()) {
      fail("the kernel " + op.kernel_name + " returned a " + dtype_name(out.scalar_type()) +
           " tensor but the shape function declares " + dtype_name(declared.scalar_type()));
    }
    if (out.numel() != declared.numel()) {
      fail("the kernel " + op.kernel_name + " returned " + std::to_string(out.numel()) + " elements " +
           join_sizes(out.sizes()) + " but the shape function declares " + std::to_string(declared.numel()) + " " +
           join_sizes(declared.sizes()));
    }
    const std::shared_ptr<Storage>& storage = out.storage();
    if (storage == nullptr) fail("the kernel " + op.kernel_name + " returned a tensor without data");
    if (storage->owner != nullptr && storage->allocator == allocator && !storage->borrowed &&
        storage->nbytes == out.nbytes()) {
      result->owner = allocator->retain(storage->owner);
      to_c_tensor(declared.sizes(), declared.scalar_type(), storage->data, &result->tensor);
    } else {
      void* owner = nullptr;
      const IntArrayRef sizes = declared.sizes();
      void* data = allocator->alloc(sizes.data(), static_cast<int32_t>(sizes.size()),
                                    static_cast<int32_t>(declared.scalar_type()), &owner);
      if (out.nbytes() > 0) std::memcpy(data, storage->data, out.nbytes());
      result->owner = owner;
      to_c_tensor(sizes, declared.scalar_type(), data, &result->tensor);
    }
    ProfileLog& log = profile_log();
    if (log.recording.load(std::memory_order_relaxed)) {
      std::lock_guard<std::mutex> lock(log.mutex);
      if (log.calls.size() < kMaxRecordedCalls) {
        if (!multicore) profiles.assign(1, single);
        log.calls.push_back(CallProfileRecord{&op, multicore, std::move(profiles)});
      } else {
        ++log.dropped;
      }
    }
    return 0;
  } catch (const std::exception& e) {
    copy_error(e.what(), error, error_len);
  } catch (...) {
    copy_error("the kernel threw a non-standard exception", error, error_len);
  }
  return 1;
}

}  // namespace

// ---------------------------------------------------------------- Storage and Tensor
Storage::~Storage() {
  if (owner != nullptr && allocator != nullptr) allocator->release(owner);
  if (heap) std::free(data);
}

Tensor::Tensor(std::shared_ptr<Storage> storage, IntArrayRef sizes, ScalarType dtype)
    : storage_(std::move(storage)), dtype_(dtype) {
  validate_shape(sizes, "tensor");
  ndim_ = static_cast<int64_t>(sizes.size());
  for (int64_t d = 0; d < ndim_; ++d) sizes_[d] = sizes[static_cast<size_t>(d)];
}

IntArrayRef Tensor::strides() const {
  int64_t strides[kMaxDims];
  int64_t stride = 1;
  for (int64_t d = ndim_ - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= sizes_[d];
  }
  return IntArrayRef(strides, static_cast<size_t>(ndim_));
}

int64_t Tensor::size(int64_t dim) const {
  const int64_t wrapped = dim < 0 ? dim + ndim_ : dim;
  if (wrapped < 0 || wrapped >= ndim_) {
    fail("size(" + std::to_string(dim) + ") on a " + std::to_string(ndim_) + "-dimensional tensor");
  }
  return sizes_[wrapped];
}

int64_t Tensor::stride(int64_t dim) const {
  const int64_t wrapped = dim < 0 ? dim + ndim_ : dim;
  if (wrapped < 0 || wrapped >= ndim_) {
    fail("stride(" + std::to_string(dim) + ") on a " + std::to_string(ndim_) + "-dimensional tensor");
  }
  return strides()[static_cast<size_t>(wrapped)];
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d = 0; d < ndim_; ++d) n *= sizes_[d];
  return n;
}

void* Tensor::data_ptr() const {
  ++detail::core_profile()->data_ptr_calls;
  if (!defined()) fail("data_ptr() on an undefined tensor");
  if (storage_ == nullptr) fail(kShapeOnlyMessage);
  return storage_->data;
}

CoherencyEnforcer::Policy Tensor::get_accessor_coherence_policy() const {
  return storage_ ? storage_->policy : CoherencyEnforcer::COHERENT;
}

void Tensor::set_accessor_coherence_policy(CoherencyEnforcer::Policy policy) const {
  if (storage_) storage_->policy = policy;
}

Tensor& Tensor::fill_(const Scalar& value) const {
  auto& self = const_cast<Tensor&>(*this);
  if (storage_ == nullptr) return self;
  const int64_t n = numel();
  for (int64_t i = 0; i < n; ++i) store(storage_->data, dtype_, i, value.toDouble());
  return self;
}

// ---------------------------------------------------------------- detail hooks
namespace detail {

void index_error(int64_t index, int64_t size, size_t dims_left) {
  fail("accessor index " + std::to_string(index) + " is out of range for a dimension of size " +
       std::to_string(size) + " (" + std::to_string(dims_left) + " dimension(s) from the innermost)");
}

std::string type_mismatch(const char* what, ScalarType element, ScalarType tensor) {
  return std::string(what) + "<" + dtype_name(element) + ">() on a " + dtype_name(tensor) + " tensor";
}

void* open_accessor(const Tensor& tensor, ScalarType element, int64_t rank, bool writable, const char* what) {
  if (!tensor.defined()) fail(std::string(what) + "() on an undefined tensor");
  if (tensor.storage() == nullptr) fail(kShapeOnlyMessage);
  if (rank != -2 && element != tensor.scalar_type()) fail(type_mismatch(what, element, tensor.scalar_type()));
  if (rank >= 0 && rank != tensor.dim()) {
    fail("accessor<" + std::string(dtype_name(element)) + ", " + std::to_string(rank) + ">() on a " +
         std::to_string(tensor.dim()) + "-dimensional tensor");
  }
  if (rank != -2 && tl_core != nullptr && tl_core->multicore) {
    fail(std::string(what) +
         "(): in multicore mode tensors may only be accessed through tcm_accessor() (standard and streaming "
         "accessors race across GPSIMD cores)");
  }
  Storage& storage = *tensor.storage();
  if (rank >= 0 && (storage.write_streams > 0 || (writable && storage.read_streams > 0))) {
    coherence_violation(storage, "accessor() on a tensor with an open " +
                                     std::string(storage.write_streams > 0 ? "write" : "read") + " stream accessor");
  }
  return storage.data;
}

void stream_opened(Storage& storage, bool write, const char* what) {
  if (write && storage.read_streams + storage.write_streams > 0) {
    coherence_violation(storage, std::string(what) + "() while another stream accessor is open on the same tensor");
  } else if (!write && storage.write_streams > 0) {
    coherence_violation(storage, std::string(what) + "() while a write stream accessor is open on the same tensor");
  }
  if (write) {
    ++storage.write_streams;
  } else {
    ++storage.read_streams;
  }
}

void stream_closed(Storage& storage, bool write) noexcept {
  if (write) {
    --storage.write_streams;
  } else {
    --storage.read_streams;
  }
}

void* tcm_lease(size_t nbytes) noexcept {
  if (tl_core == nullptr) return nullptr;
  try {
    return tl_core->pool.allocate(nbytes);
  } catch (...) {
    return nullptr;
  }
}

void tcm_return(void* ptr) noexcept {
  if (ptr != nullptr && tl_core != nullptr) tl_core->pool.release(ptr);
}

void check_tcm_buffer(const void* ptr, size_t nbytes, const char* what) {
  if (ptr == nullptr) {
    const size_t used = tl_core ? tl_core->pool.used() : 0;
    fail(std::string(what) + "(): the TCM buffer is null (tcm_malloc() returns nullptr when the " +
         std::to_string(kTcmPoolBytes) + "-byte TCM pool cannot fit the request; " + std::to_string(used) +
         " bytes are in use)");
  }
  if (tl_core == nullptr || !tl_core->pool.contains(ptr, nbytes)) {
    fail(std::string(what) + "(): the buffer is not inside a tcm_malloc() allocation of at least " +
         std::to_string(nbytes) + " bytes");
  }
}

void check_tcm_transfer(const Tensor& tensor, ScalarType element, size_t offset, size_t count, const char* what) {
  if (!tensor.defined()) fail(std::string(what) + "() on an undefined tensor");
  if (tensor.storage() == nullptr) fail(kShapeOnlyMessage);
  if (element != tensor.scalar_type()) fail(type_mismatch(what, element, tensor.scalar_type()));
  const auto numel = static_cast<size_t>(tensor.numel());
  if (offset > numel || count > numel - offset) {
    fail(std::string(what) + "(): elements [" + std::to_string(offset) + ", " + std::to_string(offset + count) +
         ") are outside the tensor's " + std::to_string(numel) + " elements");
  }
}

Tensor dst_tensor() {
  if (tl_core == nullptr || tl_core->call == nullptr) fail("get_dst_tensor() called outside a kernel");
  CallState& call = *tl_core->call;
  std::lock_guard<std::mutex> lock(call.dst_mutex);
  if (!call.dst.defined()) {
    call.dst = allocate_with(call.allocator, IntArrayRef(call.out_sizes), call.out_dtype, "get_dst_tensor()");
    std::memset(call.dst.storage()->data, 0, call.dst.nbytes());
  }
  call.dst_used = true;
  return call.dst;
}

CoreProfile* core_profile() noexcept { return tl_core != nullptr ? &tl_core->profile : &tl_scratch_profile; }

uint32_t cpu_id() { return tl_core != nullptr ? tl_core->id : 0; }
uint32_t cpu_count() { return tl_core != nullptr ? tl_core->count : 1; }

}  // namespace detail

// ---------------------------------------------------------------- TCM management
void* tcm_malloc(size_t nbytes) {
  if (tl_core == nullptr) {
    fail("tcm_malloc() called outside a kernel: TCM exists only on the GPSIMD cores that run kernels");
  }
  return tl_core->pool.allocate(nbytes);
}

void tcm_free(void* ptr) {
  if (ptr == nullptr) return;
  if (tl_core == nullptr || !tl_core->pool.release(ptr)) fail("tcm_free(): the pointer was not returned by tcm_malloc()");
}

// ---------------------------------------------------------------- factories
Tensor empty(IntArrayRef size, TensorOptions options) { return allocate(size, options.dtype(), "torch::empty"); }

Tensor zeros(IntArrayRef size, TensorOptions options) {
  Tensor out = allocate(size, options.dtype(), "torch::zeros");
  if (has_data(out) && out.nbytes() > 0) std::memset(out.storage()->data, 0, out.nbytes());
  return out;
}

Tensor ones(IntArrayRef size, TensorOptions options) {
  Tensor out = allocate(size, options.dtype(), "torch::ones");
  out.fill_(1);
  return out;
}

Tensor full(IntArrayRef size, const Scalar& fill_value, TensorOptions options) {
  Tensor out = allocate(size, options.dtype(), "torch::full");
  out.fill_(fill_value);
  return out;
}

Tensor eye(int64_t n, TensorOptions options) { return eye(n, n, options); }

Tensor eye(int64_t n, int64_t m, TensorOptions options) {
  Tensor out = allocate({n, m}, options.dtype(), "torch::eye");
  if (!has_data(out)) return out;
  if (out.nbytes() > 0) std::memset(out.storage()->data, 0, out.nbytes());
  for (int64_t i = 0; i < n && i < m; ++i) store(out.storage()->data, out.scalar_type(), i * m + i, 1.0);
  return out;
}

// ---------------------------------------------------------------- element-wise operations
namespace {
ScalarType float_result(ScalarType type) { return is_floating_dtype(type) ? type : ScalarType::Float; }
}  // namespace

#define NEMU_DEFINE_UNARY(name, result_type, expr)                                  \
  Tensor& name##_out(Tensor& result, const Tensor& self) {                          \
    require_defined(self, #name);                                                   \
    require_out(result, self.sizes(), #name);                                       \
    return map_unary(result, self, [](double x) { return (expr); });                \
  }                                                                                 \
  Tensor name(const Tensor& self) {                                                 \
    require_defined(self, #name);                                                   \
    Tensor out = allocate(self.sizes(), result_type(self.scalar_type()), "torch::" #name); \
    return map_unary(out, self, [](double x) { return (expr); });                   \
  }

namespace {
ScalarType same_type(ScalarType type) { return type; }
}  // namespace

NEMU_DEFINE_UNARY(abs, same_type, std::fabs(x))
NEMU_DEFINE_UNARY(ceil, same_type, std::ceil(x))
NEMU_DEFINE_UNARY(floor, same_type, std::floor(x))
NEMU_DEFINE_UNARY(sin, float_result, std::sin(x))
NEMU_DEFINE_UNARY(cos, float_result, std::cos(x))
NEMU_DEFINE_UNARY(tan, float_result, std::tan(x))
NEMU_DEFINE_UNARY(log, float_result, std::log(x))
NEMU_DEFINE_UNARY(log2, float_result, std::log2(x))
NEMU_DEFINE_UNARY(log10, float_result, std::log10(x))
NEMU_DEFINE_UNARY(exp, float_result, std::exp(x))
#undef NEMU_DEFINE_UNARY

Tensor& bitwise_not_out(Tensor& result, const Tensor& self) {
  require_defined(self, "bitwise_not");
  require_integral(self.scalar_type(), "bitwise_not");
  require_out(result, self.sizes(), "bitwise_not");
  return map_unary(result, self, [](double x) { return static_cast<double>(~to_integer(x)); });
}

Tensor bitwise_not(const Tensor& self) {
  require_defined(self, "bitwise_not");
  require_integral(self.scalar_type(), "bitwise_not");
  Tensor out = allocate(self.sizes(), self.scalar_type(), "torch::bitwise_not");
  return map_unary(out, self, [](double x) { return static_cast<double>(~to_integer(x)); });
}

namespace {

template <class F>
Tensor binary_tensor(const Tensor& a, const Tensor& b, ScalarType type, const char* op, F f) {
  require_same_shape(a, b, op);
  Tensor out = allocate(a.sizes(), type, op);
  return map_binary(out, a, b, f);
}

template <class F>
Tensor& binary_tensor_out(Tensor& result, const Tensor& a, const Tensor& b, const char* op, F f) {
  require_same_shape(a, b, op);
  require_out(result, a.sizes(), op);
  return map_binary(result, a, b, f);
}

template <class F>
Tensor binary_scalar(const Tensor& a, ScalarType type, const char* op, F f) {
  require_defined(a, op);
  Tensor out = allocate(a.sizes(), type, op);
  return map_unary(out, a, f);
}

template <class F>
Tensor& binary_scalar_out(Tensor& result, const Tensor& a, const char* op, F f) {
  require_defined(a, op);
  require_out(result, a.sizes(), op);
  return map_unary(result, a, f);
}

int64_t bitwise_operand(const Scalar& s, const char* op) {
  if (s.isFloatingPoint()) fail(std::string(op) + ": needs an integral scalar");
  return s.toLong();
}

}  // namespace

Tensor& pow_out(Tensor& result, const Tensor& self, const Scalar& exponent) {
  const double e = exponent.toDouble();
  return binary_scalar_out(result, self, "pow", [e](double x) { return std::pow(x, e); });
}
Tensor& pow_out(Tensor& result, const Scalar& self, const Tensor& exponent) {
  const double base = self.toDouble();
  return binary_scalar_out(result, exponent, "pow", [base](double x) { return std::pow(base, x); });
}
Tensor& pow_out(Tensor& result, const Tensor& self, const Tensor& exponent) {
  return binary_tensor_out(result, self, exponent, "pow", [](double x, double y) { return std::pow(x, y); });
}
Tensor pow(const Tensor& self, const Scalar& exponent) {
  const double e = exponent.toDouble();
  return binary_scalar(self, promote_scalar(self.scalar_type(), exponent), "torch::pow",
                       [e](double x) { return std::pow(x, e); });
}
Tensor pow(const Scalar& self, const Tensor& exponent) {
  const double base = self.toDouble();
  return binary_scalar(exponent, promote_scalar(exponent.scalar_type(), self), "torch::pow",
                       [base](double x) { return std::pow(base, x); });
}
Tensor pow(const Tensor& self, const Tensor& exponent) {
  return binary_tensor(self, exponent, promote(self.scalar_type(), exponent.scalar_type()), "torch::pow",
                       [](double x, double y) { return std::pow(x, y); });
}

Tensor& clamp_out(Tensor& result, const Tensor& self, const Scalar& minval, const Scalar& maxval) {
  const double lo = minval.toDouble();
  const double hi = maxval.toDouble();
  return binary_scalar_out(result, self, "clamp", [lo, hi](double x) { return std::min(std::max(x, lo), hi); });
}
Tensor clamp(const Tensor& self, const Scalar& minval, const Scalar& maxval) {
  const double lo = minval.toDouble();
  const double hi = maxval.toDouble();
  return binary_scalar(self, self.scalar_type(), "torch::clamp",
                       [lo, hi](double x) { return std::min(std::max(x, lo), hi); });
}

Tensor& add_out(Tensor& result, const Tensor& self, const Scalar& other, const Scalar& alpha) {
  const double v = other.toDouble() * alpha.toDouble();
  return binary_scalar_out(result, self, "add", [v](double x) { return x + v; });
}
Tensor& add_out(Tensor& result, const Tensor& self, const Tensor& other, const Scalar& alpha) {
  const double a = alpha.toDouble();
  return binary_tensor_out(result, self, other, "add", [a](double x, double y) { return x + a * y; });
}
Tensor add(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  const double v = other.toDouble() * alpha.toDouble();
  return binary_scalar(self, promote_scalar(self.scalar_type(), other), "torch::add",
                       [v](double x) { return x + v; });
}
Tensor add(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  const double a = alpha.toDouble();
  return binary_tensor(self, other, promote(self.scalar_type(), other.scalar_type()), "torch::add",
                       [a](double x, double y) { return x + a * y; });
}

Tensor& sub_out(Tensor& result, const Tensor& self, const Scalar& other, const Scalar& alpha) {
  const double v = other.toDouble() * alpha.toDouble();
  return binary_scalar_out(result, self, "sub", [v](double x) { return x - v; });
}
Tensor& sub_out(Tensor& result, const Tensor& self, const Tensor& other, const Scalar& alpha) {
  const double a = alpha.toDouble();
  return binary_tensor_out(result, self, other, "sub", [a](double x, double y) { return x - a * y; });
}
Tensor sub(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  const double v = other.toDouble() * alpha.toDouble();
  return binary_scalar(self, promote_scalar(self.scalar_type(), other), "torch::sub",
                       [v](double x) { return x - v; });
}
Tensor sub(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  const double a = alpha.toDouble();
  return binary_tensor(self, other, promote(self.scalar_type(), other.scalar_type()), "torch::sub",
                       [a](double x, double y) { return x - a * y; });
}

Tensor& mul_out(Tensor& result, const Tensor& self, const Scalar& other) {
  const double v = other.toDouble();
  return binary_scalar_out(result, self, "mul", [v](double x) { return x * v; });
}
Tensor& mul_out(Tensor& result, const Tensor& self, const Tensor& other) {
  return binary_tensor_out(result, self, other, "mul", [](double x, double y) { return x * y; });
}
Tensor mul(const Tensor& self, const Scalar& other) {
  const double v = other.toDouble();
  return binary_scalar(self, promote_scalar(self.scalar_type(), other), "torch::mul",
                       [v](double x) { return x * v; });
}
Tensor mul(const Tensor& self, const Tensor& other) {
  return binary_tensor(self, other, promote(self.scalar_type(), other.scalar_type()), "torch::mul",
                       [](double x, double y) { return x * y; });
}

Tensor& div_out(Tensor& result, const Tensor& self, const Scalar& other) {
  const double v = other.toDouble();
  return binary_scalar_out(result, self, "div", [v](double x) { return x / v; });
}
Tensor& div_out(Tensor& result, const Tensor& self, const Tensor& other) {
  return binary_tensor_out(result, self, other, "div", [](double x, double y) { return x / y; });
}
Tensor div(const Tensor& self, const Scalar& other) {
  const double v = other.toDouble();
  return binary_scalar(self, float_result(self.scalar_type()), "torch::div", [v](double x) { return x / v; });
}
Tensor div(const Tensor& self, const Tensor& other) {
  return binary_tensor(self, other, float_result(promote(self.scalar_type(), other.scalar_type())), "torch::div",
                       [](double x, double y) { return x / y; });
}

#define NEMU_DEFINE_BITWISE(name, symbol)                                                                   \
  Tensor& name##_out(Tensor& result, const Tensor& self, const Tensor& other) {                            \
    require_defined(self, #name);                                                                          \
    require_defined(other, #name);                                                                         \
    require_integral(self.scalar_type(), #name);                                                           \
    require_integral(other.scalar_type(), #name);                                                          \
    return binary_tensor_out(result, self, other, #name, [](double x, double y) {                          \
      return static_cast<double>(to_integer(x) symbol to_integer(y));                                      \
    });                                                                                                    \
  }                                                                                                        \
  Tensor& name##_out(Tensor& result, const Tensor& self, const Scalar& other) {                            \
    require_defined(self, #name);                                                                          \
    require_integral(self.scalar_type(), #name);                                                           \
    const int64_t v = bitwise_operand(other, #name);                                                       \
    return binary_scalar_out(result, self, #name,                                                          \
                             [v](double x) { return static_cast<double>(to_integer(x) symbol v); });       \
  }                                                                                                        \
  Tensor& name##_out(Tensor& result, const Scalar& self, const Tensor& other) {                            \
    return name##_out(result, other, self);                                                                \
  }                                                                                                        \
  Tensor name(const Tensor& self, const Tensor& other) {                                                   \
    require_defined(self, #name);                                                                          \
    require_defined(other, #name);                                                                         \
    require_integral(self.scalar_type(), #name);                                                           \
    require_integral(other.scalar_type(), #name);                                                          \
    return binary_tensor(self, other, self.scalar_type(), "torch::" #name, [](double x, double y) {        \
      return static_cast<double>(to_integer(x) symbol to_integer(y));                                      \
    });                                                                                                    \
  }                                                                                                        \
  Tensor name(const Tensor& self, const Scalar& other) {                                                   \
    require_defined(self, #name);                                                                          \
    require_integral(self.scalar_type(), #name);                                                           \
    const int64_t v = bitwise_operand(other, #name);                                                       \
    return binary_scalar(self, self.scalar_type(), "torch::" #name,                                        \
                         [v](double x) { return static_cast<double>(to_integer(x) symbol v); });           \
  }                                                                                                        \
  Tensor name(const Scalar& self, const Tensor& other) { return name(other, self); }

NEMU_DEFINE_BITWISE(bitwise_and, &)
NEMU_DEFINE_BITWISE(bitwise_or, |)
#undef NEMU_DEFINE_BITWISE

// ---------------------------------------------------------------- NEURON_LIBRARY registration
void LibraryBuilder::add(const char* op_name, const char* kernel_name, const detail::FnInfo& shape) {
  decls.push_back(Decl{op_name ? op_name : "", kernel_name ? kernel_name : "", shape});
}

LibraryRegistrar::LibraryRegistrar(const char* ns, void (*init)(LibraryBuilder&), const char* file,
                                   int line) noexcept {
  LibraryState& state = library_state();
  try {
    const std::string where = std::string(file) + ":" + std::to_string(line);
    ++state.blocks;
    if (state.blocks > 1) {
      fail("NEURON_LIBRARY(" + std::string(ns) + ") at " + where + ": this library already defines NEURON_LIBRARY(" +
           state.ns + "); a custom-op library has exactly one NEURON_LIBRARY block");
    }
    state.ns = ns;
    state.origin = where;
    if (state.ns == "builtin") fail("NEURON_LIBRARY(builtin): the library name 'builtin' is reserved by Neuron");
    LibraryBuilder builder;
    init(builder);
    if (builder.decls.empty()) fail("NEURON_LIBRARY(" + state.ns + ") registers no functions");
    if (builder.decls.size() > kMaxFunctionsPerLibrary) {
      fail("NEURON_LIBRARY(" + state.ns + ") registers " + std::to_string(builder.decls.size()) +
           " functions; a Neuron custom-op library may register at most 10");
    }
    size_t kernel_count = 0;
    const detail::KernelEntry* kernels = detail::generated_kernels(&kernel_count);
    state.ops.reserve(builder.decls.size());
    for (const LibraryBuilder::Decl& decl : builder.decls) {
      if (!is_identifier(decl.op_name)) fail("m.def(\"" + decl.op_name + "\"): op names must be C identifiers");
      for (const OpRecord& existing : state.ops) {
        if (existing.name == decl.op_name) fail("m.def(\"" + decl.op_name + "\") appears twice");
      }
      const detail::KernelEntry* kernel = nullptr;
      for (size_t k = 0; k < kernel_count; ++k) {
        if (decl.kernel_name == kernels[k].name) kernel = &kernels[k];
      }
      if (kernel == nullptr) {
        fail("m.def(\"" + decl.op_name + "\", ..., \"" + decl.kernel_name + "\"): the kernel function '" +
             decl.kernel_name + "' is not defined in compute_srcs");
      }
      if (std::strcmp(kernel->info.signature, decl.shape.signature) != 0) {
        fail("m.def(\"" + decl.op_name + "\"): the kernel " + decl.kernel_name +
             describe_signature(kernel->info.signature) + " and its shape function" +
             describe_signature(decl.shape.signature) + " take different arguments");
      }
      state.ops.push_back(OpRecord{decl.op_name, decl.kernel_name, kernel->source, decl.shape, kernel->info});
    }
    state.c_ops.reserve(state.ops.size());
    for (const OpRecord& op : state.ops) {
      state.c_ops.push_back(nemu_op_t{op.name.c_str(), op.shape.signature, op.shape.nargs, &op});
    }
    state.c_library.abi_version = NEMU_ABI_VERSION;
    state.c_library.ns = state.ns.c_str();
    state.c_library.origin = state.origin.c_str();
    state.c_library.multicore = detail::generated_multicore();
    state.c_library.nops = static_cast<int32_t>(state.c_ops.size());
    state.c_library.ops = state.c_ops.data();
    state.c_library.call = &library_call;
    state.c_library.shape = &library_shape;
    char error[1024] = {0};
    if (nemu_bridge_register(&state.c_library, error, sizeof(error)) != 0) fail(error);
  } catch (const std::exception& e) {
    if (state.error.empty()) state.error = e.what();
  } catch (...) {
    if (state.error.empty()) state.error = "NEURON_LIBRARY registration failed";
  }
  try {
    build_info(state);
  } catch (...) {
    state.info = "{}";
  }
}

}  // namespace nemu

NEMU_EXPORT const char* nemu_library_error() { return nemu::library_state().error.c_str(); }

NEMU_EXPORT const char* nemu_library_info() {
  nemu::LibraryState& state = nemu::library_state();
  if (state.info.empty()) {
    return "{\"error\": \"no NEURON_LIBRARY block was registered (is it in shape_srcs?)\"}";
  }
  return state.info.c_str();
}

// Call profiles: recording on (1) or off (0); while on, every successful kernel call is logged.
NEMU_EXPORT void nemu_profile_record(int on) {
  nemu::profile_log().recording.store(on != 0, std::memory_order_relaxed);
}

// The logged calls as JSON ({"version", "namespace", "recording", "dropped", "calls": [{"op", "multicore",
// "cores": [{counter: value}]}]}); with drain != 0 the log is emptied. The text stays valid until this thread's
// next call.
NEMU_EXPORT const char* nemu_profile_json(int drain) {
  static thread_local std::string text;
  nemu::ProfileLog& log = nemu::profile_log();
  std::vector<nemu::CallProfileRecord> calls;
  uint64_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(log.mutex);
    if (drain != 0) {
      calls.swap(log.calls);
      dropped = log.dropped;
      log.dropped = 0;
    } else {
      calls = log.calls;
      dropped = log.dropped;
    }
  }
  const nemu::LibraryState& state = nemu::library_state();
  std::ostringstream out;
  out << "{\"version\": 1, \"namespace\": \"" << nemu::json_escape(state.ns) << "\", \"recording\": "
      << (log.recording.load(std::memory_order_relaxed) ? "true" : "false") << ", \"dropped\": " << dropped
      << ", \"calls\": [";
  for (size_t i = 0; i < calls.size(); ++i) {
    const nemu::CallProfileRecord& call = calls[i];
    if (i) out << ", ";
    out << "{\"op\": \"" << nemu::json_escape(state.ns + "::" + call.op->name)
        << "\", \"multicore\": " << (call.multicore ? "true" : "false") << ", \"cores\": [";
    for (size_t c = 0; c < call.cores.size(); ++c) {
      const nemu::CoreProfile& core = call.cores[c];
      if (c) out << ", ";
      const char* separator = "{";
#define NEMU_WRITE_FIELD(name)                                      \
  out << separator << "\"" #name "\": " << core.name;             \
  separator = ", ";
      NEMU_PROFILE_FIELDS(NEMU_WRITE_FIELD)
#undef NEMU_WRITE_FIELD
      out << "}";
    }
    out << "]}";
  }
  out << "]}";
  text = out.str();
  return text.c_str();
}
