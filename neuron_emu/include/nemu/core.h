// neuron_emu's port of the subset of the torch C++ API that Neuron custom-op kernels may use.
// Everything lives in namespace nemu; <torch/torch.h> re-exports it under the torch/c10/at names.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nemu/abi.h"

namespace nemu {

constexpr int64_t kMaxDims = NEMU_MAX_DIMS;
constexpr int64_t kMaxDimSize = 65535;

class Error : public std::exception {
 public:
  explicit Error(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

[[noreturn]] void fail(const std::string& message);

// c10::ScalarType numbering, so dtypes cross the C boundary unchanged.
enum class ScalarType : int8_t {
  Byte = 0,
  Char = 1,
  Short = 2,
  Int = 3,
  Long = 4,
  Half = 5,
  Float = 6,
  Double = 7,
  Bool = 11,
  BFloat16 = 15,
  Undefined = -1,
};

const char* dtype_name(ScalarType type);
bool is_supported_dtype(ScalarType type);
bool is_floating_dtype(ScalarType type);
size_t dtype_size(ScalarType type);

// ---------------------------------------------------------------- reduced-precision element types
struct BFloat16 {
  uint16_t x;
  BFloat16() = default;
  BFloat16(float value) : x(round_to_nearest_even(value)) {}  // NOLINT: implicit like c10
  operator float() const {
    uint32_t bits = static_cast<uint32_t>(x) << 16;
    float out;
    std::memcpy(&out, &bits, sizeof(out));
    return out;
  }
  static BFloat16 from_bits(uint16_t bits) {
    BFloat16 out;
    out.x = bits;
    return out;
  }

 private:
  static uint16_t round_to_nearest_even(float value) {
    if (std::isnan(value)) return 0x7FC0;
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    uint32_t rounding_bias = 0x7FFF + ((bits >> 16) & 1);
    return static_cast<uint16_t>((bits + rounding_bias) >> 16);
  }
};

struct Half {
  uint16_t x;
  Half() = default;
  Half(float value) : x(from_float(value)) {}  // NOLINT: implicit like c10
  operator float() const { return to_float(x); }
  static Half from_bits(uint16_t bits) {
    Half out;
    out.x = bits;
    return out;
  }

 private:
  static uint16_t from_float(float value) {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    const uint32_t sign = (bits >> 16) & 0x8000u;
    bits &= 0x7FFFFFFFu;
    if (bits >= 0x7F800000u) {  // inf or nan
      return static_cast<uint16_t>(sign | 0x7C00u | (bits > 0x7F800000u ? 0x0200u : 0u));
    }
    if (bits >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to >= 65520: inf
    if (bits < 0x38800000u) {  // below the smallest normal half: subnormal or zero
      float magnitude;
      std::memcpy(&magnitude, &bits, sizeof(magnitude));
      // 2^-24 is the subnormal step; nearbyint rounds half to even in the default mode.
      const float steps = std::nearbyint(magnitude * 16777216.0f);
      return static_cast<uint16_t>(sign | static_cast<uint32_t>(steps));
    }
    const uint32_t mantissa_odd = (bits >> 13) & 1u;
    bits += 0xC8000FFFu + mantissa_odd;  // rebias exponent (-112 << 23) and round to nearest even
    return static_cast<uint16_t>(sign | (bits >> 13));
  }
  static float to_float(uint16_t h) {
    const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1Fu;
    const uint32_t mantissa = h & 0x3FFu;
    uint32_t bits;
    if (exponent == 0) {
      const float magnitude = static_cast<float>(mantissa) / 16777216.0f;
      float out = (h & 0x8000u) ? -magnitude : magnitude;
      return out;
    }
    if (exponent == 0x1F) {
      bits = sign | 0x7F800000u | (mantissa << 13);
    } else {
      bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    }
    float out;
    std::memcpy(&out, &bits, sizeof(out));
    return out;
  }
};

template <class T>
struct ElementType {
  static constexpr bool supported = false;
};
template <>
struct ElementType<float> {
  static constexpr bool supported = true;
  static constexpr ScalarType dtype = ScalarType::Float;
};
template <>
struct ElementType<BFloat16> {
  static constexpr bool supported = true;
  static constexpr ScalarType dtype = ScalarType::BFloat16;
};
template <>
struct ElementType<Half> {
  static constexpr bool supported = true;
  static constexpr ScalarType dtype = ScalarType::Half;
};
template <>
struct ElementType<int32_t> {
  static constexpr bool supported = true;
  static constexpr ScalarType dtype = ScalarType::Int;
};
template <>
struct ElementType<int16_t> {
  static constexpr bool supported = true;
  static constexpr ScalarType dtype = ScalarType::Short;
};
template <>
struct ElementType<int8_t> {
  static constexpr bool supported = true;
  static constexpr ScalarType dtype = ScalarType::Char;
};
template <>
struct ElementType<uint8_t> {
  static constexpr bool supported = true;
  static constexpr ScalarType dtype = ScalarType::Byte;
};

#define NEMU_ELEMENT_TYPE_MESSAGE                                                                      \
  "NeuronCore custom ops access tensor elements as float, c10::BFloat16, c10::Half, int32_t, int16_t, " \
  "int8_t or uint8_t (no double or int64_t tensors)"

// ---------------------------------------------------------------- Scalar
class Scalar {
 public:
  Scalar() : Scalar(int64_t{0}) {}
  template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
  Scalar(T value) : integral_(true), d_(static_cast<double>(value)), i_(static_cast<int64_t>(value)) {}  // NOLINT
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T value) : integral_(false), d_(static_cast<double>(value)), i_(static_cast<int64_t>(value)) {}  // NOLINT
  Scalar(BFloat16 value) : Scalar(static_cast<float>(value)) {}  // NOLINT
  Scalar(Half value) : Scalar(static_cast<float>(value)) {}      // NOLINT

  bool isIntegral(bool /*includeBool*/ = false) const { return integral_; }
  bool isFloatingPoint() const { return !integral_; }
  double toDouble() const { return d_; }
  float toFloat() const { return static_cast<float>(d_); }
  int64_t toLong() const { return integral_ ? i_ : static_cast<int64_t>(d_); }
  int toInt() const { return static_cast<int>(toLong()); }
  template <class T>
  T to() const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(toLong());
    } else {
      return static_cast<T>(d_);
    }
  }

