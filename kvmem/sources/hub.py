"""Models by Hugging Face id: the local cache first, then the Hub, every request bounded.

Resolution (kvmem.catalog.get_model): a preset; else the local Hugging Face cache (HF_HUB_CACHE,
or HF_HOME/hub, as huggingface_hub lays it out: models--org--name/{refs,blobs,snapshots}), so a
model downloaded once works offline; else the Hub at HF_ENDPOINT (default https://huggingface.co)
with a token for gated or private repositories, unless HF_HUB_OFFLINE is set: HF_TOKEN, else the
token `hf auth login` stored (HF_TOKEN_PATH, else HF_HOME/token; huggingface_hub's constants.py and
utils/_auth.py get_token read it the same way), unless HF_HUB_DISABLE_IMPLICIT_TOKEN is set. The
environment is read at each call (huggingface_hub reads it once, at import).

What is fetched: ``config.json`` (written into the cache in huggingface_hub's layout); with
weights asked for, ``model.safetensors.index.json`` and each shard's header by HTTP range
requests (8 bytes + the JSON header), kept in HF_HOME/kvmem/safetensors-headers for offline use;
for a GGUF, its header by growing range requests parsed once as they arrive. Never the weights,
never code from the repository, never trust_remote_code: a config is parsed as JSON by
kvmem.configs, the same reader as an uploaded file.

Every request goes through kvmem/sources/http.py (timeouts, a deadline, byte budgets, verified
ranges); every file name from a repository resolves inside its snapshot (bounded.confined); a
failure to reach the Hub is remembered, so the same id fails at once the next time: for the
process, or in the app for the session that met it (keep_failures_in; forget_failures retries).
huggingface_hub is used only to read its cache.

Over 300 lines by design: the cache and the Hub are one resolution order (config, index, headers,
GGUF), each step's fallback beside it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from concurrent.futures import ThreadPoolExecutor, wait
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import quote as url_quote

from . import Checkpoint, DeadlineExceeded, SourceError
from .bounded import (
    MAX_GGUF_HEADER_BYTES,
    MAX_INDEX_BYTES,
    MAX_JSON_BYTES,
    Deadline,
    confined,
    file_kind,
    plain_name,
    quote,
    read_json_file,
    read_text,
)
from .http import Body, HTTPStatusError, Unreachable, deadline_s, get, open_body
from .safetensors import INDEX_FILE, MAX_HEADER_BYTES, SINGLE_FILE, checkpoint_from_headers, parse_header, shard_names

__all__ = ["Settings", "settings", "is_repo_id", "split_gguf_spec", "fetch_file", "model_from_hub",
           "checkpoint_for", "remote_gguf_header", "model_from_remote_gguf", "keep_failures_in", "forget_failures",
           "failed_ids"]

DEFAULT_ENDPOINT = "https://huggingface.co"
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_REVISION = re.compile(r"^[\w.\-/]{1,200}$")
MAX_CONFIG_BYTES = MAX_JSON_BYTES   # the largest config.json read (real ones: a few KB; Phi-3.5's 7 KB)
MAX_HEADERS_TOTAL = 64 << 20       # every shard header of one model together (DeepSeek-V3's 163: ~14 MB)
_GGUF_FIRST_RANGE = 1 << 16         # first range request: 64 KiB, then each as long as all before it
_SHARD_WORKERS = 8                  # shard headers fetched at once
_FAILED: dict[tuple, SourceError] = {}   # (endpoint, repo, revision, token?) -> the failure, for this process
# Where failures are remembered: the process (_FAILED: the CLI, a script), or the store of one app
# session (keep_failures_in), so that one user's failed try never fails the same id for another.
_SCOPE: ContextVar[dict | None] = ContextVar("kvmem_hub_failures", default=None)


@dataclass(frozen=True)
class Settings:
    """The Hub settings in force: read from the environment at each call."""

    endpoint: str
    cache_dir: str
    token: str | None
    offline: bool
    home: str = ""


def settings() -> Settings:
    endpoint = (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
    home = os.path.expanduser(os.environ.get("HF_HOME") or os.path.join("~", ".cache", "huggingface"))
    cache = os.environ.get("HF_HUB_CACHE") or os.path.join(home, "hub")
    offline = _flag("HF_HUB_OFFLINE")
    return Settings(endpoint, cache, _token(home), offline, home)


TOKEN_FILE_BYTES = 4096      # a Hub token is ~40 characters; huggingface_hub refreshes OAuth ones in place


def _flag(name: str) -> bool:
    return (os.environ.get(name) or "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def _token(home: str) -> str | None:
    """HF_TOKEN, else the token file `hf auth login` writes (HF_TOKEN_PATH, else HF_HOME/token), read
    bounded; None without either, or with HF_HUB_DISABLE_IMPLICIT_TOKEN set and no HF_TOKEN."""
    given = (os.environ.get("HF_TOKEN") or "").strip()
    if given:
        return given
    if _flag("HF_HUB_DISABLE_IMPLICIT_TOKEN"):
        return None
    path = os.path.expanduser(os.environ.get("HF_TOKEN_PATH") or os.path.join(home, "token"))
    if not os.path.lexists(path):
        return None
    text = read_text(path, TOKEN_FILE_BYTES, f"the Hub token file {path[:100]!r} (hf auth login)").strip()
    if not text or any(c.isspace() or not c.isprintable() for c in text):
        raise SourceError(f"the Hub token file {path[:100]!r} (hf auth login) does not hold one token; run "
                          "`hf auth login` again or set HF_TOKEN")
    return text


def _headers_file(repo_id: str, revision: str | None, s: Settings) -> str | None:
    """Where the safetensors headers read from the Hub are kept for offline use:
    HF_HOME/kvmem/safetensors-headers/<org>--<name>/<commit>.json (a commit pins them)."""
    if not revision or not re.fullmatch(r"[0-9a-f]{40}", revision):
        return None
    return os.path.join(s.home, "kvmem", "safetensors-headers", repo_id.replace("/", "--"), f"{revision}.json")


def is_repo_id(spec) -> bool:
    """True for "org/name" (the form of a Hub model id)."""
    return isinstance(spec, str) and bool(_REPO_ID.match(spec.strip())) and not os.path.exists(spec)


def split_gguf_spec(spec: str) -> tuple[str, str] | None:
    """("org/name", "path/in/repo.gguf") for "org/name/path/in/repo.gguf", else None."""
    parts = spec.strip().split("/")
    if len(parts) >= 3 and spec.lower().endswith(".gguf") and is_repo_id("/".join(parts[:2])):
        return "/".join(parts[:2]), "/".join(parts[2:])
    return None


def _check_revision(revision) -> str | None:
    if revision is None:
        return None
    if not isinstance(revision, str) or not _REVISION.match(revision) or ".." in revision:
        raise SourceError(f"revision must be a branch, tag or commit (text), got {quote(revision)}")
    return revision


def _hf():
    """huggingface_hub, for reading its cache (imported when a Hub id is asked for)."""
    try:
        import huggingface_hub
    except ImportError:
        raise SourceError("reading a model from the Hugging Face Hub or its cache needs huggingface_hub: "
                          "pip install 'kvmem[sources]'") from None
    return huggingface_hub


def _explain(exc: SourceError, repo_id: str, filename: str, revision: str | None, s: Settings) -> SourceError:
    """The specific case behind a failed request, and what to do about it."""
    where = f"{s.endpoint}/{repo_id}"
    if isinstance(exc, Unreachable):
        return SourceError(f"{repo_id}: cannot reach {s.endpoint} for {filename} ({str(exc)[:160]}), and it is not "
                           f"in the Hugging Face cache ({s.cache_dir}): check the connection or HF_ENDPOINT; with no "
                           "network, set HF_HUB_OFFLINE=1 and use a cached model, or upload the model's config.json")
    if not isinstance(exc, HTTPStatusError):
        return SourceError(f"{repo_id}: {filename}: {exc}")
    status, code = exc.status, exc.code or ""
    if code == "GatedRepo" or (status == 403 and "gated" in code.lower()):
        if s.token:
            return SourceError(f"{repo_id} is gated and the token (HF_TOKEN, or hf auth login's) has no access: "
                               f"accept the model's licence at {where} with that account, then retry")
        return SourceError(f"{repo_id} is gated: accept its licence at {where}, then set HF_TOKEN to a token "
                           "of that account (or run `hf auth login`)")
    if code == "RepoNotFound" or (status == 401 and not code):
        if status == 401 and not s.token:
            return SourceError(f"{repo_id} was not found on {s.endpoint} or needs a token: check the id; for "
                               "a private or gated repository set HF_TOKEN or run `hf auth login`")
        return SourceError(f"{repo_id} was not found on {s.endpoint}: check the id (org/name) or pick a preset "
                           "(kvmem models)")
    if code == "RevisionNotFound":
        return SourceError(f"{repo_id} has no revision {quote(revision)} on {s.endpoint}: give a branch, tag or "
                           "commit")
    if code == "EntryNotFound" or (status == 404 and filename != "the file list"):
        if filename == "config.json":
            return SourceError(f"{repo_id} has no config.json{_gguf_hint(repo_id, revision, s)}")
        if filename.startswith("the "):                 # a shard of "the safetensors headers": the message names it
            return SourceError(f"{exc}: the repository lists a file it does not serve")
        return SourceError(f"{repo_id} has no file {quote(filename)}")
    what = {401: "unauthorised", 403: "forbidden", 404: "not found", 429: "too many requests: rate-limited, "
            "retry later"}.get(status, "a server error, retry later" if status >= 500 else "refused")
    return SourceError(f"{repo_id}: {s.endpoint} answered HTTP {status} ({what}) for {filename}"
                       + ("" if s.token or status >= 500 or status == 429
                          else "; if the repository is private set HF_TOKEN or run `hf auth login`"))


def _gguf_hint(repo_id: str, revision: str | None, s: Settings) -> str:
    """A hint listing the repository's GGUF files, when it has some (a llama.cpp repository)."""
    if s.offline:
        return ": kvmem needs a config.json, or a GGUF file (org/name/FILE.gguf)"
    try:
        files = _repo_files(repo_id, revision, s, Deadline.after(min(deadline_s(), 15.0), f"{repo_id} file list"))
    except SourceError:
        files = []
    ggufs = [f for f in files if f.lower().endswith(".gguf")]
    if ggufs:
        return (f"; it holds GGUF files: pass one as {repo_id}/{ggufs[0]}"
                + (f" (or another of its {len(ggufs)})" if len(ggufs) > 1 else ""))
    return ": kvmem needs a config.json, or a GGUF file (org/name/FILE.gguf)"


