"""Stage 2, data. In: the files a user brings for calibration and for the accuracy gate (SQuAD v1.1 JSON, JSON Lines
or CSV of labelled texts, entity annotations, query/passage pairs, plain texts). Out: checked, typed examples
(`squad`, `task_data`, `spans`) and, when the user gives none, Sagebox's built-in calibration data and held-out text
(`builtin`)."""
