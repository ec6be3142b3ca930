"""What a decoder LLM costs per token on NeuronCores, from its config.json alone (no weights): an ESTIMATE.

Per instance type (inf2, trn1) and tensor-parallel degree: whether the model fits a NeuronCore's HBM share, the time
to first token, the time per generated token, tokens/s at batch 1 and at the largest batch that fits, and $ per
million generated tokens when the caller passes prices (neuron_emu holds no prices). The model and its constants:

- memory per core = weights / tp (every matrix sharded; norms replicated) + the KV cache of batch x sequence tokens
  (2 x layers x KV heads per core x head_dim x dtype bytes per token; KV heads are replicated when tp exceeds them,
  one per core) + a fixed reserve per core for the runtime (`reserve_gib_per_core`);
- one decode step = max(HBM bytes read / (core bandwidth x `hbm_efficiency`), FLOPs / (core peak x
  `compute_efficiency`)) + 2 all-reduces per layer, each a ring over tp cores of 2 (tp - 1) hops of
  (`collective_hop_us` + message / tp / link bandwidth); the bytes read are every weight but the embedding rows,
  plus the cache of the context;
- prefill (time to first token) = the same for the whole prompt at once: its FLOPs, the weights read once, the
  all-reduces of prompt-sized messages;
- NxD Inference shards attention heads, KV heads and the MLP evenly: a degree that does not divide them is refused,
  unless `pad_heads` projects transformers-neuronx's padding (heads rounded up to a multiple of tp, zero weights
  that still take memory and time), always marked as padded.

The two efficiencies and the hop latency, the reserve and the published figures they come from are in
neuron_emu/data/llm_cost.json. The modules, each using only those before it: `constants` (those figures, the
dtypes and batches the model knows, CostError), `cores` (each instance type's NeuronCores), `sizing` (parameters,
weights, KV cache, each core's shard, what fits), `timing` (all-reduces, decode steps, prefill, a whole request),
`neuron` and `cpu` (a plan's rows on NeuronCores and on Sagebox's CPU engine), `plan` (the whole plan and its
text), `fit` (the constants fitted to published figures, and the rest checked).
"""