def _auth(s: Settings) -> dict:
    return {"Authorization": f"Bearer {s.token}"} if s.token else {}


def _url(s: Settings, repo_id: str, revision: str | None, filename: str) -> str:
    rev = url_quote(revision or "main", safe="")
    return f"{s.endpoint}/{repo_id}/resolve/{rev}/{url_quote(filename)}"


def _repo_files(repo_id: str, revision: str | None, s: Settings, deadline: Deadline) -> list[str]:
    """The repository's file names (the Hub's model API, ``siblings``)."""
    url = f"{s.endpoint}/api/models/{repo_id}" + (f"/revision/{url_quote(revision, safe='')}" if revision else "")
    body, _ = get(url, what=f"{repo_id}: the file list", limit=MAX_JSON_BYTES, deadline=deadline, headers=_auth(s))
    try:
        info = json.loads(body.decode("utf-8"))
        return [str(f["rfilename"]) for f in info.get("siblings") or []]
    except (ValueError, UnicodeDecodeError, TypeError, KeyError, AttributeError, RecursionError):
        raise SourceError(f"{repo_id}: the Hub's file list is not the JSON the model API sends") from None


def keep_failures_in(store: dict | None) -> None:
    """From here on in this thread's context (one app session's script run), remember Hub failures in
    ``store`` instead of for the whole process; None: the process again."""
    _SCOPE.set(store)


