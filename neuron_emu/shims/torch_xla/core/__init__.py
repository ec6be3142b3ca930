"""Stand-in for `torch_xla.core`, provided by neuron_emu (not Google's or AWS's package): holds `xla_model`."""
