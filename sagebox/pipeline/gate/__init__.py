"""Stage 5, gate. In: the FP32 and INT8 model directories and the gate's data (data/). Out: each task's verdict,
whether INT8 is kept, with the figures behind it. Scores are computed through the serving Predictor, what the
endpoint runs. Where the INT8 gate is decided: `task_gate` (the checks and their limits), `task_eval` (a judge per
task: its data and metric); `accuracy_gate` is QA's F1-drop check; `evaluate`, `squad_metric` and `task_metrics`
compute the metrics as the reference tools do; `perplexity` measures a text-generation model through the serving
engine."""
