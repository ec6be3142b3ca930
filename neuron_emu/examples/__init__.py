"""Runnable neuron_emu examples."""
