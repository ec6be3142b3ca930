/* The C boundary between the NeuronCore shim (user kernels, built against neuron_emu's own torch headers)
 * and the host bridge (built against the real libtorch). Only plain C types cross it. */
#ifndef NEMU_ABI_H
#define NEMU_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NEMU_ABI_VERSION 1
#define NEMU_MAX_DIMS 8
#define NEMU_MAX_ARGS 16

enum {
  NEMU_ARG_TENSOR = 0,
  NEMU_ARG_DOUBLE = 1,
  NEMU_ARG_INT = 2,
  NEMU_ARG_SCALAR_DOUBLE = 3,
  NEMU_ARG_SCALAR_INT = 4
};

/* A contiguous tensor: dtype uses c10::ScalarType numbering. data is NULL for shape-only tensors. */
typedef struct {
  void* data;
  int64_t sizes[NEMU_MAX_DIMS];
  int32_t ndim;
  int32_t dtype;
} nemu_tensor_t;

typedef struct {
  int32_t kind;
  nemu_tensor_t tensor;
  double d;
  int64_t i;
} nemu_arg_t;

/* Host allocations: the bridge hands out torch tensors so kernel outputs return to torch without a copy. */
typedef struct {
  void* (*alloc)(const int64_t* sizes, int32_t ndim, int32_t dtype, void** owner);
  void* (*retain)(void* owner);
  void (*release)(void* owner);
} nemu_allocator_t;

typedef struct {
  nemu_tensor_t tensor;
  void* owner; /* a retained allocation handle from nemu_allocator_t */
} nemu_result_t;

typedef int (*nemu_call_fn)(const void* op, const nemu_arg_t* args, int32_t nargs,
                            const nemu_allocator_t* allocator, nemu_result_t* result, char* error,
                            size_t error_len);
typedef int (*nemu_shape_fn)(const void* op, const nemu_arg_t* args, int32_t nargs, nemu_tensor_t* result,
                             char* error, size_t error_len);

typedef struct {
  const char* name;
  const char* signature; /* one char per argument: T tensor, d double, i int64_t, S scalar */
  int32_t nargs;
  const void* op;
} nemu_op_t;

typedef struct {
  int32_t abi_version;
  const char* ns;
  const char* origin;
  int32_t multicore;
  int32_t nops;
  const nemu_op_t* ops;
  nemu_call_fn call;
  nemu_shape_fn shape;
} nemu_library_t;

/* Defined by the bridge (bridge.cpp): registers the library's ops with the torch dispatcher. */
int nemu_bridge_register(const nemu_library_t* library, char* error, size_t error_len);

#ifdef __cplusplus
}
#endif

#endif /* NEMU_ABI_H */
