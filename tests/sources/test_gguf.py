"""GGUF files, header only: llama.cpp metadata -> kvmem's Model, tensor infos -> exact weight bytes."""

from __future__ import annotations

import json

import gguf
import pytest

import kvmem
from kvmem.cli import main
from kvmem.sources import SourceError
from kvmem.sources.gguf import read_header
from kvmem.weights import weights
from tests.fixtures import gguf_models

# ggml block sizes: (elements per block, bytes per block); ggml-common.h block_q4_K / block_q6_K
BLOCKS = {"Q4_K": (256, 144), "Q6_K": (256, 210), "F32": (1, 4)}


def _by_hand(spec_name: str) -> int:
    """Sum over the tensors of elements / block x bytes per block."""
    total = 0
    for _name, dims, ggml_type in gguf_models.SPECS[spec_name]["tensors"]:
        elements = 1
        for d in dims:
            elements *= d
        block, size = BLOCKS[ggml_type.name]
        total += elements // block * size
    return total


@pytest.mark.parametrize("name", sorted(gguf_models.SPECS))
def test_gguf_gives_the_estimates_of_the_matching_config(tmp_path, name):
    path = tmp_path / f"{name}.gguf"
    gguf_models.write(path, name, tiny=True)
    model = kvmem.Model.from_gguf(path)
    preset = kvmem.get_model(gguf_models.SPECS[name]["preset"])
    assert model.layers == preset.layers
    for engine in ("ideal", "llama.cpp"):
        for tokens, batch in ((8192, 1), (32768, 4)):
            mine = kvmem.estimate(model, engine=engine, tokens=tokens, batch=batch)
            theirs = kvmem.estimate(preset, engine=engine, tokens=tokens, batch=batch)
            assert (mine.kv_bytes, mine.state_bytes) == (theirs.kv_bytes, theirs.state_bytes), (engine, tokens)


def test_qwen3_next_linear_layers_keep_their_state(tmp_path):
    gguf_models.write(tmp_path / "q.gguf", "qwen3-next-80b-a3b")
    model = kvmem.Model.from_gguf(tmp_path / "q.gguf")
    assert model.kinds == {"full": 12, "linear": 36}
    # gated DeltaNet state per layer: 32 value heads x 128 x 128 + conv (2 x 16 x 128 + 32 x 128 = 8,192) x 3 columns
    assert model.layers[0].state.elements() == 32 * 128 * 128 + 8192 * 3


def test_llama_3_8b_and_gemma_3_numbers(tmp_path):
    llama, gemma = tmp_path / "l.gguf", tmp_path / "g.gguf"
    gguf_models.write(llama, "llama-3-8b")
    gguf_models.write(gemma, "gemma-3-27b")
    # Llama-3-8B: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B (f16) = 131,072 B per cell; 8,192 cells
    assert kvmem.estimate(str(llama), engine="llama.cpp", tokens=8192).kv_bytes == 131_072 * 8192
    # Gemma-3-27B: 10 full layers x 16 x 128 x 2 x 2 B x 8,192 cells, plus 52 SWA layers x 16 x 128 x 2 x 2 B x
    # pad256(1,024 + 512 ubatch) = 1,536 cells (llama-kv-cache-iswa.cpp)
    full, swa = 10 * 16 * 128 * 2 * 2 * 8192, 52 * 16 * 128 * 2 * 2 * 1536
    assert kvmem.estimate(str(gemma), engine="llama.cpp", tokens=8192).kv_bytes == full + swa == 1_325_400_064


@pytest.mark.parametrize("name", ["llama-3-8b", "gemma-3-27b"])
def test_weight_bytes_are_the_sum_of_the_tensors(tmp_path, name):
    tiny = gguf_models.write(tmp_path / "tiny.gguf", name, tiny=True)
    assert weights(kvmem.Model.from_gguf(tmp_path / "tiny.gguf")).total_bytes == tiny["weight_bytes"]
    real = gguf_models.write(tmp_path / "real.gguf", name, tiny=False)
    w = weights(kvmem.Model.from_gguf(tmp_path / "real.gguf"))
    assert w.source == "gguf" and w.total_bytes == real["weight_bytes"] == _by_hand(name)
    assert set(w.details["by_dtype"]) == {"Q4_K", "Q6_K", "F32"}      # a Q4_K_M file is mixed


def test_llama_3_8b_q4_k_m_weight_bytes_by_hand(tmp_path):
    gguf_models.write(tmp_path / "real.gguf", "llama-3-8b", tiny=False)
    w = weights(kvmem.Model.from_gguf(tmp_path / "real.gguf"))
    # token_embd Q4_K 4096 x 128256 / 256 x 144 B = 295,501,824; output Q6_K 4096 x 128256 / 256 x 210 = 430,940,160
    assert (w.embedding_bytes, w.lm_head_bytes) == (295_501_824, 430_940_160)
    assert w.total_bytes == 4_912_898_048                  # 4.58 GiB; the published Q4_K_M file is 4.92 GB