 private:
  bool integral_;
  double d_;
  int64_t i_;
};

// ---------------------------------------------------------------- sizes
// Owns its (at most 8, or it reports the excess) values, so braced lists of any integer type work.
class IntArrayRef {
 public:
  static constexpr size_t kCapacity = 16;

  IntArrayRef() = default;
  IntArrayRef(std::initializer_list<int64_t> values) { assign(values.begin(), values.size()); }
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, int64_t>, int> = 0>
  IntArrayRef(std::initializer_list<T> values) {
    assign(values.begin(), values.size());
  }
  template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
  IntArrayRef(const std::vector<T>& values) {  // NOLINT: implicit like c10::IntArrayRef
    assign(values.data(), values.size());
  }
  IntArrayRef(const int64_t* data, size_t length) { assign(data, length); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const int64_t* data() const { return values_; }
  const int64_t* begin() const { return values_; }
  const int64_t* end() const { return values_ + (size_ < kCapacity ? size_ : kCapacity); }
  int64_t operator[](size_t i) const { return values_[i]; }
  int64_t front() const { return values_[0]; }
  int64_t back() const { return values_[size_ - 1]; }
  std::vector<int64_t> vec() const { return std::vector<int64_t>(begin(), end()); }
  bool equals(const IntArrayRef& other) const {
    if (size_ != other.size_) return false;
    for (size_t i = 0; i < size_ && i < kCapacity; ++i) {
      if (values_[i] != other.values_[i]) return false;
    }
    return true;
  }
  bool operator==(const IntArrayRef& other) const { return equals(other); }
  bool operator!=(const IntArrayRef& other) const { return !equals(other); }

 private:
  template <class T>
  void assign(const T* data, size_t length) {
    size_ = length;
    for (size_t i = 0; i < length && i < kCapacity; ++i) values_[i] = static_cast<int64_t>(data[i]);
  }
  int64_t values_[kCapacity] = {};
  size_t size_ = 0;
};

// ---------------------------------------------------------------- dtypes and options
template <ScalarType S>
struct UnsupportedDtype {};

class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(ScalarType dtype) : dtype_(dtype) {}  // NOLINT: implicit like c10
  template <ScalarType S>
  TensorOptions(UnsupportedDtype<S>) {  // NOLINT
    static_assert(S != S,
                  "this dtype is not a NeuronCore custom-op dtype: use torch::kFloat, kBFloat16, kHalf, "
                  "kInt, kChar, kShort or kByte (no kDouble, kLong or kBool)");
  }
  TensorOptions dtype(ScalarType dtype) const {
    TensorOptions out = *this;
    out.dtype_ = dtype;
    return out;
  }
  template <ScalarType S>
  TensorOptions dtype(UnsupportedDtype<S> unsupported) const {
    return TensorOptions(unsupported);
  }
  ScalarType dtype() const { return dtype_; }
  bool has_dtype() const { return dtype_ != ScalarType::Undefined; }

