"""Models by Hugging Face id, through huggingface_hub: the local cache first, then the Hub.

Resolution (kvmem.catalog.get_model): a preset; else the local Hugging Face cache (HF_HUB_CACHE,
or HF_HOME/hub, as huggingface_hub lays it out: models--org--name/{refs,blobs,snapshots}), so a
model downloaded once works offline; else the Hub at HF_ENDPOINT (default https://huggingface.co)
with HF_TOKEN for gated or private repositories, unless HF_HUB_OFFLINE is set. The environment is
read at each call (huggingface_hub reads it once, at import).

What is fetched: ``config.json``; with weights asked for, ``model.safetensors.index.json`` and
each shard's header by HTTP range requests (8 bytes + the JSON header, huggingface_hub's
parse_safetensors_file_metadata), kept in HF_HOME/kvmem/safetensors-headers for offline use;
for a GGUF, its header by range requests. Never the weights,
never code from the repository, never trust_remote_code: a config is parsed as JSON by
kvmem.configs, the same reader as an uploaded file.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from . import Checkpoint, SourceError
from .safetensors import INDEX_FILE, SINGLE_FILE, checkpoint_from_headers, read_header, shard_names

__all__ = ["Settings", "settings", "is_repo_id", "split_gguf_spec", "fetch_file", "model_from_hub",
           "checkpoint_for", "remote_gguf_header", "model_from_remote_gguf"]

DEFAULT_ENDPOINT = "https://huggingface.co"
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
MAX_CONFIG_BYTES = 10_000_000    # the largest config.json read (real ones: a few KB; Phi-3.5's 7 KB)
_GGUF_FIRST_RANGE = 1 << 16       # first range request: 64 KiB, then doubling (a header <= 2x read)
_GGUF_MAX_HEADER = 1 << 30        # give up past 1 GiB of header


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
    offline = (os.environ.get("HF_HUB_OFFLINE") or "").strip().upper() in {"1", "ON", "YES", "TRUE"}
    return Settings(endpoint, cache, os.environ.get("HF_TOKEN") or None, offline, home)


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


def _errors():
    try:
        from huggingface_hub import errors
    except ImportError:
        raise SourceError("reading a model from the Hugging Face Hub or its cache needs huggingface_hub: "
                          "pip install 'kvmem[sources]'") from None
    return errors


def _explain(exc: Exception, repo_id: str, filename: str, revision: str | None, s: Settings) -> SourceError:
    """The specific case behind a huggingface_hub error, and what to do about it."""
    e = _errors()
    where = f"{s.endpoint}/{repo_id}"
    if isinstance(exc, e.GatedRepoError):
        if s.token:
            return SourceError(f"{repo_id} is gated and the token in HF_TOKEN has no access: accept the "
                               f"model's licence at {where} with that account, then retry")
        return SourceError(f"{repo_id} is gated: accept its licence at {where}, then set HF_TOKEN to a token "
                           "of that account (or run `hf auth login`)")
    if isinstance(exc, e.RepositoryNotFoundError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status == 401 and not s.token:
            return SourceError(f"{repo_id} was not found on {s.endpoint} or needs a token: check the id; for "
                               "a private or gated repository set HF_TOKEN")
        return SourceError(f"{repo_id} was not found on {s.endpoint}: check the id (org/name) or pick a preset "
                           "(kvmem models)")
    if isinstance(exc, e.RevisionNotFoundError):
        return SourceError(f"{repo_id} has no revision {revision!r} on {s.endpoint}: give a branch, tag or commit")
    if isinstance(exc, e.RemoteEntryNotFoundError):
        if filename == "config.json":
            return SourceError(f"{repo_id} has no config.json{_gguf_hint(repo_id, revision, s)}")
        return SourceError(f"{repo_id} has no file {filename!r}")
    if isinstance(exc, (e.LocalEntryNotFoundError, e.OfflineModeIsEnabled)):
        if s.offline:
            return SourceError(f"{repo_id}: {filename} is not in the Hugging Face cache ({s.cache_dir}) and "
                               "HF_HUB_OFFLINE is set: unset it to fetch the file once, or set HF_HOME / "
                               "HF_HUB_CACHE to the cache that has it")
        return SourceError(f"{repo_id}: cannot reach {s.endpoint} and {filename} is not in the Hugging Face "
                           f"cache ({s.cache_dir}): check the connection or HF_ENDPOINT")
    if isinstance(exc, e.HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", "?")
        return SourceError(f"{repo_id}: {s.endpoint} answered HTTP {status} for {filename}"
                           + ("" if s.token else "; if the repository is private set HF_TOKEN"))
    return SourceError(f"{repo_id}: cannot fetch {filename}: {type(exc).__name__}: {exc}".splitlines()[0])


def _gguf_hint(repo_id: str, revision: str | None, s: Settings) -> str:
    """A hint listing the repository's GGUF files, when it has some (a llama.cpp repository)."""
    if s.offline:
        return ": kvmem needs a config.json, or a GGUF file (org/name/FILE.gguf)"
    try:
        files = _repo_files(repo_id, revision, s)
    except Exception:
        files = []
    ggufs = [f for f in files if f.lower().endswith(".gguf")]
    if ggufs:
        return (f"; it holds GGUF files: pass one as {repo_id}/{ggufs[0]}"
                + (f" (or another of its {len(ggufs)})" if len(ggufs) > 1 else ""))
    return ": kvmem needs a config.json, or a GGUF file (org/name/FILE.gguf)"


