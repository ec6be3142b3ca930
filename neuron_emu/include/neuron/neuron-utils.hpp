// neuron_emu: GPSIMD core queries. With multicore=True every one of the 8 emulated cores runs the kernel.
#pragma once

#include <cstdint>

#include <torch/torch.h>

inline uint32_t get_cpu_id() { return nemu::detail::cpu_id(); }
inline uint32_t get_cpu_count() { return nemu::detail::cpu_count(); }
