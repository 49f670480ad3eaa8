"""The tokenize-once cache: identical batches cold, warm and resumed; keys; one writer among processes; atomicity."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from composer2_jax.data import pipeline as P
from composer2_jax.data import sources as S
from composer2_jax.data import token_cache as TC
from composer2_jax.data.sources import SourceConfig
from composer2_jax.data.tokenizer import ByteTokenizer


class CountingTokenizer(ByteTokenizer):
    """A byte tokenizer that counts the texts it encodes (the fingerprint's probe excepted)."""

    encoded = 0

    def encode_np(self, text):
        if text != TC.PROBE:
            type(self).encoded += 1
        return super().encode_np(text)

    def encode(self, text, **kw):
        type(self).encoded += 1
        return super().encode(text, **kw)


def _texts(lengths, seed=0):
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(list("abcdefghij \n"), n)) for n in lengths]


def _take(it, n):
    return [next(it) for _ in range(n)]


def _assert_batches_equal(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for k in P.BATCH_KEYS:
            np.testing.assert_array_equal(x[k], y[k], err_msg=k)


def _offsets(state):
    """All packer offsets inside a (nested) iterator state."""
    if isinstance(state, dict):
        return [v for k, v in state.items() if k == "offset"] + [o for v in state.values() for o in _offsets(v)]
    return []


def _corpus(tmp_path):
    """A mixture of cacheable kinds: jsonl text, an HF dataset directory, chat jsonl, parquet, in-memory."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    texts = _texts(rng.integers(0, 150, 40), seed=1)
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in texts))
    chats = [{"messages": [{"role": "user", "content": t[:20]}, {"role": "assistant", "content": t[20:60]}]}
             for t in _texts([70] * 9, seed=2)]
    (tmp_path / "c.jsonl").write_text("\n".join(json.dumps(c) for c in chats))
    pq.write_table(pa.table({"content": _texts(rng.integers(1, 300, 25), seed=3)}), str(tmp_path / "p.parquet"),
                   row_group_size=7)
    hf = tmp_path / "hf"  # a save_to_disk directory (written with pyarrow: the same IPC stream + state.json)
    hf.mkdir()
    table = pa.table({"text": _texts(rng.integers(0, 90, 12), seed=5)})
    with pa.OSFile(str(hf / "data-00000-of-00001.arrow"), "wb") as f, pa.ipc.new_stream(f, table.schema) as w:
        w.write_table(table, max_chunksize=5)
    (hf / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    return (SourceConfig(kind="jsonl", path=str(tmp_path / "a.jsonl"), weight=2.0),
            SourceConfig(kind="hf_dataset", path=str(hf), weight=0.5),
            SourceConfig(kind="chat_jsonl", path=str(tmp_path / "c.jsonl"), weight=1.0),
            SourceConfig(kind="parquet", path=str(tmp_path / "p.parquet"), field="content", weight=1.5),
            SourceConfig(kind="source", provider=S.InMemorySource(_texts([33] * 6, seed=4), name="mem"), name="mem"))


@pytest.mark.parametrize("num_threads, prefetch_batches", [(0, 0), (2, 2)])
def test_batches_identical_cold_warm_and_resumed(tmp_path, num_threads, prefetch_batches):
    specs = _corpus(tmp_path)
    tok = CountingTokenizer()
    kw = dict(sources=specs, seq_len=48, batch_size=2, seed=9, num_epochs=3, num_threads=num_threads,
              prefetch_batches=prefetch_batches)
    off = P.DataConfig(**kw)
    on = P.DataConfig(**kw, token_cache=str(tmp_path / "cache"))
    it = iter(P.make_dataset(off, tok))
    head = _take(it, 7)
    state = json.loads(json.dumps(it.get_state()))  # mid-stream, inside a split document
    assert any(o > 0 for o in _offsets(state)), "expected a state in the middle of a split document"
    reference = head + list(it)  # the whole (finite) stream without the cache
    assert len(reference) > 20

    CountingTokenizer.encoded = 0
    cold = list(P.make_dataset(on, tok))  # builds the caches (tokenizes every document once)
    built = CountingTokenizer.encoded
    assert built > 0
    _assert_batches_equal(cold, reference)
    assert len(os.listdir(tmp_path / "cache" / os.listdir(tmp_path / "cache")[0])) == 2 * len(specs)  # + locks

    CountingTokenizer.encoded = 0
    warm = iter(P.make_dataset(on, tok))
    _assert_batches_equal(_take(warm, 7), head)
    cached_state = json.loads(json.dumps(warm.get_state()))
    assert cached_state == state  # the iterator state does not depend on the cache
    _assert_batches_equal(list(warm), reference[7:])
    assert CountingTokenizer.encoded == 0, "a warm cache must not tokenize"

    # resume a no-cache checkpoint with the cache, and a cached one without it
    _assert_batches_equal(list(P.make_iterator(on, tok, state=state)), reference[7:])
    _assert_batches_equal(list(P.make_iterator(off, tok, state=cached_state)), reference[7:])


def test_cache_on_the_stdlib_corpus_and_across_processes(tmp_path):
    """Every process of a multi-process run reads the one cache; its shards equal the no-cache shards."""
    tok = ByteTokenizer()
    kw = dict(seq_len=64, batch_size=2, seed=3)
    for p in range(2):
        off = _take(iter(P.make_dataset(P.DataConfig(**kw), tok, p, 2)), 4)
        on = _take(iter(P.make_dataset(P.DataConfig(**kw, token_cache=str(tmp_path)), tok, p, 2)), 4)
        _assert_batches_equal(on, off)
    (tok_dir,) = os.listdir(tmp_path)
    dirs = [d for d in os.listdir(tmp_path / tok_dir) if not d.endswith(".lock")]
    assert len(dirs) == 1 and dirs[0].startswith("stdlib-")  # one cache, built once, shared by both processes
    meta = json.loads((tmp_path / tok_dir / dirs[0] / "meta.json").read_text())
    assert meta["num_docs"] == len(S.stdlib_source()) and meta["num_tokens"] > 1e6


def test_records_round_trip():
    for ids, learn in [([5, 6, 7], [0, 1, 1]), ([1, 2], [1, 1]), ([9], [0]), ([], []),
                       ([3, 4, 5, 6], [0, 0, 1, 0])]:
        got = TC.decode_record(TC.encode_record(np.asarray(ids, np.int32), np.asarray(learn, np.int32)))
        assert got[0].tolist() == ids and got[1].tolist() == learn
        assert got[0].dtype == got[1].dtype == np.int32
    assert len(TC.encode_record(np.arange(10), np.ones(10))) == 8 + 40  # text: no per-token flags stored
    assert len(TC.encode_record(np.arange(10), np.arange(10) % 2)) == 8 + 40 + 10


def test_key_follows_tokenizer_source_and_options(tmp_path):
    (tmp_path / "a.jsonl").write_text(json.dumps({"text": "hello"}) + "\n")
    spec = SourceConfig(kind="jsonl", path=str(tmp_path / "a.jsonl"))
    opts = {"add_bos": True, "add_eos": True}
    tok = ByteTokenizer()
    base, inputs = TC.cache_path(str(tmp_path / "c"), spec, tok, opts)
    assert TC.cache_path(str(tmp_path / "c"), spec, ByteTokenizer(), opts)[0] == base  # deterministic
    assert inputs["source"]["files"][0][0] == str(tmp_path / "a.jsonl")
    other_tok = ByteTokenizer(specials=("<|bos|>", "<|eos|>", "<|pad|>", "<|x|>"))
    assert TC.cache_path(str(tmp_path / "c"), spec, other_tok, opts)[0] != base
    assert TC.cache_path(str(tmp_path / "c"), spec, tok, dict(opts, add_bos=False))[0] != base
    assert TC.cache_path(str(tmp_path / "c"), SourceConfig(kind="jsonl", path=spec.path, field="body"), tok,
                         opts)[0] != base
    # tiktoken tokenizers: a different merge table is a different key, even where the probe encodes the same
    from composer2_jax.data import tokenizer as tk

    names = (tk.BOS, tk.EOS, tk.PAD) + tk.CHAT_SPECIAL_TOKENS
    bpe = []
    for merge in (b"xq", b"qx"):
        ranks = {**{bytes([b]): b for b in range(256)}, merge: 256}
        bpe.append(tk.TiktokenTokenizer(ranks, {n: 257 + i for i, n in enumerate(names)}, bos=tk.BOS, eos=tk.EOS,
                                        pad=tk.PAD))
    fps = [TC.tokenizer_fingerprint(t) for t in bpe]
    assert fps[0]["probe_sha256"] == fps[1]["probe_sha256"] and fps[0]["ranks_sha256"] != fps[1]["ranks_sha256"]
    assert len({TC.cache_path(str(tmp_path / "c"), spec, t, opts)[0] for t in bpe} | {base}) == 3
    (tmp_path / "a.jsonl").write_text(json.dumps({"text": "hello!"}) + "\n")  # the file changed
    assert TC.cache_path(str(tmp_path / "c"), spec, tok, opts)[0] != base


def test_a_changed_source_is_tokenized_again(tmp_path):
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in ["one", "two"]))
    cfg = P.DataConfig(sources=(SourceConfig(kind="jsonl", path=str(tmp_path / "a.jsonl")),), seq_len=8,
                       batch_size=1, shuffle=False, num_epochs=1, token_cache=str(tmp_path / "cache"))
    first = list(P.make_dataset(cfg, ByteTokenizer()))
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in ["uno", "dos", "tres"]))
    second = list(P.make_dataset(cfg, ByteTokenizer()))
    expected = list(P.make_dataset(P.DataConfig(**{**cfg.__dict__, "token_cache": ""}), ByteTokenizer()))
    _assert_batches_equal(second, expected)
    assert len(second) > len(first)


_WORKER = textwrap.dedent("""
    import glob, hashlib, json, logging, os, sys, time
    from composer2_jax.data import token_cache as TC
    from composer2_jax.data.pipeline import DataConfig, document_ids
    from composer2_jax.data.sources import SourceConfig
    from composer2_jax.data.tokenizer import ByteTokenizer

    path, root, ready = sys.argv[1], sys.argv[2], sys.argv[3]
    tok, cfg = ByteTokenizer(), DataConfig()
    logging.basicConfig(level=logging.INFO, force=True)
    open(os.path.join(ready, str(os.getpid())), "w").close()
    while len(glob.glob(os.path.join(ready, "*"))) < 3:  # start together
        time.sleep(0.01)

    def slow(doc):
        time.sleep(0.02)  # a slow tokenizer: the builds would overlap without the lock
        return document_ids(doc, tok, cfg)

    src, built = TC.open_or_build(SourceConfig(kind="jsonl", path=path), root, tok, slow, {"b": 1})
    h = hashlib.sha256(b"".join(src[i]["ids"].tobytes() for i in range(len(src)))).hexdigest()
    print(json.dumps({"built": built, "digest": h, "n": len(src)}))
""")


def test_concurrent_processes_one_writer_the_others_wait_and_read(tmp_path):
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in _texts([50] * 60)))
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    (tmp_path / "ready").mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(tmp_path / "a.jsonl"), str(tmp_path / "cache"),
                               str(tmp_path / "ready")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(3)]
    outs, waited = [], 0
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
        waited += "waiting for another process building" in err
    assert sorted(o["built"] for o in outs) == [False, False, True]
    assert waited == 2  # the two others blocked on the builder's lock, then read its cache
    assert len({o["digest"] for o in outs}) == 1 and outs[0]["n"] == 60
    (tok_dir,) = os.listdir(tmp_path / "cache")
    assert not [d for d in os.listdir(tmp_path / "cache" / tok_dir) if ".partial" in d]


def test_a_half_written_cache_is_never_read(tmp_path):
    texts = _texts([20] * 30)
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in texts))
    spec = SourceConfig(kind="jsonl", path=str(tmp_path / "a.jsonl"))
    tok, cfg, opts = ByteTokenizer(), P.DataConfig(), {"add_bos": True, "add_eos": True}
    calls = []

    def failing(doc):
        calls.append(1)
        if len(calls) == 17:
            raise RuntimeError("killed mid-build")
        return P.document_ids(doc, tok, cfg)

    with pytest.raises(RuntimeError, match="killed mid-build"):
        TC.open_or_build(spec, str(tmp_path / "c"), tok, failing, opts)
    final, _ = TC.cache_path(str(tmp_path / "c"), spec, tok, opts)
    assert not os.path.exists(final) and not [d for d in os.listdir(os.path.dirname(final)) if ".partial" in d]
    # a builder killed without cleaning up leaves a .partial directory: it is never read, and removed
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    import socket

    stale = f"{final}.partial-{socket.gethostname()}-{int(dead.stdout)}-deadbeef"
    os.makedirs(stale)
    (tmp_path / "junk").write_text("x")
    os.replace(tmp_path / "junk", os.path.join(stale, "meta.json"))
    src, built = TC.open_or_build(spec, str(tmp_path / "c"), tok, lambda d: P.document_ids(d, tok, cfg), opts)
    assert built and not os.path.exists(stale) and len(src) == 30
    assert src[3]["ids"].tolist() == P.document_ids({"text": texts[3]}, tok, cfg)[0].tolist()
    # a complete cache that was damaged afterwards fails naming the directory
    os.remove(os.path.join(final, src.meta["files"][0]))
    with pytest.raises(ValueError, match=f"token cache {final}: files .* are missing"):
        TC.open_or_build(spec, str(tmp_path / "c"), tok, failing, opts)


def test_token_cache_config_errors():
    with pytest.raises(ValueError, match="data.token_cache must be a directory path"):
        P.DataConfig(token_cache=None)


def test_warm_token_cache_builds_ahead(tmp_path):
    specs = _corpus(tmp_path)
    cfg = P.DataConfig(sources=specs, seq_len=32, batch_size=2, token_cache=str(tmp_path / "cache"))
    tok = CountingTokenizer()
    paths = P.warm_token_cache(cfg, tok)
    assert len(paths) == len(specs) and all(os.path.isfile(os.path.join(p, "meta.json")) for p in paths)
    assert P.warm_token_cache(cfg, tok) == paths  # found, not rebuilt
    CountingTokenizer.encoded = 0
    _take(iter(P.make_dataset(cfg, tok)), 3)
    assert CountingTokenizer.encoded == 0
    with pytest.raises(ValueError, match="token_cache is '' \\(off\\)"):
        P.warm_token_cache(P.DataConfig(), tok)
