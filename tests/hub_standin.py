"""A Hugging Face Hub stand-in on loopback, so tests drive huggingface_hub's real download code with no internet.

It answers exactly the calls huggingface_hub 2.4.0 makes for `snapshot_download`, `hf_hub_download` and
`HfApi.model_info` (read from the library and checked against this server's request log):

    GET  /api/models/{repo_id}[/revision/{revision}]   repo info: id, sha (the commit), siblings, private, gated
    GET  /api/models/{repo_id}/tree/{revision}[/{path}] the file listing snapshot_download filters and caches
    HEAD /{repo_id}/resolve/{revision}/{filename}        metadata: X-Repo-Commit, ETag, Content-Length
    GET  /{repo_id}/resolve/{revision}/{filename}        the bytes of a small (git) file
    GET  {cdn}/lfs/{sha256}/{filename}                   the bytes of a large (LFS) file, on a second port

As on the real Hub, a revision is quoted whole in the URL (`refs%2Fpr%2F1`), a large file (weights, sentencepiece
models) answers `/resolve` with a 302 to a CDN on another origin carrying `X-Linked-Etag` / `X-Linked-Size` (so the
library stops there, takes the sha256 as the cache's blob name and drops the Authorization header before fetching),
and failures carry the Hub's `X-Error-Code` header (RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo),
which is what huggingface_hub turns into its typed errors. No Xet headers are sent, so plain HTTP is used.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from functools import cached_property
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import cast
from urllib.parse import parse_qs, quote, unquote, urlsplit

# Suffixes the Hub's default .gitattributes stores in LFS: these files are served through the CDN redirect.
LFS_SUFFIXES = frozenset({".bin", ".safetensors", ".h5", ".msgpack", ".onnx", ".ot", ".model", ".pt", ".pth", ".ckpt"})
GITATTRIBUTES = "".join(f"*{suffix} filter=lfs diff=lfs merge=lfs -text\n" for suffix in sorted(LFS_SUFFIXES))
_SHA256 = re.compile(r"[0-9a-f]{64}")
_RANGE = re.compile(r"bytes=(\d+)-(\d*)")

Request = tuple[str, str, dict[str, str]]  # (method, unquoted path with query, headers with lower-case names)


def _git_blob_oid(data: bytes) -> str:
    """The git object id the Hub reports as a file's `oid` and a small file's ETag."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass(frozen=True)
class _File:
    path: str  # '/'-separated path inside the repository
    data: bytes
    lfs: bool

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @cached_property
    def pointer(self) -> bytes:
        """The LFS pointer git stores for a large file (its blob id is what the tree lists as `oid`)."""
        return f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\nsize {len(self.data)}\n".encode()

    @cached_property
    def oid(self) -> str:
        return _git_blob_oid(self.pointer if self.lfs else self.data)

    def tree_entry(self) -> dict[str, object]:
        entry: dict[str, object] = {"type": "file", "oid": self.oid, "size": len(self.data), "path": self.path}
        if self.lfs:
            entry["lfs"] = {"oid": self.sha256, "size": len(self.data), "pointerSize": len(self.pointer)}
        return entry


@dataclass
class _Repo:
    repo_id: str
    default: str
    private_token: str | None
    gated_token: str | None
    branches: dict[str, str] = field(default_factory=dict)  # branch -> commit
    commits: dict[str, dict[str, _File]] = field(default_factory=dict)  # commit -> path -> file

    def commit_of(self, revision: str) -> str | None:
        """A branch name or a full commit hash of this repository -> its commit, else None."""
        if revision in self.branches:
            return self.branches[revision]
        return revision if revision in self.commits else None


@dataclass(frozen=True)
class _Reply:
    status: int
    headers: dict[str, str]
    body: bytes = b""


def _error(status: int, message: str, code: str | None = None, extra: dict[str, str] | None = None) -> _Reply:
    """An error as the Hub sends it: the code and message in headers, the message again in a JSON body."""
    headers = {"X-Error-Message": message, "Content-Type": "application/json", **(extra or {})}
    if code is not None:
        headers["X-Error-Code"] = code
    return _Reply(status, headers, json.dumps({"error": message}).encode())


def _json(payload: object) -> _Reply:
    return _Reply(200, {"Content-Type": "application/json"}, json.dumps(payload).encode())


def _read_folder(folder: Path) -> dict[str, _File]:
    """Every file under `folder` (plus the .gitattributes a Hub repository always has), as repository files."""
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    files.setdefault(".gitattributes", GITATTRIBUTES.encode())
    return {path: _File(path, data, Path(path).suffix in LFS_SUFFIXES) for path, data in files.items()}