def forget_failures(repo_id: str | None = None) -> int:
    """Forget the remembered failures (of ``repo_id``, or all) in the current scope, so the next
    call asks the Hub again (the app's Retry); how many were forgotten."""
    failed = _failures()
    keys = [key for key in failed if repo_id is None or key[1] == repo_id]
    for key in keys:
        del failed[key]
    return len(keys)


def failed_ids() -> set[str]:
    """The ids whose failure is remembered in the current scope."""
    return {key[1] for key in _failures()}


def _failures() -> dict:
    scoped = _SCOPE.get()
    return _FAILED if scoped is None else scoped


def _recall(key: tuple) -> str | None:
    failed = _failures()
    if key not in failed:
        return None
    where = "this process" if failed is _FAILED else "this session: retry to ask the Hub again"
    return f"{failed[key]} (remembered from an earlier try in {where})"


def _remembered(key: tuple) -> None:
    recalled = _recall(key)
    if recalled:
        raise SourceError(recalled)


def fetch_file(repo_id: str, filename: str, *, revision: str | None = None,
               max_bytes: int = MAX_CONFIG_BYTES) -> str:
    """A local path to one small file of the repository: from the cache, else downloaded into it
    (nothing over ``max_bytes`` is read, whatever the server announces or sends)."""
    revision = _check_revision(revision)
    s = settings()
    local = _cached(repo_id, filename, revision, s)
    if local:
        return local
    if s.offline:
        raise SourceError(f"{repo_id}: {filename} is not in the Hugging Face cache ({s.cache_dir}) and "
                          "HF_HUB_OFFLINE is set: unset it to fetch the file once, or set HF_HOME / "
                          "HF_HUB_CACHE to the cache that has it")
    key = (s.endpoint, repo_id, revision, bool(s.token))
    _remembered(key)
    deadline = Deadline.after(deadline_s(), f"{repo_id}: {filename}")
    try:
        body, headers = get(_url(s, repo_id, revision, filename), what=f"{repo_id}: {filename}", limit=max_bytes,
                            deadline=deadline, headers=_auth(s))
    except SourceError as exc:
        explained = _explain(exc, repo_id, filename, revision, s)
        if isinstance(exc, (Unreachable, DeadlineExceeded)):
            _failures()[key] = explained
        raise explained from None
    return _store(repo_id, filename, revision, body, headers, s)


