"""Stand-in for `torch_xla.distributed`, provided by neuron_emu (not Google's or AWS's package).

Only `parallel_loader` is emulated; other submodules (`xla_multiprocessing`, `xla_backend`, `spmd`, ...) fail
to import with one line.
"""
