"""A Hugging Face Hub look-alike on 127.0.0.1, and a test environment that can reach nothing else.

``hub`` serves the Hub's URL layout from memory (or from files on disk, for big sparse ones):

    HEAD/GET /<org>/<name>/resolve/<revision>/<path>    ETag, X-Repo-Commit, Content-Length,
                                                         Accept-Ranges; Range -> 206 + Content-Range
    GET /api/models/<org>/<name>[/revision/<revision>]  {"id", "sha", "siblings", "gated", ...}

and answers like the Hub when something is wrong (huggingface_hub reads X-Error-Code):
a missing repository 404 RepoNotFound; a gated one 401 GatedRepo without a token, 403 with a
token that has no access; an unknown revision 404 RevisionNotFound; a missing file 404
EntryNotFound with X-Repo-Commit. It records every request and the body bytes it sent.
``hub.behave[path_part] = act`` makes it misbehave for requests whose path contains
``path_part``: ``act(handler, head)`` answers instead (tests/sources/test_hostile_sources.py:
a stall, an ignored Range, a lying length, a gzip bomb), or returns False to let the request
be answered as usual; a stalling act waits on ``hub.stop``, set when the test ends.

HF_ENDPOINT points at it, HF_HOME is a fresh temporary folder, HF_TOKEN and HF_HUB_OFFLINE are
unset; and every socket connection to anything but 127.0.0.1 fails the test (no test here may
reach the internet).
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TOKEN = "hf_loopback_token"          # the one token the look-alike accepts for gated repositories


def commit_of(repo_id: str, revision: str) -> str:
    return hashlib.sha1(f"{repo_id}@{revision}".encode()).hexdigest()


@dataclass
class Repo:
    """A repository: its files per revision name ("main" first); gated ones need TOKEN."""

    repo_id: str
    revisions: dict[str, dict[str, bytes | Path]]
    gated: bool = False

    def resolve(self, revision: str) -> tuple[str, dict] | None:
        for name, files in self.revisions.items():
            if revision in (name, commit_of(self.repo_id, name)):
                return commit_of(self.repo_id, name), files
        return None


@dataclass
class LoopbackHub:
    repos: dict[str, Repo] = field(default_factory=dict)
    requests: list[dict] = field(default_factory=list)
    url: str = ""
    behave: dict = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def add(self, repo_id: str, files: dict[str, bytes | str | dict | Path], *, gated: bool = False,
            revisions: dict[str, dict] | None = None) -> Repo:
        """Serve ``files`` (path in repo -> bytes, text, a dict written as JSON, or a file on disk)."""
        def encode(files):
            out = {}
            for path, content in files.items():
                if isinstance(content, dict):
                    content = json.dumps(content, indent=2)
                out[path] = content.encode() if isinstance(content, str) else content
            return out
        revs = {"main": encode(files)}
        revs.update({name: encode(f) for name, f in (revisions or {}).items()})
        repo = self.repos[repo_id] = Repo(repo_id, revs, gated)
        return repo

    def sent(self, path_part: str) -> int:
        """Body bytes sent for requests whose path contains ``path_part``."""
        return sum(r["sent"] for r in self.requests if path_part in r["path"])

    def calls(self, path_part: str = "") -> list[dict]:
        return [r for r in self.requests if path_part in r["path"]]

    def settle(self, path_part: str, timeout: float = 5.0) -> None:
        """Wait until every request whose path contains ``path_part`` has been answered in full (or
        its client went away), so that ``sent`` counts what the server really wrote."""
        import time
        end = time.monotonic() + timeout
        while any(not r.get("done") for r in self.calls(path_part)) and time.monotonic() < end:
            time.sleep(0.02)
        assert all(r.get("done") for r in self.calls(path_part)), f"requests for {path_part} still being answered"


_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_API = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+?)(?:/revision/(?P<rev>[^/]+))?/?$")


def _handler(hub: LoopbackHub):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):       # quiet
            pass

        def _reply(self, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False):
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            if "Content-Length" not in (headers or {}):
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.record["status"] = status          # before the body: a client done reading sees it
            if not head and body:
                self.wfile.write(body)
            self.record.update(sent=0 if head else len(body), done=True)

        def _error(self, status: int, code: str, message: str, head: bool, extra: dict | None = None):
            body = json.dumps({"error": message}).encode()
            self._reply(status, body, {"X-Error-Code": code, "X-Error-Message": message,
                                       "Content-Type": "application/json", **(extra or {})}, head)

        def _access(self, repo: Repo | None, repo_id: str, head: bool) -> bool:
            if repo is None:
                self._error(404, "RepoNotFound", "Repository not found", head)
                return False
            if repo.gated:
                auth = self.headers.get("Authorization", "")
                if not auth:
                    self._error(401, "GatedRepo", f"Access to model {repo_id} is restricted. You must have "
                                "access to it and be authenticated to access it. Please log in.", head)
                    return False
                if auth != f"Bearer {TOKEN}":
                    self._error(403, "GatedRepo", f"Access to model {repo_id} is restricted and you are not in "
                                "the authorized list.", head)
                    return False
            return True

        def _serve(self, head: bool):
            self.record = {"method": self.command, "path": self.path, "range": self.headers.get("Range"), "sent": 0}
            hub.requests.append(self.record)        # this request's own record, whatever runs beside it
            path = self.path.split("?", 1)[0]
            for part, act in list(hub.behave.items()):
                if part in path and act(self, head) is not False:      # False: answer as usual after all
                    return
            if m := _API.match(path):
                repo = hub.repos.get(m["repo"])
                if not self._access(repo, m["repo"], head):
                    return
                found = repo.resolve(m["rev"] or "main")
                if found is None:
                    return self._error(404, "RevisionNotFound", "Invalid rev id", head)
                sha, files = found
                body = json.dumps({"id": m["repo"], "modelId": m["repo"], "sha": sha, "private": False,
                                   "gated": "manual" if repo.gated else False, "disabled": False,
                                   "siblings": [{"rfilename": name} for name in files]}).encode()
                return self._reply(200, body, {"Content-Type": "application/json"}, head)
            m = _RESOLVE.match(path)
            if m is None:
                return self._error(404, "RepoNotFound", "Not a Hub URL", head)
            repo = hub.repos.get(m["repo"])
            if not self._access(repo, m["repo"], head):
                return
            found = repo.resolve(m["rev"])
            if found is None:
                return self._error(404, "RevisionNotFound", "Invalid rev id", head)
            sha, files = found
            content = files.get(m["file"])
            if content is None:
                return self._error(404, "EntryNotFound", "Entry not found", head, {"X-Repo-Commit": sha})
            size = content.stat().st_size if isinstance(content, Path) else len(content)
            etag = hashlib.sha1(f"{m['repo']}/{sha}/{m['file']}/{size}".encode()).hexdigest()
            headers = {"ETag": f'"{etag}"', "X-Repo-Commit": sha, "Accept-Ranges": "bytes",
                       "Content-Type": "application/octet-stream"}
            start, end = 0, size - 1
            status = 200
            if (wanted := self.headers.get("Range")) and (r := re.match(r"bytes=(\d+)-(\d*)$", wanted)):
                start = int(r[1])
                end = min(int(r[2]) if r[2] else size - 1, size - 1)
                status = 206
                headers["Content-Range"] = f"bytes {start}-{end}/{size}"
            if isinstance(content, Path):
                with open(content, "rb") as handle:
                    handle.seek(start)
                    body = handle.read(max(end - start + 1, 0)) if not head else b""
            else:
                body = content[start:end + 1]
            headers["Content-Length"] = str(max(end - start + 1, 0))
            self._reply(status, body, headers, head)

        def do_HEAD(self):
            self._serve(head=True)

        def do_GET(self):
            self._serve(head=False)

    return Handler


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """The loopback Hub, with HF_ENDPOINT pointing at it and an empty HF_HOME."""
    state = LoopbackHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("HF_ENDPOINT", state.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    for name in ("HF_HUB_CACHE", "HF_TOKEN", "HF_TOKEN_PATH", "HF_HUB_DISABLE_IMPLICIT_TOKEN", "HF_HUB_OFFLINE",
                 "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    from kvmem.sources import hub as hub_source
    hub_source._checkpoint_once.cache_clear()
    hub_source._FAILED.clear()
    yield state
    state.stop.set()
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch):
    """Any connection to a host other than 127.0.0.1 fails the test."""
    real_connect = socket.socket.connect

    def connect(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if self.family in (socket.AF_INET, socket.AF_INET6) and host not in ("127.0.0.1", "::1", "localhost"):
            raise AssertionError(f"a test tried to reach {address!r}: tests never touch the internet")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)


def hub_configs() -> dict[str, dict]:
    """The twenty real config.json fixtures by the id they are served under."""
    out = {}
    for path in sorted((FIXTURES / "hub").glob("*.json")):
        out[path.stem.replace("--", "/", 1)] = json.loads(path.read_text())
    return out


@pytest.fixture
def stalled(hub, monkeypatch):
    """slow/model on the loopback Hub, its config.json stalled until ``release()``; deadline 2 s."""
    monkeypatch.setenv("KVMEM_HUB_TIMEOUT", "1")
    monkeypatch.setenv("KVMEM_HUB_DEADLINE", "2")
    from tests.fixtures import safetensors_models as fx
    hub.add("slow/model", {"config.json": fx.CONFIG})

    def stall(handler, head):
        hub.stop.wait(30)
        handler.close_connection = True
    hub.behave["config.json"] = stall
    hub.release = lambda: hub.behave.pop("config.json")
    yield hub
    from kvmem.sources import hub as hub_source
    hub_source.keep_failures_in(None)             # the test's thread back to the process's memory
