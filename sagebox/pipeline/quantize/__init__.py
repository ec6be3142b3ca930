"""Stage 4, quantize. In: the FP32 graph and calibration batches (data/). Out: an INT8 candidate model directory,
not yet trusted: the gate (gate/) decides whether it is kept. `options` holds the choices (backend, mode, calibration)
and the defaults measured fastest, `calibration` featurizes inputs exactly as the server does, `int8` quantizes
(ONNX Runtime dynamic/static QDQ, PyTorch dynamic/static)."""
