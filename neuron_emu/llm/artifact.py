"""The saved form of a compiled decoder: a self-describing directory a serving process loads with one call.

decoder.json            format, the Hugging Face config, what it was compiled for (tp_degree, batch_size,
                        max_length, buckets, auto-cast and compiler arguments, KV-cache dtype and shape per rank),
                        the graphs by name, and every file's size and SHA-256
graphs/<name>.pt        each traced graph (a neuron_emu.trace module: neuron_emu.describe / cost_plan read it), shared
                        by every rank and layer: `context<L>.<segment>`, `token.<segment>`, `token<L>.attention`
weights/replicated.pt   the tensors every rank holds (embeddings, norms, row-parallel biases, RoPE, lm_head)
weights/rank<r>.pt      rank r's shards (query/key/value and MLP rows, output and down projection columns)

The directory is written in a temporary sibling and renamed into place, so a reader sees the old directory or the
new one, never a half-written one; load checks every file against decoder.json before trusting it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from neuron_emu.errors import ArtifactError, NeuronEmuError
from neuron_emu.llm.config import read_config
from neuron_emu.llm.graphs import Graph, GraphSet
from neuron_emu.llm.runtime import EXECUTORS, NeuronDecoder, Settings
from neuron_emu.llm.shard import REPLICATED_LAYER_NAMES, RankWeights

FORMAT = "neuron_emu.llm/1"
MANIFEST = "decoder.json"
REPLICATED = "weights/replicated.pt"
Tensor = torch.Tensor


def rank_file(rank: int) -> str:
    return f"weights/rank{rank}.pt"


def graph_file(name: str) -> str:
    return f"graphs/{name}.pt"


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def _split(ranks: list[RankWeights]) -> tuple[dict[str, Tensor], list[dict[str, Tensor]]]:
    """(replicated tensors, each rank's own) under flat names `<name>` and `layers.<i>.<name>`."""
    replicated = dict(ranks[0].model)
    for index, layer in enumerate(ranks[0].layers):
        replicated.update({f"layers.{index}.{n}": t for n, t in layer.items() if n in REPLICATED_LAYER_NAMES})
    own = [
        {
            f"layers.{i}.{n}": t
            for i, layer in enumerate(rank.layers)
            for n, t in layer.items()
            if n not in REPLICATED_LAYER_NAMES
        }
        for rank in ranks
    ]
    return replicated, own


def _join(replicated: dict[str, Tensor], own: dict[str, Tensor], layers: int) -> RankWeights:
    model = {n: t for n, t in replicated.items() if not n.startswith("layers.")}
    per_layer: list[dict[str, Tensor]] = [{} for _ in range(layers)]
    for name, tensor in [*replicated.items(), *own.items()]:
        if name.startswith("layers."):
            _, index, rest = name.split(".", 2)
            per_layer[int(index)][rest] = tensor
    return RankWeights(model, tuple(per_layer))


def write_decoder(target: Path, decoder: NeuronDecoder) -> Path:
    """Stage the directory beside `target`, then rename it into place (replacing an earlier decoder directory)."""
    if decoder.closed:
        raise ArtifactError("neuron_emu.llm: the decoder is closed; compile it again to save it")
    if target.exists() and not (target / MANIFEST).is_file() and (not target.is_dir() or any(target.iterdir())):
        raise ArtifactError(f"{target} exists and is not a neuron_emu.llm decoder directory: not overwriting it")
    target.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    held: Path | None = None
    try:
        _write(stage, decoder)
        if target.exists():
            held = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            os.replace(target, held / "decoder")
            try:
                os.replace(stage, target)
            except OSError:
                os.replace(held / "decoder", target)  # put the earlier decoder back
                raise
        else:
            os.replace(stage, target)
    except (OSError, RuntimeError) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ArtifactError(f"cannot save the decoder to {target}: {reason}") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if held is not None:
            shutil.rmtree(held, ignore_errors=True)
    return target


def _write(stage: Path, decoder: NeuronDecoder) -> None:
    (stage / "graphs").mkdir()
    (stage / "weights").mkdir()
    graphs: dict[str, str] = {}
    for name, graph in decoder.graphs.named():
        graphs[name] = graph_file(name)
        torch.jit.save(graph, str(stage / graphs[name]))
    replicated, own = _split(decoder.ranks)
    torch.save(replicated, stage / REPLICATED)
    for rank, tensors in enumerate(own):
        torch.save(tensors, stage / rank_file(rank))
    files = [*graphs.values(), REPLICATED, *(rank_file(r) for r in range(len(own)))]
    manifest = {
        "format": FORMAT,
        "config": decoder.raw_config,
        "decoder": asdict(decoder.config),
        "settings": asdict(decoder.settings),
        "lm_head": "replicated",
        "kv_cache": decoder.describe()["kv_cache"],
        "graphs": graphs,
        "files": {name: {"bytes": (stage / name).stat().st_size, "sha256": _digest(stage / name)} for name in files},
    }
    try:
        text = json.dumps(manifest, indent=2, sort_keys=True, default=str)
    except (TypeError, ValueError) as exc:
        raise ArtifactError(f"the decoder's config cannot be written as JSON: {exc}") from None
    (stage / MANIFEST).write_text(text + "\n")


def _manifest(directory: Path) -> dict[str, Any]:
    path = directory / MANIFEST
    if not path.is_file():
        raise ArtifactError(f"{directory} has no {MANIFEST}: not a saved neuron_emu.llm decoder")
    try:
        raw = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"{path} is not readable JSON: {exc}") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        found = raw.get("format") if isinstance(raw, dict) else None
        raise ArtifactError(f"{path} has format {found!r}; this neuron_emu reads {FORMAT!r}")
    for key, kind in (("config", dict), ("settings", dict), ("graphs", dict), ("files", dict)):
        if not isinstance(raw.get(key), kind):
            raise ArtifactError(f"{path} has no valid {key!r}")
    return raw