def _repo_files(repo_id: str, revision: str | None, s: Settings) -> list[str]:
    from huggingface_hub import HfApi
    info = HfApi(endpoint=s.endpoint).model_info(repo_id, revision=revision, token=s.token or None)
    return [sibling.rfilename for sibling in info.siblings or []]


def fetch_file(repo_id: str, filename: str, *, revision: str | None = None,
               max_bytes: int = MAX_CONFIG_BYTES) -> str:
    """A local path to one small file of the repository: from the cache, else downloaded into it
    (after a look at its size: nothing over ``max_bytes`` is downloaded)."""
    e = _errors()
    from huggingface_hub import hf_hub_download
    s = settings()
    kwargs = dict(revision=revision, cache_dir=s.cache_dir, endpoint=s.endpoint, token=s.token)
    try:
        return hf_hub_download(repo_id, filename, local_files_only=True, **kwargs)
    except e.LocalEntryNotFoundError as exc:
        if s.offline:
            raise _explain(exc, repo_id, filename, revision, s) from None
    except e.HFValidationError as exc:
        raise SourceError(f"{repo_id!r} is not a valid Hugging Face id: {exc}") from None
    try:
        info = hf_hub_download(repo_id, filename, dry_run=True, **kwargs)
        size = getattr(info, "file_size", None)
        if size is not None and size > max_bytes:
            raise SourceError(f"{repo_id}: {filename} is {size:,} bytes, above the {max_bytes:,} kvmem reads; "
                              "a config.json is a few KB")
        return hf_hub_download(repo_id, filename, **kwargs)
    except SourceError:
        raise
    except Exception as exc:       # every huggingface_hub failure becomes one specific message
        raise _explain(exc, repo_id, filename, revision, s) from None


def _cached(repo_id: str, filename: str, revision: str | None, s: Settings) -> str | None:
    from huggingface_hub import try_to_load_from_cache
    path = try_to_load_from_cache(repo_id, filename, cache_dir=s.cache_dir, revision=revision)
    return path if isinstance(path, str) else None


def _commit_of(path: str) -> str:
    """The commit hash of a file in the cache: its snapshot folder's name."""
    parts = os.path.normpath(path).split(os.sep)
    return parts[parts.index("snapshots") + 1] if "snapshots" in parts else "?"