 private:
  ScalarType dtype_ = ScalarType::Undefined;
};

inline TensorOptions dtype(ScalarType type) { return TensorOptions(type); }

struct CoherencyEnforcer {
  enum Policy {
    COHERENT,
    INCOHERENT_VERBOSE,
    INCOHERENT_QUIET,
  };
};

// ---------------------------------------------------------------- storage
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  void* owner = nullptr;  // host allocation handle (see nemu_allocator_t)
  const nemu_allocator_t* allocator = nullptr;
  bool heap = false;      // malloc'd outside of an op call
  bool borrowed = false;  // an input buffer the caller owns
  int read_streams = 0;
  int write_streams = 0;
  CoherencyEnforcer::Policy policy = CoherencyEnforcer::COHERENT;
  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();
};

// ---------------------------------------------------------------- access profile
// What one GPSIMD core's kernel did to memory during one call, for the cost model (neuron_emu.cost.kernels).
// Each emulated core owns one and only its own thread bumps it: plain integers, no atomics or locks. The
// runtime hands accessors a pointer into it when they are opened, so an element access costs one increment.
struct CoreProfile {
  uint64_t accessor_reads = 0;   // element accesses through read-only (const tensor) accessors
  uint64_t accessor_writes = 0;  // element accesses through writable accessors (a read through one counts here)
  uint64_t stream_reads = 0;     // elements read from a stream's TCM window
  uint64_t stream_writes = 0;    // elements written into a stream's TCM window
  uint64_t stream_uncached_reads = 0;   // stream reads with no TCM window (pool full): straight from HBM
  uint64_t stream_uncached_writes = 0;  // stream writes with no TCM window: straight to HBM
  uint64_t stream_transfers = 0;  // window refills and flushes (DMA between HBM and TCM)
  uint64_t stream_bytes = 0;
  uint64_t tcm_transfers = 0;  // tensor_to_tcm() and tcm_to_tensor() calls that moved data
  uint64_t tcm_bytes = 0;
  uint64_t tcm_elements_out = 0;  // elements tcm_to_tensor() wrote to tensors
  uint64_t library_elements = 0;  // elements the torch:: tensor library computed (exp, add, clamp...)
  uint64_t data_ptr_calls = 0;    // raw data_ptr() access: what the kernel does through it is not counted
};

class Tensor;
template <class T, size_t N, bool ReadOnly>
class TensorAccessor;
template <class T>
class TensorReadStreamAccessor;
template <class T>
class TensorWriteStreamAccessor;
template <bool ReadOnly>
class TensorTcmAccessor;

