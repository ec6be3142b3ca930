"""The Neuron custom-op MLP tutorial's scripts, in torch-neuronx style, run unchanged with `python -m neuron_emu run`.

`build.py` builds librelu.so with `torch_neuronx.xla_impl.custom_op.load`, `my_ops.py` wraps its ops in an
autograd Function, `model.py` is the MLP and `train.py` trains it on `device = 'xla'` with `xm.mark_step()`
and `xm.save`. Only `digits.py` (the data, plain torch and scikit-learn) is importable outside the runner.
"""