def _verify(directory: Path, files: dict[str, Any]) -> None:
    for name, expected in sorted(files.items()):
        path = directory / name
        if not path.is_file():
            raise ArtifactError(f"{directory} lacks {name} named by its {MANIFEST}")
        if not isinstance(expected, dict) or path.stat().st_size != expected.get("bytes"):
            raise ArtifactError(f"{path} has {path.stat().st_size} bytes, not the {expected.get('bytes')} recorded")
        if _digest(path) != expected.get("sha256"):
            raise ArtifactError(f"{path} does not match the SHA-256 its {MANIFEST} records (corrupted?)")


def _load_tensors(path: Path) -> dict[str, Tensor]:
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several kinds for a damaged archive
        raise ArtifactError(f"cannot read {path}: {type(exc).__name__}") from None
    if not isinstance(loaded, dict) or not all(isinstance(t, Tensor) for t in loaded.values()):
        raise ArtifactError(f"{path} does not hold a dict of tensors")
    return loaded


@contextlib.contextmanager
def _refusing(directory: Path) -> Iterator[None]:
    """What a consistent-looking manifest still gets wrong, as one-line ArtifactErrors."""
    try:
        yield
    except ArtifactError:
        raise
    except NeuronEmuError as exc:
        raise ArtifactError(f"{directory / MANIFEST} describes a decoder this neuron_emu refuses: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise ArtifactError(
            f"{directory / MANIFEST} is incomplete or inconsistent: {type(exc).__name__}: {exc}"
        ) from None


def _settings(raw: dict[str, Any]) -> Settings:
    return Settings(**{**raw["settings"], "buckets": tuple(raw["settings"]["buckets"])})


def _graphs(directory: Path, raw: dict[str, Any], settings: Settings) -> GraphSet:
    from neuron_emu.runtime import load as load_graph

    named: dict[str, Graph] = {n: load_graph(directory / f) for n, f in raw["graphs"].items()}
    return GraphSet.from_named(named, settings.buckets)


def read_rank(directory: Path, rank: int) -> tuple[dict[str, Any], Settings, GraphSet, RankWeights]:
    """What the worker of rank `rank` loads: (the manifest, the settings, the graphs, its weights). The parent has
    checked the files against the manifest already."""
    raw = _manifest(directory)
    with _refusing(directory):
        settings = _settings(raw)
        replicated = _load_tensors(directory / REPLICATED)
        weights = _join(replicated, _load_tensors(directory / rank_file(rank)), int(raw["decoder"]["layers"]))
        return raw, settings, _graphs(directory, raw, settings), weights


def read_decoder(
    directory: Path, executor: str = "in_process", *, scratch: Path | None = None, **options: Any
) -> NeuronDecoder:
    """The decoder saved in `directory`, its ranks run by `executor`; `options` go to the worker processes
    (neuron_emu.llm.processes.DecoderWorkers), whose `scratch` directory is removed when they stop."""
    if executor not in EXECUTORS:
        raise ArtifactError(f"neuron_emu.llm: executor {executor!r} is not one of: {', '.join(EXECUTORS)}")
    raw = _manifest(directory)
    _verify(directory, raw["files"])
    with _refusing(directory):
        settings = _settings(raw)
        if executor == "processes":
            from neuron_emu.llm.processes import DecoderWorkers

            read_config(raw["config"])  # refused here, before any worker starts
            files = [directory / rank_file(r) for r in range(settings.tp_degree)]
            workers = DecoderWorkers(directory, files, scratch=scratch, **options)
            try:
                return NeuronDecoder(raw["config"], settings, None, [], workers=workers)
            except BaseException:
                workers.close()
                raise
        graphs = _graphs(directory, raw, settings)
        replicated = _load_tensors(directory / REPLICATED)
        layers = int(raw["decoder"]["layers"])
        ranks = [_join(replicated, _load_tensors(directory / rank_file(r)), layers) for r in range(settings.tp_degree)]
        return NeuronDecoder(raw["config"], settings, graphs, ranks)


def load(directory: str | os.PathLike[str], *, executor: str = "in_process", **options: Any) -> NeuronDecoder:
    """A saved decoder, ready to run (its KV cache allocated, every line empty); ArtifactError if it cannot be.

    `executor` "in_process" (the default) runs the ranks in this process; "processes" starts one worker process per
    rank (holding its weights and KV cache; all-reduces over gloo) and takes the options of
    neuron_emu.llm.processes.DecoderWorkers: `threads_per_worker`, `start_timeout_s`, `collective_timeout_s`,
    `step_timeout_s`."""
    if options and executor != "processes":
        raise ArtifactError(f"neuron_emu.llm: {', '.join(sorted(options))} apply to executor='processes' only")
    return read_decoder(Path(directory), executor, **options)