namespace detail {
struct AccessorShape {
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims];
  std::shared_ptr<Storage> storage;
};
[[noreturn]] void index_error(int64_t index, int64_t size, size_t dim_from_end);
inline int64_t checked_index(int64_t index, int64_t size, size_t dims_left) {
  if (index < 0 || index >= size) index_error(index, size, dims_left);
  return index;
}
// Runtime hooks (runtime.cpp).
CoreProfile* core_profile() noexcept;  // the calling core's profile (a per-thread scratch one outside kernels)
void* open_accessor(const Tensor& tensor, ScalarType element, int64_t rank, bool writable, const char* what);
void stream_opened(Storage& storage, bool write, const char* what);
void stream_closed(Storage& storage, bool write) noexcept;
void* tcm_lease(size_t nbytes) noexcept;
void tcm_return(void* ptr) noexcept;
void check_tcm_buffer(const void* ptr, size_t nbytes, const char* what);
void check_tcm_transfer(const Tensor& tensor, ScalarType element, size_t offset, size_t count, const char* what);
std::string type_mismatch(const char* what, ScalarType element, ScalarType tensor);
}  // namespace detail

// ---------------------------------------------------------------- Tensor
class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Storage> storage, IntArrayRef sizes, ScalarType dtype);

  bool defined() const { return dtype_ != ScalarType::Undefined; }
  int64_t dim() const { return ndim_; }
  int64_t ndimension() const { return ndim_; }
  IntArrayRef sizes() const { return IntArrayRef(sizes_, static_cast<size_t>(ndim_)); }
  IntArrayRef strides() const;
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t numel() const;
  ScalarType scalar_type() const { return dtype_; }
  ScalarType dtype() const { return dtype_; }
  size_t element_size() const { return dtype_size(dtype_); }
  size_t itemsize() const { return dtype_size(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const { return true; }

  void* data_ptr() const;
  template <class T>
  T* data_ptr() const {
    static_assert(ElementType<T>::supported, NEMU_ELEMENT_TYPE_MESSAGE);
    if (ElementType<T>::dtype != dtype_) fail(detail::type_mismatch("data_ptr", ElementType<T>::dtype, dtype_));
    return static_cast<T*>(data_ptr());
  }
  template <class T>
  const T* const_data_ptr() const {
    return data_ptr<T>();
  }
  template <class T>
  T* mutable_data_ptr() const {
    return data_ptr<T>();
  }

  template <class T, size_t N>
  TensorAccessor<T, N, true> accessor() const&;
  template <class T, size_t N>
  TensorAccessor<T, N, false> accessor() &;

  template <class T>
  TensorReadStreamAccessor<T> read_stream_accessor() const&;
  template <class T>
  TensorWriteStreamAccessor<T> write_stream_accessor() &;

  TensorTcmAccessor<true> tcm_accessor() const&;
  TensorTcmAccessor<false> tcm_accessor() &;

  CoherencyEnforcer::Policy get_accessor_coherence_policy() const;
  void set_accessor_coherence_policy(CoherencyEnforcer::Policy policy) const;

  Tensor& fill_(const Scalar& value) const;

  // For the runtime: the storage behind the tensor (null for shape-only tensors).
  const std::shared_ptr<Storage>& storage() const { return storage_; }

 private:
  template <class T, size_t N, bool ReadOnly>
  TensorAccessor<T, N, ReadOnly> make_accessor(bool writable) const;

  std::shared_ptr<Storage> storage_;
  int64_t sizes_[kMaxDims] = {};
  int64_t ndim_ = 0;
  ScalarType dtype_ = ScalarType::Undefined;
};

// ---------------------------------------------------------------- element accessors
template <class T, size_t N, bool ReadOnly>
class TensorAccessor {
 public:
  using pointer = std::conditional_t<ReadOnly, const T*, T*>;
  TensorAccessor(pointer data, const int64_t* sizes, const int64_t* strides, uint64_t* accesses,
                 std::shared_ptr<const detail::AccessorShape> keep = nullptr)
      : data_(data), sizes_(sizes), strides_(strides), accesses_(accesses), keep_(std::move(keep)) {}
  TensorAccessor<T, N - 1, ReadOnly> operator[](int64_t i) const {
    return TensorAccessor<T, N - 1, ReadOnly>(data_ + strides_[0] * detail::checked_index(i, sizes_[0], N),
                                              sizes_ + 1, strides_ + 1, accesses_);
  }
  int64_t size(int64_t dim) const { return sizes_[dim]; }
  int64_t stride(int64_t dim) const { return strides_[dim]; }
  IntArrayRef sizes() const { return IntArrayRef(sizes_, N); }
  pointer data() const { return data_; }

 private:
  pointer data_;
  const int64_t* sizes_;
  const int64_t* strides_;
  uint64_t* accesses_;
  std::shared_ptr<const detail::AccessorShape> keep_;
};

// The innermost dimension: every element access is one (counted) access to NeuronCore memory.
template <class T, bool ReadOnly>
class TensorAccessor<T, 1, ReadOnly> {
 public:
  using pointer = std::conditional_t<ReadOnly, const T*, T*>;
  using reference = std::conditional_t<ReadOnly, const T&, T&>;
  TensorAccessor(pointer data, const int64_t* sizes, const int64_t* strides, uint64_t* accesses,
                 std::shared_ptr<const detail::AccessorShape> keep = nullptr)
      : data_(data), sizes_(sizes), strides_(strides), accesses_(accesses), keep_(std::move(keep)) {}
  reference operator[](int64_t i) const {
    ++*accesses_;
    return data_[strides_[0] * detail::checked_index(i, sizes_[0], 1)];
  }
  int64_t size(int64_t dim) const { return sizes_[dim]; }
  int64_t stride(int64_t dim) const { return strides_[dim]; }
  IntArrayRef sizes() const { return IntArrayRef(sizes_, 1); }
  pointer data() const { return data_; }

 private:
  pointer data_;
  const int64_t* sizes_;
  const int64_t* strides_;
  uint64_t* accesses_;
  std::shared_ptr<const detail::AccessorShape> keep_;
};

template <class T, size_t N, bool ReadOnly>
TensorAccessor<T, N, ReadOnly> Tensor::make_accessor(bool writable) const {
  static_assert(ElementType<T>::supported, NEMU_ELEMENT_TYPE_MESSAGE);
  static_assert(N >= 1 && N <= static_cast<size_t>(kMaxDims),
                "accessor<T, N>: NeuronCore custom-op tensors have 1 to 8 dimensions");
  void* data = detail::open_accessor(*this, ElementType<T>::dtype, static_cast<int64_t>(N), writable, "accessor");
  auto shape = std::make_shared<detail::AccessorShape>();
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(N) - 1; d >= 0; --d) {
    shape->sizes[d] = sizes_[d];
    shape->strides[d] = stride;
    stride *= sizes_[d];
  }
  shape->storage = storage_;
  const detail::AccessorShape* raw = shape.get();
  CoreProfile* profile = detail::core_profile();
  uint64_t* accesses = ReadOnly ? &profile->accessor_reads : &profile->accessor_writes;
  return TensorAccessor<T, N, ReadOnly>(static_cast<T*>(data), raw->sizes, raw->strides, accesses, std::move(shape));
}