def _store(repo_id: str, filename: str, revision: str | None, body: bytes, headers: dict, s: Settings) -> str:
    """Write a fetched file into the cache as huggingface_hub lays it out, so that it and
    HF_HUB_OFFLINE find it: blobs/<etag>, snapshots/<commit>/<file> -> the blob, refs/<revision>."""
    commit = (headers.get("x-repo-commit") or "").strip()
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        if revision and re.fullmatch(r"[0-9a-f]{40}", revision):
            commit = revision
        else:
            raise SourceError(f"{repo_id}: {s.endpoint} sent {filename} without its commit (X-Repo-Commit)")
    etag = (headers.get("x-linked-etag") or headers.get("etag") or "").strip().removeprefix("W/").strip('"')
    if not re.fullmatch(r"[0-9A-Za-z_-]{1,128}", etag):
        etag = hashlib.sha256(body).hexdigest()
    folder = os.path.join(os.path.realpath(s.cache_dir), "models--" + repo_id.replace("/", "--"))
    snapshot = os.path.join(folder, "snapshots", commit)
    for path, parent in ((folder, s.cache_dir), *((os.path.join(folder, sub), folder) for sub in ("blobs", "refs",
                                                                                                  "snapshots")),
                         (snapshot, os.path.join(folder, "snapshots"))):
        if os.path.lexists(path):   # written only inside the repository's own folder, never through a link out
            _inside(path, parent, f"{repo_id}: {os.path.relpath(path, os.path.dirname(folder))} in the Hugging "
                                  "Face cache")
    target = confined(snapshot, filename, f"{repo_id}: {filename}") if os.path.isdir(snapshot) else None
    try:
        os.makedirs(os.path.join(folder, "blobs"), exist_ok=True)
        blob = os.path.join(folder, "blobs", etag)
        if os.path.lexists(blob + ".incomplete"):      # a link planted there would be written through
            os.remove(blob + ".incomplete")
        fd = os.open(blob + ".incomplete", os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
        os.replace(blob + ".incomplete", blob)
        os.makedirs(snapshot, exist_ok=True)
        target = target or confined(snapshot, filename, f"{repo_id}: {filename}")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.lexists(target):
            os.remove(target)
        try:
            os.symlink(os.path.relpath(blob, os.path.dirname(target)), target)
        except OSError:
            with open(target, "wb") as handle:
                handle.write(body)
        if revision != commit:
            os.makedirs(os.path.join(folder, "refs"), exist_ok=True)
            ref = confined(os.path.join(folder, "refs"), revision or "main", f"{repo_id}: revision")
            os.makedirs(os.path.dirname(ref), exist_ok=True)
            with open(ref, "w", encoding="utf-8") as handle:
                handle.write(commit)
    except OSError as exc:
        raise SourceError(f"{repo_id}: cannot write {filename} into the Hugging Face cache ({s.cache_dir}): "
                          f"{exc.strerror}") from None
    return target


MAX_REF_BYTES = 256              # refs/<revision>: a 40-character commit hash (and a newline)
_COMMIT = re.compile(r"[0-9a-f]{40}")


def _cached(repo_id: str, filename: str, revision: str | None, s: Settings) -> str | None:
    """The file's path in the cache, when it is there and inside its repository folder; None
    otherwise. Resolved as huggingface_hub's try_to_load_from_cache does (refs/<revision> -> the
    commit, .no_exist/<commit>/<file>, snapshots/<commit>/<file>), but each step confined to the
    repository folder by its real path (a snapshot, a ref or a file linked out of it is refused) and
    the ref read bounded (huggingface_hub reads refs/<revision> whole: a 1 GB ref, 3.1 GB)."""
    _hf()
    if not isinstance(repo_id, str) or not _REPO_ID.match(repo_id) or ".." in repo_id:
        raise SourceError(f"{quote(repo_id)} is not a Hugging Face id (org/name)")
    what = f"{repo_id}: {filename}"
    plain_name(filename, what)
    try:
        from huggingface_hub.utils import validate_repo_id
        validate_repo_id(repo_id)
    except Exception as exc:        # noqa: BLE001 - huggingface_hub's validation of an id
        raise SourceError(f"{quote(repo_id)} (revision {quote(revision)}) is not a valid Hugging Face id: "
                          f"{str(exc)[:100]}") from None
    repo = os.path.join(os.path.realpath(s.cache_dir), "models--" + repo_id.replace("/", "--"))
    if not os.path.isdir(repo):
        return None
    _inside(repo, os.path.dirname(repo), f"{repo_id}: its folder in the Hugging Face cache")
    commit = _ref(repo, revision or "main", repo_id)
    if not _COMMIT.fullmatch(commit):
        return None                 # a branch or tag with no ref here: not cached
    if os.path.lexists(os.path.join(repo, ".no_exist", commit, filename)):
        return None                 # huggingface_hub's mark of a file the repository does not have
    snapshot = os.path.join(repo, "snapshots", commit)
    if not os.path.lexists(snapshot):
        return None
    _inside(snapshot, os.path.join(repo, "snapshots"), f"{repo_id}: snapshot {commit}")
    path = confined(snapshot, filename, what)      # the file: inside its snapshot, or a blob of this repository
    if not os.path.lexists(path):
        return None
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:          # a dangling link: the blob is gone
        raise SourceError(f"{what}: {quote(path)} in the Hugging Face cache cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        raise SourceError(f"{what}: {quote(path)} in the Hugging Face cache is {file_kind(mode)}, not a file; "
                          "remove it (kvmem reads only regular files)")
    return path


def _inside(path: str, parent: str, what: str) -> None:
    """Refuse ``path`` unless its real path is ``parent``'s own entry of that name (no link out)."""
    real, expected = os.path.realpath(path), os.path.join(os.path.realpath(parent), os.path.basename(path))
    if real != expected:
        raise SourceError(f"{what} is a link to {quote(real)}, outside {quote(os.path.dirname(expected))}; kvmem "
                          "reads only files inside the repository's own folder of the cache")


def _ref(repo: str, revision: str, repo_id: str) -> str:
    """The commit refs/<revision> names, read bounded (MAX_REF_BYTES, a regular file inside the
    repository's refs/); ``revision`` itself when there is no such ref (a commit hash)."""
    ref = os.path.join(repo, "refs", *revision.split("/"))
    if not os.path.lexists(ref):
        return revision
    what = f"{repo_id}: refs/{revision} in the Hugging Face cache"
    refs = os.path.realpath(os.path.join(repo, "refs"))
    real = os.path.realpath(ref)
    if not real.startswith(refs + os.sep) or refs != os.path.join(os.path.realpath(repo), "refs"):
        raise SourceError(f"{what} is a link to {quote(real)}, outside the repository's refs folder")
    text = read_text(ref, MAX_REF_BYTES, what).strip()
    if not _COMMIT.fullmatch(text):
        raise SourceError(f"{what} holds {quote(text)}, not a 40-character commit hash; remove it, or fetch the "
                          "model again")
    return text


def _commit_of(path: str) -> str:
    """The commit hash of a file in the cache: its snapshot folder's name."""
    parts = os.path.normpath(path).split(os.sep)
    return parts[parts.index("snapshots") + 1] if "snapshots" in parts else "?"


def model_from_hub(repo_id: str, *, revision: str | None = None):
    """The Model of a Hub repository from its config.json (cache first); exact weights are read
    from its safetensors headers when kvmem.weights asks (HubCheckpoint)."""
    from ..configs import ConfigError
    from ..model import Model
    revision = _check_revision(revision)
    path = fetch_file(repo_id, "config.json", revision=revision)
    commit = _commit_of(path)
    s = settings()
    try:                           # kvmem.configs reads the file, bounded, like any config.json
        model = Model.from_hf_config(path, name=repo_id, hf_id=repo_id,
                                     source=f"{s.endpoint}/{repo_id}/blob/{commit}/config.json")
    except ConfigError as exc:
        raise ConfigError(f"{repo_id} config.json: {exc}") from None
    return model.with_checkpoint(HubCheckpoint(repo_id, commit if commit != "?" else revision))


@dataclass(frozen=True)
class HubCheckpoint:
    """A Hub model's safetensors headers, read when the weights are asked for (``load``)."""

    repo_id: str
    revision: str | None

    def load(self) -> tuple[Checkpoint | None, str]:
        return checkpoint_for(self.repo_id, revision=self.revision)


def checkpoint_for(repo_id: str, *, revision: str | None = None) -> tuple[Checkpoint | None, str]:
    """(the repository's safetensors checkpoint, "") or (None, why the formula is used instead)."""
    try:
        return _checkpoint_once(repo_id, revision, settings()), ""
    except _NotRead as exc:
        return None, exc.why


class _NotRead(Exception):
    """No checkpoint read (why: the message): not remembered, so the next call asks again."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


@lru_cache(maxsize=64)        # headers read once per process and Hub settings (successes only)
def _checkpoint_once(repo_id: str, revision: str | None, s: Settings) -> Checkpoint:
    try:
        checkpoint, why = _checkpoint_for(repo_id, _check_revision(revision), s)
    except SourceError as exc:
        raise _NotRead(str(exc)) from None
    if checkpoint is None:
        raise _NotRead(why)
    return checkpoint


def _checkpoint_for(repo_id: str, revision: str | None, s: Settings) -> tuple[Checkpoint | None, str]:
    index = _cached(repo_id, INDEX_FILE, revision, s)
    single = _cached(repo_id, SINGLE_FILE, revision, s)
    from .safetensors import read_header
    if index:
        folder = os.path.dirname(index)
        shards = shard_names(read_json_file(index, MAX_INDEX_BYTES), index)
        paths = {shard: confined(folder, shard, f"{repo_id}: {INDEX_FILE}") for shard in shards}
        if all(os.path.isfile(p) for p in paths.values()):
            headers = {shard: read_header(p) for shard, p in paths.items()}
            return checkpoint_from_headers(headers, f"safetensors headers of {repo_id} in the HF cache"), ""
    elif single:
        return checkpoint_from_headers({SINGLE_FILE: read_header(single)},
                                       f"safetensors header of {repo_id} in the HF cache"), ""
    kept = _headers_file(repo_id, revision, s)
    if kept and os.path.isfile(kept):
        saved = read_json_file(kept, MAX_HEADERS_TOTAL * 2)
        if not isinstance(saved, dict):
            return None, f"{kept} is not the headers kvmem keeps"
        return checkpoint_from_headers(saved, f"safetensors headers of {repo_id} (read earlier, {kept})"), ""
    if s.offline:
        return None, "HF_HUB_OFFLINE is set and the safetensors headers are not in the cache"
    failed = (s.endpoint, repo_id, revision, bool(s.token))
    recalled = _recall(failed)
    if recalled:
        return None, recalled
    deadline = Deadline.after(deadline_s(), f"{repo_id}: the safetensors headers")
    try:
        files = _repo_files(repo_id, revision, s, deadline)
        if INDEX_FILE in files:
            path = fetch_file(repo_id, INDEX_FILE, revision=revision, max_bytes=MAX_INDEX_BYTES)
            shards = shard_names(read_json_file(path, MAX_INDEX_BYTES), INDEX_FILE)
        elif SINGLE_FILE in files:
            shards = [SINGLE_FILE]
        else:
            return None, f"{repo_id} has no safetensors checkpoint ({SINGLE_FILE} or {INDEX_FILE})"
        for shard in shards:
            plain_name(shard, f"{repo_id}: {INDEX_FILE}")
        headers = _remote_headers(repo_id, revision, shards, s, deadline)
    except SourceError as exc:
        explained = _explain(exc, repo_id, "the safetensors headers", revision, s)
        if isinstance(exc, (Unreachable, DeadlineExceeded)):
            _failures()[failed] = explained
        return None, str(explained if isinstance(exc, (Unreachable, HTTPStatusError)) else exc)
    count = f"{len(shards)} shards" if len(shards) > 1 else "one file"
    checkpoint = checkpoint_from_headers(headers, f"safetensors headers of {repo_id} ({count}, range requests)")
    if kept:
        try:
            os.makedirs(os.path.dirname(kept), exist_ok=True)
            with open(kept + ".tmp", "w", encoding="utf-8") as handle:
                json.dump(headers, handle)
            os.replace(kept + ".tmp", kept)
        except OSError:
            pass                 # a read-only HF_HOME: the headers are read again next time
    return checkpoint, ""


def _remote_headers(repo_id: str, revision: str | None, shards: list[str], s: Settings,
                    deadline: Deadline) -> dict[str, dict]:
    """Each shard's header by two range requests (8 bytes, then the JSON), _SHARD_WORKERS at
    once, all within ``deadline`` and MAX_HEADERS_TOTAL bytes together."""
    def one(shard: str) -> tuple[str, bytes]:
        url, what = _url(s, repo_id, revision, shard), f"{repo_id}: {shard}"
        first, _ = get(url, what=what, limit=8, deadline=deadline, headers=_auth(s), byte_range=(0, 7))
        if len(first) < 8:
            raise SourceError(f"{what}: not a safetensors file (shorter than its 8-byte header length)")
        size = int.from_bytes(first, "little")
        if size < 2:
            raise SourceError(f"{what}: safetensors header length {size} is too short for a JSON header")
        if size > MAX_HEADER_BYTES:
            raise SourceError(f"{what}: safetensors header length {size:,} exceeds {MAX_HEADER_BYTES:,} bytes")
        raw, _ = get(url, what=what, limit=size, deadline=deadline, headers=_auth(s), byte_range=(8, 7 + size))
        if len(raw) < size:
            raise SourceError(f"{what}: safetensors header truncated ({len(raw):,} of {size:,} bytes)")
        return shard, raw

    pool = ThreadPoolExecutor(max_workers=_SHARD_WORKERS)
    try:
        futures = [pool.submit(one, shard) for shard in shards]
        done, pending = wait(futures, timeout=max(deadline.at - _now(), 0), return_when="FIRST_EXCEPTION")
        for future in done:
            failed = future.exception()
            if failed is not None:
                raise failed
        if pending:
            deadline.left()
        headers, total = {}, 0
        for future in futures:
            shard, raw = future.result()
            total += len(raw)
            if total > MAX_HEADERS_TOTAL:
                raise SourceError(f"{repo_id}: the safetensors headers are over {MAX_HEADERS_TOTAL:,} bytes together")
            headers[shard] = parse_header(raw, f"{repo_id}: {shard}")
        return headers
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _now() -> float:
    import time
    return time.monotonic()


class _Ranges:
    """A remote file's first bytes as one stream (``read``): each read beyond the bytes fetched
    asks the next range, as long as all before it, so a header is fetched in growing ranges and
    parsed once. A server that answers the first range with the whole file (HTTP 200) is read as
    that one stream, up to MAX_GGUF_HEADER_BYTES."""

    def __init__(self, url: str, what: str, headers: dict, deadline: Deadline):
        self.url, self.what, self.headers, self.deadline = url, what, headers, deadline
        self.pos, self.whole = 0, False
        self.body: Body | None = None

    def read(self, n: int) -> bytes:
        while True:
            if self.body is None:
                if self.pos >= MAX_GGUF_HEADER_BYTES:
                    return b""
                size = max(n, self.pos, _GGUF_FIRST_RANGE)
                end = min(self.pos + size, MAX_GGUF_HEADER_BYTES) - 1
                body = self.body = open_body(self.url, what=self.what, limit=MAX_GGUF_HEADER_BYTES,
                                             deadline=self.deadline, headers=self.headers, byte_range=(self.pos, end))
                self.whole = body.status == 200
                self.asked_end = end
            else:
                body = self.body
            chunk = body.read1(n)
            if chunk:
                self.pos += len(chunk)
                return chunk
            body.close()
            self.body = None
            if self.whole or self.pos <= self.asked_end:       # the file (or the server's answer) ended
                return b""

    def close(self) -> None:
        if self.body is not None:
            self.body.close()


def remote_gguf_header(repo_id: str, filename: str, *, revision: str | None = None):
    """(GGUFHeader, bytes transferred) of a GGUF file on the Hub, read by HTTP range requests:
    64 KiB, then each next range as long as all before it, parsed once as the bytes arrive."""
    from .gguf import HeaderTruncated, parse_stream
    revision = _check_revision(revision)
    s = settings()
    local = _cached(repo_id, filename, revision, s)
    if local:
        from .gguf import read_header as read_local
        return read_local(local), 0
    if s.offline:
        raise SourceError(f"{repo_id}/{filename} is not in the Hugging Face cache and HF_HUB_OFFLINE is set: "
                          "unset it to read the header from the Hub")
    key = (s.endpoint, repo_id, revision, bool(s.token))
    _remembered(key)
    where = f"{repo_id}/{filename}"
    stream = _Ranges(_url(s, repo_id, revision, filename), where, _auth(s),
                     Deadline.after(deadline_s(), f"{where}: the GGUF header"))
    try:
        return parse_stream(stream, where), stream.pos
    except HeaderTruncated:
        raise SourceError(f"{where}: the file ends inside its GGUF header") from None
    except SourceError as exc:
        explained = _explain(exc, repo_id, filename, revision, s) if isinstance(exc, (Unreachable, HTTPStatusError)) \
            else exc
        if isinstance(exc, (Unreachable, DeadlineExceeded)):
            _failures()[key] = explained
        raise explained from None
    finally:
        stream.close()


def model_from_remote_gguf(repo_id: str, filename: str, *, revision: str | None = None):
    from ..model import Model
    from .gguf import fields_from_header
    header, _ = remote_gguf_header(repo_id, filename, revision=revision)
    return Model(**fields_from_header(header, name=f"{repo_id}/{filename}"))