def model_from_hub(repo_id: str, *, revision: str | None = None):
    """The Model of a Hub repository from its config.json (cache first); exact weights are read
    from its safetensors headers when kvmem.weights asks (HubCheckpoint)."""
    from ..configs import ConfigError, model_from_config
    path = fetch_file(repo_id, "config.json", revision=revision)
    if os.path.getsize(path) > MAX_CONFIG_BYTES:         # a cached file is not looked at before
        raise SourceError(f"{repo_id}: config.json is {os.path.getsize(path):,} bytes, above the "
                          f"{MAX_CONFIG_BYTES:,} kvmem reads; a config.json is a few KB")
    commit = _commit_of(path)
    s = settings()
    try:
        model = model_from_config(path, name=repo_id, hf_id=repo_id,
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


_CHECKPOINTS: dict[tuple, Checkpoint] = {}    # headers read once per process (successes only)


def checkpoint_for(repo_id: str, *, revision: str | None = None) -> tuple[Checkpoint | None, str]:
    """(the repository's safetensors checkpoint, "") or (None, why the formula is used instead)."""
    s = settings()
    key = (repo_id, revision, s.endpoint, s.cache_dir)
    if key not in _CHECKPOINTS:
        checkpoint, why = _checkpoint_for(repo_id, revision, s)
        if checkpoint is None:
            return None, why
        _CHECKPOINTS[key] = checkpoint
    return _CHECKPOINTS[key], ""


def _read_json(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _checkpoint_for(repo_id: str, revision: str | None, s: Settings) -> tuple[Checkpoint | None, str]:
    index = _cached(repo_id, INDEX_FILE, revision, s)
    single = _cached(repo_id, SINGLE_FILE, revision, s)
    if index:
        folder = os.path.dirname(index)
        shards = shard_names(_read_json(index), index)
        if all(os.path.isfile(os.path.join(folder, shard)) for shard in shards):
            headers = {shard: read_header(os.path.join(folder, shard)) for shard in shards}
            return checkpoint_from_headers(headers, f"safetensors headers of {repo_id} in the HF cache"), ""
    elif single:
        return checkpoint_from_headers({SINGLE_FILE: read_header(single)},
                                       f"safetensors header of {repo_id} in the HF cache"), ""
    kept = _headers_file(repo_id, revision, s)
    if kept and os.path.isfile(kept):
        saved = _read_json(kept)
        return checkpoint_from_headers(saved, f"safetensors headers of {repo_id} (read earlier, {kept})"), ""
    if s.offline:
        return None, "HF_HUB_OFFLINE is set and the safetensors headers are not in the cache"
    try:
        files = _repo_files(repo_id, revision, s)
    except Exception as exc:
        return None, str(_explain(exc, repo_id, "the file list", revision, s))
    from huggingface_hub import HfApi
    api = HfApi(endpoint=s.endpoint)
    try:
        if INDEX_FILE in files:
            path = fetch_file(repo_id, INDEX_FILE, revision=revision, max_bytes=10 * MAX_CONFIG_BYTES)
            shards = shard_names(_read_json(path), INDEX_FILE)
        elif SINGLE_FILE in files:
            shards = [SINGLE_FILE]
        else:
            return None, f"{repo_id} has no safetensors checkpoint ({SINGLE_FILE} or {INDEX_FILE})"
        headers = {}
        for shard in shards:
            meta = api.parse_safetensors_file_metadata(repo_id, shard, revision=revision, token=s.token)
            headers[shard] = {name: {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": list(t.data_offsets)}
                              for name, t in meta.tensors.items()}
    except SourceError as exc:
        return None, str(exc)
    except Exception as exc:
        return None, str(_explain(exc, repo_id, "the safetensors headers", revision, s))
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


def remote_gguf_header(repo_id: str, filename: str, *, revision: str | None = None):
    """(GGUFHeader, bytes transferred) of a GGUF file on the Hub, read by HTTP range requests:
    64 KiB, then each next range as long as all before it, until the header parses."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status
    from .gguf import HeaderTruncated, header_from_bytes
    s = settings()
    local = _cached(repo_id, filename, revision, s)
    if local:
        from .gguf import read_header as read_local
        return read_local(local), 0
    if s.offline:
        raise SourceError(f"{repo_id}/{filename} is not in the Hugging Face cache and HF_HUB_OFFLINE is set: "
                          "unset it to read the header from the Hub")
    url = hf_hub_url(repo_id, filename, revision=revision, endpoint=s.endpoint)
    headers = build_hf_headers(token=s.token)
    data, end = b"", _GGUF_FIRST_RANGE              # bytes read so far; the next range ends before `end`
    while True:
        start = len(data)
        try:
            response = get_session().get(url, headers={**headers, "Range": f"bytes={start}-{end - 1}"},
                                         follow_redirects=True)
            hf_raise_for_status(response)
        except Exception as exc:
            raise _explain(exc, repo_id, filename, revision, s) from None
        if response.status_code != 206 and start:
            raise SourceError(f"{s.endpoint} ignored the Range header for {repo_id}/{filename}")
        chunk = response.content
        data = data + chunk if response.status_code == 206 else chunk
        try:
            return header_from_bytes(data, f"{repo_id}/{filename}"), len(data)
        except HeaderTruncated:
            if len(chunk) < end - start or end >= _GGUF_MAX_HEADER:     # the file (or our patience) ended
                raise SourceError(f"{repo_id}/{filename}: the file ends inside its GGUF header") from None
            end *= 2


def model_from_remote_gguf(repo_id: str, filename: str, *, revision: str | None = None):
    from .gguf import model_from_header
    header, _ = remote_gguf_header(repo_id, filename, revision=revision)
    return model_from_header(header, name=f"{repo_id}/{filename}")