template <class T, size_t N>
TensorAccessor<T, N, true> Tensor::accessor() const& {
  return make_accessor<T, N, true>(false);
}

template <class T, size_t N>
TensorAccessor<T, N, false> Tensor::accessor() & {
  return make_accessor<T, N, false>(true);
}

// ---------------------------------------------------------------- streaming accessors
// Like the hardware: each open stream caches a 4 KB window in the TCM pool (when the pool has room).
constexpr size_t kStreamWindowBytes = 4096;

namespace detail {

// What a read stream and a write stream share: the opened tensor, the cursor, and the leased TCM window.
template <class T, bool Writable>
class StreamCursor {
 public:
  StreamCursor(const StreamCursor&) = delete;
  StreamCursor& operator=(const StreamCursor&) = delete;

 protected:
  using pointer = std::conditional_t<Writable, T*, const T*>;
  using TensorRef = std::conditional_t<Writable, Tensor&, const Tensor&>;
  static constexpr int64_t kWindowElements = static_cast<int64_t>(kStreamWindowBytes / sizeof(T));

  StreamCursor(TensorRef tensor, const char* what) {
    static_assert(ElementType<T>::supported, NEMU_ELEMENT_TYPE_MESSAGE);
    data_ = static_cast<pointer>(open_accessor(tensor, ElementType<T>::dtype, -1, Writable, what));
    storage_ = tensor.storage();
    numel_ = tensor.numel();
    stream_opened(*storage_, Writable, what);
    open_ = true;
    window_ = static_cast<T*>(tcm_lease(kStreamWindowBytes));
    profile_ = core_profile();
  }
  StreamCursor(StreamCursor&& other) noexcept { take(other); }
  ~StreamCursor() { release(); }