def _commit_hash(repo_id: str, branch: str, files: dict[str, _File]) -> str:
    """Deterministic 40-hex commit id: the same folders give the same commits in every run."""
    digest = hashlib.sha1(f"{repo_id}\0{branch}\0".encode())
    for path in sorted(files):
        digest.update(f"{path}\0{files[path].sha256}\n".encode())
    return digest.hexdigest()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, hub: HubStandIn, cdn: bool) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.hub = hub
        self.cdn = cdn


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.0 (one request per connection), so stopping the server leaves no keep-alive thread behind."""

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def log_message(self, format: str, *args: object) -> None:  # the request log replaces stderr noise
        pass

    def _answer(self, head: bool) -> None:
        server = cast(_Server, self.server)
        headers = {name.lower(): value for name, value in self.headers.items()}
        server.hub._record((self.command, unquote(self.path), headers))
        reply = server.hub._route(self.command, self.path, headers, cdn=server.cdn)
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if "Content-Length" not in reply.headers:
            self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        if not head:
            self.wfile.write(reply.body)


class HubStandIn:
    """Serves model repositories from local folders under the Hub's URL layout, on 127.0.0.1 (a context manager).

    `url` is the endpoint to put in HF_ENDPOINT; `requests` lists every (method, path, headers) both ports saw.
    """

    def __init__(self) -> None:
        self._repos: dict[str, _Repo] = {}
        self._requests: list[Request] = []
        self._lock = threading.Lock()
        self._servers: list[_Server] = []
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> HubStandIn:
        self._servers = [_Server(self, cdn=False), _Server(self, cdn=True)]
        self._threads = [
            threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True) for s in self._servers
        ]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join()

    @property
    def url(self) -> str:
        """The Hub endpoint, e.g. http://127.0.0.1:40123 (valid once the context is entered)."""
        return self._origin(self._servers[0])

    @property
    def requests(self) -> list[Request]:
        with self._lock:
            return list(self._requests)

    def add_repo(
        self,
        repo_id: str,
        revisions: dict[str, Path],
        *,
        private_token: str | None = None,
        gated_token: str | None = None,
        default: str = "main",
    ) -> dict[str, str]:
        """Publish a repository: branch name -> folder of its files. Returns branch name -> commit hash.

        `private_token`: the repository is private, visible only with `Authorization: Bearer <token>`.
        `gated_token`: its listing is public but its files need that token (the Hub's gated repositories).
        """
        if default not in revisions:
            raise ValueError(f"default branch {default!r} is not among {sorted(revisions)}")
        repo = _Repo(repo_id, default, private_token, gated_token)
        for branch, folder in revisions.items():
            files = _read_folder(folder)
            commit = _commit_hash(repo_id, branch, files)
            repo.branches[branch] = commit
            repo.commits[commit] = files
        self._repos[repo_id] = repo
        return dict(repo.branches)

    def _record(self, request: Request) -> None:
        with self._lock:
            self._requests.append(request)

    @staticmethod
    def _origin(server: _Server) -> str:
        host, port = server.server_address[:2]
        return f"http://{host!s}:{port}"

    # Routing ---------------------------------------------------------------------------------------------------

    def _route(self, method: str, raw_path: str, headers: dict[str, str], *, cdn: bool) -> _Reply:
        parts = urlsplit(raw_path)
        segments = parts.path.strip("/").split("/")  # still quoted: a quoted revision keeps its '/' inside
        if cdn:
            return self._cdn(segments)
        if segments[:2] == ["api", "models"]:
            return self._api(segments[2:], parse_qs(parts.query), headers)
        return self._resolve(segments, headers)

    def _split_repo(self, segments: list[str], keywords: tuple[str, ...]) -> tuple[str, list[str]]:
        """(repo_id, rest): a known 'ns/name' first, else the 1- or 2-segment id that precedes a keyword."""
        for width in (2, 1):
            candidate = "/".join(unquote(s) for s in segments[:width])
            if candidate in self._repos:
                return candidate, segments[width:]
        width = 1 if len(segments) > 1 and segments[1] in keywords else 2
        return "/".join(unquote(s) for s in segments[:width]), segments[width:]

    def _denied(self, repo: _Repo | None, repo_id: str, headers: dict[str, str], files: bool) -> _Reply | None:
        """The Hub's answer when the caller may not see the repository (or its files), else None."""
        auth = headers.get("authorization")
        token = auth[len("Bearer ") :] if auth and auth.startswith("Bearer ") else None
        if repo is None or (repo.private_token is not None and token != repo.private_token):
            if repo is not None and token is not None:
                return _error(401, "Invalid credentials in Authorization header")
            # Anonymous callers get 401 and signed-in ones 404, whether the repository is missing or private.
            return _error(401 if token is None else 404, "Repository not found", "RepoNotFound")
        if files and repo.gated_token is not None and token != repo.gated_token:
            message = f"Access to model {repo_id} is restricted. You must have access to it and be authenticated."
            return _error(401 if token is None else 403, message, "GatedRepo")
        return None

    def _revision(self, repo: _Repo, quoted: str | None) -> tuple[str, dict[str, _File]] | _Reply:
        revision = unquote(quoted) if quoted is not None else repo.default
        commit = repo.commit_of(revision)
        if commit is None:
            return _error(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return commit, repo.commits[commit]

    def _api(self, segments: list[str], query: dict[str, list[str]], headers: dict[str, str]) -> _Reply:
        repo_id, rest = self._split_repo(segments, ("revision", "tree"))
        repo = self._repos.get(repo_id)
        denied = self._denied(repo, repo_id, headers, files=False)
        if denied is not None or repo is None:
            return denied or _error(404, "Repository not found", "RepoNotFound")
        if rest and rest[0] == "tree" and len(rest) >= 2:
            return self._tree(repo, rest[1], [unquote(s) for s in rest[2:]], query)
        if not rest or (rest[0] == "revision" and len(rest) == 2):
            found = self._revision(repo, rest[1] if rest else None)
            if isinstance(found, _Reply):
                return found
            commit, files = found
            return _json(self._model_info(repo, commit, files))
        return _error(404, f"Sorry, we can't find the page you are looking for: {'/'.join(rest)}")

    @staticmethod
    def _model_info(repo: _Repo, commit: str, files: dict[str, _File]) -> dict[str, object]:
        return {
            "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "sha": commit,
            "private": repo.private_token is not None,
            "gated": "manual" if repo.gated_token is not None else False,
            "disabled": False,
            "tags": [],
            "siblings": [{"rfilename": path} for path in sorted(files)],
        }

    @staticmethod
    def _tree(repo: _Repo, quoted_revision: str, under: list[str], query: dict[str, list[str]]) -> _Reply:
        commit = repo.commit_of(unquote(quoted_revision))
        if commit is None:
            return _error(404, f"Invalid rev id: {unquote(quoted_revision)}", "RevisionNotFound")
        prefix = "/".join(under)
        recursive = query.get("recursive", ["false"])[0].lower() == "true"
        files = repo.commits[commit]
        entries: dict[str, dict[str, object]] = {}
        for path, file in sorted(files.items()):
            if prefix and not path.startswith(prefix + "/"):
                continue
            relative = path[len(prefix) + 1 :] if prefix else path
            parts = relative.split("/")
            # Every folder on the way is listed too, as the Hub's recursive listing does.
            for depth in range(1, len(parts) if recursive else min(2, len(parts))):
                folder = "/".join(([prefix] if prefix else []) + parts[:depth])
                oid = hashlib.sha1(f"tree {folder}".encode()).hexdigest()
                entries.setdefault(folder, {"type": "directory", "oid": oid, "size": 0, "path": folder})
            if recursive or len(parts) == 1:
                entries[path] = file.tree_entry()
        if prefix and not entries:
            return _error(404, f"Entry not found: {prefix}", "EntryNotFound", {"X-Repo-Commit": commit})
        return _json(list(entries.values()))

    def _resolve(self, segments: list[str], headers: dict[str, str]) -> _Reply:
        repo_id, rest = self._split_repo(segments, ("resolve",))
        if len(rest) < 3 or rest[0] != "resolve":
            return _error(404, "Sorry, we can't find the page you are looking for.")
        repo = self._repos.get(repo_id)
        denied = self._denied(repo, repo_id, headers, files=True)
        if denied is not None or repo is None:
            return denied or _error(404, "Repository not found", "RepoNotFound")
        found = self._revision(repo, rest[1])
        if isinstance(found, _Reply):
            return found
        commit, files = found
        filename = "/".join(unquote(s) for s in rest[2:])
        file = files.get(filename)
        if file is None:
            return _error(404, f"Entry not found: {filename}", "EntryNotFound", {"X-Repo-Commit": commit})
        if file.lfs:
            cdn = self._origin(self._servers[1])
            return _Reply(
                302,
                {
                    "X-Repo-Commit": commit,
                    "ETag": f'"{file.oid}"',
                    "X-Linked-Etag": f'"{file.sha256}"',
                    "X-Linked-Size": str(len(file.data)),
                    "Location": f"{cdn}/lfs/{file.sha256}/{quote(filename)}",
                },
            )
        return self._content(file.data, {"X-Repo-Commit": commit, "ETag": f'"{file.oid}"'}, headers)

    def _cdn(self, segments: list[str]) -> _Reply:
        """Large files by content hash, like the Hub's signed CDN URLs: no Authorization needed (nor sent)."""
        if len(segments) >= 2 and segments[0] == "lfs" and _SHA256.fullmatch(segments[1]):
            for repo in self._repos.values():
                for files in repo.commits.values():
                    for file in files.values():
                        if file.lfs and file.sha256 == segments[1]:
                            return self._content(file.data, {"ETag": f'"{file.sha256}"'}, {})
        return _Reply(404, {"Content-Type": "text/plain"}, b"NoSuchKey")

    @staticmethod
    def _content(data: bytes, headers: dict[str, str], request: dict[str, str]) -> _Reply:
        """A file's bytes, honouring the `Range: bytes=N-` header huggingface_hub sends to resume a download."""
        base = {**headers, "Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
        match = _RANGE.fullmatch(request.get("range", ""))
        if match is None:
            return _Reply(200, {**base, "Content-Length": str(len(data))}, data)
        start = int(match.group(1))
        end = min(int(match.group(2)) if match.group(2) else len(data) - 1, len(data) - 1)
        if start >= len(data):
            return _Reply(416, {"Content-Range": f"bytes */{len(data)}"})
        part = data[start : end + 1]
        return _Reply(206, {**base, "Content-Range": f"bytes {start}-{end}/{len(data)}"}, part)