def test_the_reader_agrees_with_gguf_and_never_needs_the_tensor_data(tmp_path):
    path = tmp_path / "m.gguf"
    gguf_models.write(path, "gemma-3-27b", tiny=True)
    stock = gguf.GGUFReader(path)
    header = read_header(path)
    assert [(t.name, t.nbytes) for t in header.tensors] == [(t.name, int(t.n_bytes)) for t in stock.tensors]
    assert header.header_bytes == stock.data_offset
    cut = tmp_path / "cut.gguf"                        # the header alone: every tensor's data cut off
    cut.write_bytes(path.read_bytes()[: header.header_bytes])
    assert kvmem.Model.from_gguf(cut).layers == kvmem.Model.from_gguf(path).layers
    assert weights(kvmem.Model.from_gguf(cut)).total_bytes == weights(kvmem.Model.from_gguf(path)).total_bytes
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(path.read_bytes()[: header.header_bytes // 2])
    with pytest.raises(SourceError, match="ends inside its GGUF header"):
        kvmem.Model.from_gguf(broken)


def test_remote_gguf_header_by_range_requests(hub, tmp_path):
    real = gguf_models.write(tmp_path / "Meta-Llama-3-8B-Instruct.Q4_K_M.gguf", "llama-3-8b", tiny=False)
    file_bytes = real["file_bytes"]                           # 4,912,915,904 B, sparse on disk
    hub.add("bartowski/Meta-Llama-3-8B-Instruct-GGUF",
            {"Meta-Llama-3-8B-Instruct-Q4_K_M.gguf": tmp_path / "Meta-Llama-3-8B-Instruct.Q4_K_M.gguf"})
    model = kvmem.catalog.as_model("bartowski/Meta-Llama-3-8B-Instruct-GGUF/Meta-Llama-3-8B-Instruct-Q4_K_M.gguf")
    sent = hub.sent(".gguf")
    assert all(c["range"] for c in hub.calls(".gguf"))
    assert sent < file_bytes / 10_000                         # 64 KiB of a 4.9 GB file
    assert weights(model).total_bytes == real["weight_bytes"]
    assert kvmem.estimate(model, engine="llama.cpp", tokens=8192).kv_bytes == 131_072 * 8192


def test_a_big_header_is_read_in_growing_ranges(hub, tmp_path):
    """Real GGUFs carry the tokenizer in the header (MBs): the reader asks for more until it parses."""
    path = tmp_path / "big.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    gguf_models._add_metadata(writer, "llama", gguf_models.SPECS["llama-3-8b"]["metadata"])
    writer.add_token_list([f"token-{i:06d}" for i in range(40_000)])          # ~ 760 KB of header
    writer.add_tensor("token_embd.weight", gguf_models.np.zeros((4, 8), dtype=gguf_models.np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    hub.add("org/big", {"big.gguf": path})
    model = kvmem.catalog.as_model("org/big/big.gguf")
    header = read_header(path)
    assert model.num_layers == 32
    assert header.header_bytes <= hub.sent(".gguf") < 2 * header.header_bytes + (1 << 16)
    assert len(hub.calls(".gguf")) > 2                        # 64 KiB, then 64 KiB more, then 128 KiB, ...


def test_unmapped_architecture_says_what_to_do(tmp_path):
    # rwkv7: left unmapped (kvmem/sources/gguf_more.py UNMAPPED), its reason in the message
    path = tmp_path / "rwkv7.gguf"
    writer = gguf.GGUFWriter(path, "rwkv7")
    writer.add_block_count(64)
    writer.add_tensor("token_embd.weight", gguf_models.np.zeros((4, 8), dtype=gguf_models.np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(SourceError, match=r"GGUF architecture 'rwkv7' is not mapped to a kvmem model \(kvmem reads "
                                          r"no Hugging Face family of it .* Use the model's config.json"):
        kvmem.Model.from_gguf(path)


def test_cli_takes_a_gguf_path(tmp_path, capsys):
    path = tmp_path / "llama.gguf"
    real = gguf_models.write(path, "llama-3-8b", tiny=False)
    code = main(["estimate", str(path), "--tokens", "8192", "--engine", "llama.cpp", "--json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["kv_bytes"] == 131_072 * 8192
    code = main(["fit", str(path), "--gpu", "rtx-4090-24gb", "--context", "8192", "--engine", "llama.cpp"])
    out = capsys.readouterr().out
    # every layer on the GPU but token_embd (Q4_K, 128,256 x 4,096: 295,501,824 B), which llama.cpp keeps on the host
    on_gpu = real["weight_bytes"] - 128_256 * 4096 * 144 // 256
    assert f"weights from: the gguf headers' own tensors, exact, as placed: {kvmem.format_bytes(on_gpu)} on CUDA0" in out
    code = main(["estimate", str(tmp_path / "missing.gguf"), "--tokens", "8"])
    assert code == 2 and "does not exist" in capsys.readouterr().err


def test_importing_kvmem_does_not_import_gguf():
    import subprocess
    import sys
    code = "import sys, kvmem; kvmem.Model.from_gguf; print('gguf' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_a_stream_is_read_for_its_header_only(tmp_path):
    from kvmem.sources.gguf import fields_from_gguf_bytes
    path = tmp_path / "g.gguf"
    gguf_models.write(path, "gemma-3-27b", tiny=False)
    header_bytes = read_header(path).header_bytes            # 48,768 B of a 16 GB file

    class Counting:
        def __init__(self, handle):
            self.handle, self.read_bytes = handle, 0

        def read(self, n):
            data = self.handle.read(n)
            self.read_bytes += len(data)
            return data

    with open(path, "rb") as handle:
        stream = Counting(handle)
        model = kvmem.Model(**fields_from_gguf_bytes(stream, name="g.gguf"))
    assert model.count("sliding") == 52 and header_bytes <= stream.read_bytes <= max(2 * header_bytes, 1 << 16)


def test_two_uploads_named_alike_that_differ_in_tensor_types_are_two_models(tmp_path, monkeypatch):
    from kvmem.sources.gguf import fields_from_gguf_bytes
    spec = gguf_models.SPECS["llama-3-8b"]
    q6_output = [(n, dims, gguf.GGMLQuantizationType.Q6_K if n == "token_embd.weight" else t)
                 for n, dims, t in spec["tensors"]]
    monkeypatch.setitem(gguf_models.SPECS, "llama-3-8b-q6-embd", {**spec, "tensors": q6_output})
    gguf_models.write(tmp_path / "a.gguf", "llama-3-8b", tiny=False)
    gguf_models.write(tmp_path / "b.gguf", "llama-3-8b-q6-embd", tiny=False)
    with open(tmp_path / "a.gguf", "rb") as one, open(tmp_path / "b.gguf", "rb") as two:   # two uploads
        a, b = (kvmem.Model(**fields_from_gguf_bytes(data, name="model.gguf")) for data in (one, two))
    assert a.name == b.name and a.layers == b.layers and a != b and a.fingerprint != b.fingerprint
    # token_embd 4096 x 128256 elements: Q4_K 144 B per 256 -> 295,501,824 B; Q6_K 210 B per 256 -> 430,940,160 B
    assert weights(b).total_bytes - weights(a).total_bytes == 430_940_160 - 295_501_824


def test_nested_arrays_are_read_as_the_spec_allows(tmp_path):
    """Issue 32 (Low): an array of arrays (GGUF spec: an array's items may be arrays) was refused as "not a
    GGUF type"; it is read, and the header ends where gguf-py's reader says the data starts."""
    import numpy as np
    spec, path = gguf_models.SPECS["llama-3-8b"], tmp_path / "nested.gguf"
    writer = gguf.GGUFWriter(path, spec["arch"])
    gguf_models._add_metadata(writer, spec["arch"], spec["metadata"])
    nested = {"general.nested": [[1, 2], [3, 4, 5]], "general.nested_str": [["a", "b"], ["c"]],
              "general.deeper": [[[1.5], [2.5, 3.5]]]}
    for key, value in nested.items():
        writer.add_array(key, value)
    writer.add_tensor("token_embd.weight", np.zeros((2, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    header = read_header(path)
    assert {key: header.metadata[key] for key in nested} == nested
    assert header.header_bytes == gguf.GGUFReader(path).data_offset
    assert kvmem.Model.from_gguf(path).layers == kvmem.get_model("llama-3-8b").layers


def _nested_claim(depth: int, count: int = 1) -> bytes:
    """A GGUF with one key: arrays of arrays ``depth`` deep, each claiming ``count`` items."""
    def s(text):
        return len(text).to_bytes(8, "little") + text.encode()
    body = b"".join((9).to_bytes(4, "little") + count.to_bytes(8, "little") for _ in range(depth))
    arch = s("general.architecture") + (8).to_bytes(4, "little") + s("llama")
    kv = s("general.deep") + (9).to_bytes(4, "little") + body + (0).to_bytes(4, "little") + (0).to_bytes(8, "little")
    return b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (2).to_bytes(8, "little") + arch + kv


def test_nesting_and_counts_stay_bounded():
    from kvmem.sources.gguf import fields_from_gguf_bytes
    with pytest.raises(SourceError, match="'general.deep' nests arrays more than 16 deep, the most kvmem reads"):
        fields_from_gguf_bytes(_nested_claim(17), name="deep.gguf")
    with pytest.raises(SourceError, match="metadata array 'general.deep'"):   # 10^9 arrays of >= 12 bytes each
        fields_from_gguf_bytes(_nested_claim(2, count=10**9) + b"\0" * (8 << 20), name="many.gguf")