  // Moves `other`'s stream here; the caller has released this one's.
  void take(StreamCursor& other) noexcept {
    storage_ = std::move(other.storage_);
    data_ = other.data_;
    numel_ = other.numel_;
    position_ = other.position_;
    open_ = other.open_;
    window_ = other.window_;
    window_begin_ = other.window_begin_;
    window_length_ = other.window_length_;
    profile_ = other.profile_;
    other.open_ = false;
    other.window_ = nullptr;
  }
  // Fails unless one more element can be read or written; `call` names the method for the message.
  void check_next(const char* call) const {
    if (!open_) fail(std::string(call) + " on a closed stream");
    if (position_ >= numel_) {
      fail(std::string(call) + " past the end of the stream (" + std::to_string(numel_) + " elements)");
    }
  }
  void release() noexcept {
    if (!open_) return;
    open_ = false;
    tcm_return(window_);
    window_ = nullptr;
    stream_closed(*storage_, Writable);
  }

  std::shared_ptr<Storage> storage_;
  pointer data_ = nullptr;
  int64_t numel_ = 0;
  int64_t position_ = 0;
  bool open_ = false;
  T* window_ = nullptr;  // null when the TCM pool had no room: elements then go straight to the tensor
  int64_t window_begin_ = 0;
  int64_t window_length_ = 0;
  CoreProfile* profile_ = nullptr;
};

}  // namespace detail

template <class T>
class TensorReadStreamAccessor : detail::StreamCursor<T, false> {
  using Base = detail::StreamCursor<T, false>;

 public:
  explicit TensorReadStreamAccessor(const Tensor& tensor) : Base(tensor, "read_stream_accessor") {}
  TensorReadStreamAccessor(TensorReadStreamAccessor&& other) noexcept = default;
  TensorReadStreamAccessor& operator=(TensorReadStreamAccessor&& other) noexcept {
    if (this != &other) {
      this->release();
      this->take(other);
    }
    return *this;
  }

  T read() {
    this->check_next("TensorReadStreamAccessor::read()");
    if (this->window_ == nullptr) {
      ++this->profile_->stream_uncached_reads;
      return this->data_[this->position_++];
    }
    if (this->position_ < this->window_begin_ || this->position_ >= this->window_begin_ + this->window_length_) {
      this->window_begin_ = this->position_;
      this->window_length_ = std::min<int64_t>(Base::kWindowElements, this->numel_ - this->position_);
      const size_t bytes = static_cast<size_t>(this->window_length_) * sizeof(T);
      std::memcpy(this->window_, this->data_ + this->window_begin_, bytes);
      ++this->profile_->stream_transfers;
      this->profile_->stream_bytes += bytes;
    }
    ++this->profile_->stream_reads;
    return this->window_[this->position_++ - this->window_begin_];
  }
  int close() {
    this->release();
    return 0;
  }
};

template <class T>
class TensorWriteStreamAccessor : detail::StreamCursor<T, true> {
  using Base = detail::StreamCursor<T, true>;

 public:
  explicit TensorWriteStreamAccessor(Tensor& tensor) : Base(tensor, "write_stream_accessor") {}
  TensorWriteStreamAccessor(TensorWriteStreamAccessor&& other) noexcept = default;
  TensorWriteStreamAccessor& operator=(TensorWriteStreamAccessor&& other) noexcept {
    if (this != &other) {
      shutdown();
      this->take(other);
    }
    return *this;
  }
  ~TensorWriteStreamAccessor() { shutdown(); }

