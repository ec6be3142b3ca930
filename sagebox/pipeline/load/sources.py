"""Where a build's model comes from: a local Hugging Face folder, a GGUF file (a decoder LLM in llama.cpp's one-file
format), or a Hub id (`org/name[@revision]`) downloaded into the Hugging Face cache by huggingface_hub itself, so the
cache, HF_HOME, HF_HUB_OFFLINE, HF_TOKEN and HF_ENDPOINT behave exactly as they do for transformers. Only the files a
build reads are fetched (an encoder's, and a causal LM's generation config and chat template: the task is only known
once config.json is read), and the commit a branch or tag pointed at is pinned, so a build records which weights it
used."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Literal

from sagebox.errors import SageboxError

DEFAULT_ENDPOINT = "https://huggingface.co"

# What an encoder build reads: config, tokenizer files, the model card (license) and sentence-transformers modules.
BASE_PATTERNS = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "sentencepiece.model",
    "tokenizer.model",
    "README.md",
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "*_Pooling/*",
    "*_Dense/*",
    "*_Normalize/*",
    # A causal LM's (text-generation): its EOS ids and sampling defaults, and its chat template when the tokenizer
    # keeps it in a file of its own rather than in tokenizer_config.json.
    "generation_config.json",
    "chat_template.jinja",
    "chat_template.json",
)
# Weights: safetensors whenever the repository has them; the pickled PyTorch format only when it has nothing else.
SAFETENSORS_PATTERNS = ("model.safetensors", "model.safetensors.index.json", "model-*-of-*.safetensors")
PYTORCH_PATTERNS = ("pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model-*-of-*.bin")
# Other frameworks' exports, even inside a sentence-transformers module folder matched above.
IGNORE_PATTERNS = ("*.onnx", "*.onnx_data", "*.h5", "*.msgpack", "*.ot", "*.tflite", "onnx/*", "openvino/*")

# A Hub repository name: letters, digits, '_', '-', '.'; starts and ends with a letter, digit or '_'; 1-96 chars.
_NAME = r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
_REPO_ID = re.compile(rf"(?:{_NAME}/)?{_NAME}")
# A branch, tag or commit after '@': git ref characters (with '/', as in refs/pr/1), never a path escape.
_REVISION = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_./+-]{0,254})")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_TRUE = frozenset({"1", "ON", "YES", "TRUE"})
GGUF_SUFFIX = ".gguf"


@dataclass(frozen=True)
class ResolvedModel:
    """A model ready to read from local disk, and where it came from (recorded in the build's manifest)."""

    path: Path  # a local folder holding the model files (for the Hub: the snapshot folder in the HF cache), or a GGUF
    name: str  # the Hub id (org/name), the folder's name or the GGUF file's
    origin: Literal["folder", "hub"]
    revision: str | None  # Hub: the resolved 40-hex commit hash (pinned); folder: None
    requested_revision: str | None  # what the user asked for after '@' (branch, tag or commit), None if nothing
    license: str  # from the model card's YAML front matter (README.md `license:`), else "unknown"


@dataclass(frozen=True)
class HubSettings:
    """huggingface_hub's environment variables, read when a model is resolved rather than when the library was
    imported (it reads most of them once, at import), so a notebook or a test that changes them is honoured."""

    endpoint: str
    cache_dir: Path
    token: str | None
    token_source: str  # where the token came from, for error messages ("" when there is none)
    offline: bool

    @classmethod
    def from_env(cls) -> HubSettings:
        token, source = _token()
        return cls(_endpoint(), _hub_cache(), token, source, _offline())


def is_gguf_file(path: Path) -> bool:
    """Whether `path` is an existing GGUF checkpoint file (`*.gguf`)."""
    return path.suffix.lower() == GGUF_SUFFIX and path.is_file()


def is_hub_id(text: str) -> bool:
    """Whether `text` reads as `name`, `namespace/name` or either followed by `@revision` (the Hub's id rules)."""
    return parse_hub_id(text) is not None


def resolve_model(spec: str | Path, *, say: Callable[[str], None] = lambda _: None) -> ResolvedModel:
    """An existing folder or GGUF file (a `Path` always means one of them), else a Hub id downloaded into the Hugging
    Face cache.

    Every failure is one SageboxError line that says what to fix."""
    if isinstance(spec, Path):
        return _from_folder(spec)
    folder = Path(spec).expanduser()
    if folder.is_dir() or is_gguf_file(folder):
        return _from_folder(folder)
    if folder.exists():
        raise SageboxError(f"model {spec} is a file: give a model folder, a GGUF file or a Hugging Face Hub id")
    parsed = parse_hub_id(spec)
    if parsed is None:
        raise SageboxError(
            f"model folder {spec} does not exist (and {spec} is not a Hugging Face Hub id: org/name[@revision])"
        )
    repo_id, revision = parsed
    return _from_hub(repo_id, revision, say)


def card_license(readme: Path) -> str:
    """The `license:` of a model card's YAML front matter ("other (name)" with `license_name:`), else "unknown"."""
    fields = _front_matter(readme)
    values = fields.get("license") or []
    if not values:
        return "unknown"
    names = fields.get("license_name") or []
    if values == ["other"] and names:
        return f"other ({names[0]})"
    return ", ".join(values)


# Local folders --------------------------------------------------------------------------------------------------


def _from_folder(path: Path) -> ResolvedModel:
    path = path.expanduser()
    if is_gguf_file(path):
        return ResolvedModel(
            path=path, name=path.name, origin="folder", revision=None, requested_revision=None, license="unknown"
        )
    if not path.is_dir():
        raise SageboxError(f"model folder {path} does not exist")
    return ResolvedModel(
        path=path,
        name=path.resolve().name,
        origin="folder",
        revision=None,
        requested_revision=None,
        license=card_license(path / "README.md"),
    )


# Hub ids --------------------------------------------------------------------------------------------------------


def parse_hub_id(text: str) -> tuple[str, str | None] | None:
    """(repo_id, revision or None) when `text` is a Hub id, else None."""
    repo_id, at, revision = text.partition("@")
    if not _REPO_ID.fullmatch(repo_id) or "--" in repo_id or ".." in repo_id or repo_id.endswith(".git"):
        return None
    if not at:
        return repo_id, None
    if not _valid_revision(revision):
        return None
    return repo_id, revision


def _valid_revision(revision: str) -> bool:
    """Git's ref rules, kept strict: the revision also names a file under the cache's refs/ folder."""
    return (
        _REVISION.fullmatch(revision) is not None
        and ".." not in revision
        and "//" not in revision
        and not revision.endswith(("/", ".", ".lock"))
    )


def _from_hub(repo_id: str, revision: str | None, say: Callable[[str], None]) -> ResolvedModel:
    label = f"{repo_id}@{revision}" if revision else repo_id
    try:
        import huggingface_hub  # noqa: F401  (the build extra installs it, through transformers)
    except ImportError:
        raise SageboxError(
            f"{label} is a Hugging Face Hub id: install huggingface_hub (pip install 'sagebox[build]')"
        ) from None
    settings = HubSettings.from_env()
    if settings.offline:
        say(f"using {label} from the Hugging Face cache {settings.cache_dir} (HF_HUB_OFFLINE is set)")
    else:
        say(f"downloading {label} from {settings.endpoint}")
    try:
        snapshot = _download(repo_id, revision, settings, label, say)
    except SageboxError:
        raise
    except Exception as exc:  # huggingface_hub, httpx2 and the file system each raise their own types
        raise SageboxError(one_line(explain(exc, repo_id, revision, label, settings))) from None
    commit = snapshot.name
    if not _COMMIT.fullmatch(commit):
        raise SageboxError(f"huggingface_hub returned {snapshot} for {label}, not a snapshot folder named by commit")
    _check_snapshot(snapshot, label, settings)
    return ResolvedModel(
        path=snapshot,
        name=repo_id,
        origin="hub",
        revision=commit,
        requested_revision=revision,
        license=card_license(snapshot / "README.md"),
    )


def _download(
    repo_id: str, revision: str | None, settings: HubSettings, label: str, say: Callable[[str], None]
) -> Path:
    """The snapshot folder (named by its commit): safetensors weights if the repository has them, else PyTorch's."""
    snapshot = _snapshot(repo_id, revision, (*BASE_PATTERNS, *SAFETENSORS_PATTERNS), settings)
    if settings.offline or _has_any(snapshot, (*SAFETENSORS_PATTERNS, *PYTORCH_PATTERNS)):
        return snapshot
    listed = _cached_listing(repo_id, snapshot.name, settings.cache_dir)
    if listed is not None and not any(_matches(name, PYTORCH_PATTERNS) for name in listed):
        return snapshot  # no weights Sagebox can read: _check_snapshot says so
    say(f"{label} has no safetensors weights: downloading pytorch_model.bin")
    # Pinned to the commit just resolved: the listing is cached, so only the weight files are requested.
    return _snapshot(repo_id, snapshot.name, PYTORCH_PATTERNS, settings)


def _snapshot(repo_id: str, revision: str | None, patterns: tuple[str, ...], settings: HubSettings) -> Path:
    from huggingface_hub import snapshot_download

    folder = snapshot_download(
        repo_id,
        revision=revision,
        cache_dir=settings.cache_dir,
        endpoint=settings.endpoint,
        token=settings.token,
        local_files_only=settings.offline,
        allow_patterns=list(patterns),
        ignore_patterns=list(IGNORE_PATTERNS),
    )
    return Path(folder)


def _cached_listing(repo_id: str, commit: str, cache_dir: Path) -> list[str] | None:
    """The repository's file list at `commit`, from the tree snapshot_download cached (no request), else None."""
    from huggingface_hub import get_cached_repo_tree
    from huggingface_hub.errors import CachedRepoTreeNotFoundError

    try:
        return [entry.path for entry in get_cached_repo_tree(repo_id, revision=commit, cache_dir=cache_dir)]
    except CachedRepoTreeNotFoundError:
        return None


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def _has_any(folder: Path, patterns: Iterable[str]) -> bool:
    """Whether a top-level file of `folder` matches (a snapshot with no matching file may not exist at all)."""
    return folder.is_dir() and any(_matches(p.name, patterns) for p in folder.iterdir() if p.is_file())


def _check_snapshot(snapshot: Path, label: str, settings: HubSettings) -> None:
    """A snapshot without config.json or weights is no model a build can read (or an interrupted download)."""
    partial = (
        f" (the cached snapshot {snapshot} may be partial: resolve it once without HF_HUB_OFFLINE)"
        if settings.offline
        else ""
    )
    if not (snapshot / "config.json").is_file():
        raise SageboxError(f"{label} (commit {snapshot.name}) has no config.json: not a transformers model{partial}")
    if not _has_any(snapshot, (*SAFETENSORS_PATTERNS, *PYTORCH_PATTERNS)):
        raise SageboxError(
            f"{label} (commit {snapshot.name}) has no PyTorch weights (model.safetensors or pytorch_model.bin; "
            f"ONNX, TensorFlow and Flax files are not used){partial}"
        )


def explain(exc: Exception, repo_id: str, revision: str | None, label: str, settings: HubSettings) -> str:
    """One line for a failed download: what went wrong, and which setting fixes it."""
    import httpx2
    from huggingface_hub.errors import (
        FileMetadataError,
        GatedRepoError,
        HfHubHTTPError,
        HFValidationError,
        IncompleteSnapshotError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    endpoint, cache = settings.endpoint, settings.cache_dir
    token = settings.token_source
    cause = exc.__cause__
    if isinstance(exc, IncompleteSnapshotError):
        return (
            f"the cached snapshot of {label} in {cache} is incomplete and the Hub at {endpoint} cannot be used to "
            f"finish it{' (HF_HUB_OFFLINE is set)' if settings.offline else ''}: resolve it again with network access"
        )
    if isinstance(exc, LocalEntryNotFoundError):
        if settings.offline or isinstance(cause, OfflineModeIsEnabled):
            return (
                f"{label} is not in the Hugging Face cache ({cache}) and HF_HUB_OFFLINE is set: unset HF_HUB_OFFLINE "
                "to download it, or point HF_HOME / HF_HUB_CACHE at a cache that holds it"
            )
        if isinstance(cause, HfHubHTTPError):
            return (
                f"the Hugging Face Hub at {endpoint} answered HTTP {cause.response.status_code} for {label} and it "
                f"is not in the cache ({cache}): try again later, or set HF_ENDPOINT to another Hub or mirror"
            )
        if isinstance(cause, FileMetadataError):
            return f"{endpoint} does not answer like a Hugging Face Hub (no X-Repo-Commit header): check HF_ENDPOINT"
        reason = f" ({type(cause).__name__}: {_first_line(cause)})" if cause is not None else ""
        return (
            f"cannot reach the Hugging Face Hub at {endpoint}{reason} and {label} is not in the cache ({cache}): "
            "check the network, set HF_ENDPOINT to a reachable Hub or mirror, or HF_HUB_OFFLINE=1 to use the cache"
        )
    if isinstance(exc, GatedRepoError):
        access = f"{token} has no access to it" if token else "downloading it needs a token"
        return (
            f"{repo_id} on {endpoint} is gated and {access}: accept its conditions on the Hub with your account, "
            "then set HF_TOKEN to a token of that account"
        )
    if isinstance(exc, RepositoryNotFoundError):
        readable = f" that {token} can read" if token else ""
        return (
            f"{repo_id} is neither a local folder nor a model repository on {endpoint}{readable}: check the id, "
            "or for a private or gated model set HF_TOKEN to a token with read access"
        )
    if isinstance(exc, RevisionNotFoundError):
        return f"{repo_id} on {endpoint} has no revision {revision!r}: give an existing branch, tag or commit after '@'"
    if isinstance(exc, HfHubHTTPError):
        status = exc.response.status_code
        if status in (401, 403):
            sent = f" {token}" if token else ""
            return (
                f"the Hugging Face Hub at {endpoint} refused{sent} for {label} (HTTP {status}: "
                f"{_server_message(exc)}): set HF_TOKEN to a valid token with read access to {repo_id}"
            )
        return f"the Hugging Face Hub at {endpoint} answered HTTP {status} for {label}: {_server_message(exc)}"
    if isinstance(exc, httpx2.TransportError | OfflineModeIsEnabled):
        return (
            f"cannot reach the Hugging Face Hub at {endpoint} while downloading {label} ({type(exc).__name__}: "
            f"{_first_line(exc)}): check the network, HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use the cache"
        )
    if isinstance(exc, HFValidationError):
        return f"{label} is not a valid Hugging Face Hub id: {_first_line(exc)}"
    if isinstance(exc, OSError):
        return f"cannot download {label} into the Hugging Face cache {cache}: {type(exc).__name__}: {_first_line(exc)}"
    return f"cannot resolve {label} from the Hugging Face Hub at {endpoint}: {type(exc).__name__}: {_first_line(exc)}"


def _server_message(exc: Exception) -> str:
    """The Hub's own reason (its X-Error-Message header) when it sent one, else the error's first line."""
    response = getattr(exc, "response", None)
    message = response.headers.get("X-Error-Message") if response is not None else None
    return message or _first_line(exc)


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def one_line(text: str) -> str:
    return " ".join(text.split())


# Environment, read at call time ---------------------------------------------------------------------------------


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def _path_env(value: str) -> Path:
    return Path(os.path.expandvars(value)).expanduser()


def _endpoint() -> str:
    return (_env("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _hf_home() -> Path:
    home = _env("HF_HOME")
    if home is not None:
        return _path_env(home)
    return _path_env(_env("XDG_CACHE_HOME") or "~/.cache") / "huggingface"


def _hub_cache() -> Path:
    cache = _env("HF_HUB_CACHE") or _env("HUGGINGFACE_HUB_CACHE")
    return _path_env(cache) if cache is not None else _hf_home() / "hub"


def _token() -> tuple[str | None, str]:
    """(token, where it came from): HF_TOKEN, else the token `hf auth login` saved under the current HF_HOME (or
    HF_TOKEN_PATH). (None, "") lets huggingface_hub look further (CI and notebook secrets)."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        token = _env(name)
        if token is not None:
            return token, f"the token in {name}"
    path_env = _env("HF_TOKEN_PATH")
    path = _path_env(path_env) if path_env is not None else _hf_home() / "token"
    try:
        saved = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None, ""
    return (saved, f"the token saved in {path}") if saved else (None, "")


def _offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) now, or huggingface_hub's own flag (set when it was imported)."""
    flag = _env("HF_HUB_OFFLINE") or _env("TRANSFORMERS_OFFLINE")
    if flag is not None and flag.upper() in _TRUE:
        return True
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


# Model card front matter ----------------------------------------------------------------------------------------


def _front_matter(readme: Path) -> dict[str, list[str]]:
    """Top-level keys of a README's YAML front matter -> their scalar or list values (enough for `license:`,
    without a YAML dependency)."""
    try:
        lines = readme.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return {}
    if not lines or lines[0].strip() != "---":
        return {}
    fields: dict[str, list[str]] = {}
    key: str | None = None
    for line in lines[1:]:
        if line.strip() in ("---", "..."):
            return fields
        item = re.match(r"^\s*-\s+(.*)$", line)
        if key is not None and item is not None:
            fields[key] += _scalars(item.group(1))
            continue
        entry = re.match(r"^([A-Za-z_][\w-]*)\s*:\s*(.*)$", line)
        if entry is None:
            key = None if not line.startswith((" ", "\t")) else key
            continue
        key = entry.group(1)
        fields[key] = _scalars(entry.group(2))
    return {}  # no closing '---': not front matter


def _scalars(value: str) -> list[str]:
    """A YAML scalar or flow list (`[a, b]`) -> its unquoted values, comments dropped."""
    value = re.sub(r"\s+#.*$", "", value).strip()
    parts = value[1:-1].split(",") if value.startswith("[") and value.endswith("]") else [value]
    cleaned = [part.strip().strip("'\"").strip() for part in parts]
    return [part for part in cleaned if part]
