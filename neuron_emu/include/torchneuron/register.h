// neuron_emu: NEURON_LIBRARY, the registration macro of Neuron custom-op shape sources.
//   NEURON_LIBRARY(my_ops, m) { m.def("op_name", &op_shape_fn, "op_kernel_fn"); }
#pragma once

#include <torch/torch.h>

#include "nemu/signature.h"

#define NEURON_LIBRARY(ns, m)                                                                              \
  static void nemu_library_init_##ns(::nemu::LibraryBuilder&);                                            \
  static const ::nemu::LibraryRegistrar nemu_library_registrar_##ns(#ns, &nemu_library_init_##ns, __FILE__, \
                                                                    __LINE__);                             \
  static void nemu_library_init_##ns(::nemu::LibraryBuilder& m)