  void write(T value) {
    this->check_next("TensorWriteStreamAccessor::write()");
    if (this->window_ == nullptr) {
      ++this->profile_->stream_uncached_writes;
      this->data_[this->position_++] = value;
      return;
    }
    if (this->position_ - this->window_begin_ == Base::kWindowElements) flush();
    ++this->profile_->stream_writes;
    this->window_[this->position_ - this->window_begin_] = value;
    ++this->position_;
  }
  // Flushes cached writes to the tensor: until then other accessors do not see them.
  int close() {
    shutdown();
    return 0;
  }

 private:
  void flush() noexcept {
    if (this->window_ != nullptr && this->position_ > this->window_begin_) {
      const size_t bytes = static_cast<size_t>(this->position_ - this->window_begin_) * sizeof(T);
      std::memcpy(this->data_ + this->window_begin_, this->window_, bytes);
      ++this->profile_->stream_transfers;
      this->profile_->stream_bytes += bytes;
    }
    this->window_begin_ = this->position_;
  }
  void shutdown() noexcept {
    if (!this->open_) return;
    flush();
    this->release();
  }
};

template <class T>
TensorReadStreamAccessor<T> Tensor::read_stream_accessor() const& {
  return TensorReadStreamAccessor<T>(*this);
}

template <class T>
TensorWriteStreamAccessor<T> Tensor::write_stream_accessor() & {
  return TensorWriteStreamAccessor<T>(*this);
}

// ---------------------------------------------------------------- TCM
void* tcm_malloc(size_t nbytes);
void tcm_free(void* ptr);

template <bool ReadOnly>
class TensorTcmAccessor {
 public:
  explicit TensorTcmAccessor(const Tensor& tensor) : tensor_(tensor) {
    detail::open_accessor(tensor, tensor.scalar_type(), -2, !ReadOnly, "tcm_accessor");
    profile_ = detail::core_profile();
  }
  template <class T>
  void tensor_to_tcm(T* tcm_ptr, size_t tensor_offset, size_t num_elem) {
    static_assert(ElementType<T>::supported, NEMU_ELEMENT_TYPE_MESSAGE);
    detail::check_tcm_transfer(tensor_, ElementType<T>::dtype, tensor_offset, num_elem, "tensor_to_tcm");
    detail::check_tcm_buffer(tcm_ptr, num_elem * sizeof(T), "tensor_to_tcm");
    if (num_elem == 0) return;
    std::memcpy(tcm_ptr, static_cast<const T*>(tensor_.storage()->data) + tensor_offset, num_elem * sizeof(T));
    ++profile_->tcm_transfers;
    profile_->tcm_bytes += num_elem * sizeof(T);
  }
  template <class T>
  void tcm_to_tensor(T* tcm_ptr, size_t tensor_offset, size_t num_elem) {
    static_assert(!ReadOnly || sizeof(T) == 0,
                  "tcm_to_tensor() needs a writable TensorTcmAccessor: call tcm_accessor() on a non-const tensor");
    static_assert(ElementType<T>::supported, NEMU_ELEMENT_TYPE_MESSAGE);
    detail::check_tcm_transfer(tensor_, ElementType<T>::dtype, tensor_offset, num_elem, "tcm_to_tensor");
    detail::check_tcm_buffer(tcm_ptr, num_elem * sizeof(T), "tcm_to_tensor");
    if (num_elem == 0) return;
    std::memcpy(static_cast<T*>(tensor_.storage()->data) + tensor_offset, tcm_ptr, num_elem * sizeof(T));
    ++profile_->tcm_transfers;
    profile_->tcm_bytes += num_elem * sizeof(T);
    profile_->tcm_elements_out += num_elem;
  }

 private:
  Tensor tensor_;
  CoreProfile* profile_ = nullptr;
};

inline TensorTcmAccessor<true> Tensor::tcm_accessor() const& { return TensorTcmAccessor<true>(*this); }
inline TensorTcmAccessor<false> Tensor::tcm_accessor() & { return TensorTcmAccessor<false>(*this); }

// ---------------------------------------------------------------- kernel context
namespace detail {
Tensor dst_tensor();
uint32_t cpu_id();
uint32_t cpu_count();
}  // namespace detail

}  // namespace nemu
