"""The grain pipeline: packing invariants, mixtures, determinism, exact resume, multi-process sharding, errors."""

import itertools
import json
import os

import numpy as np
import pytest

from composer2_jax.data import pipeline as P
from composer2_jax.data import sources as S
from composer2_jax.data.sources import SourceConfig
from composer2_jax.data.tokenizer import ByteTokenizer

TOK = ByteTokenizer()


def _memory_spec(texts, name="mem", weight=1.0):
    """A SourceConfig whose documents are `texts`."""
    return SourceConfig(kind="source", provider=S.InMemorySource(texts, name=name), name=name, weight=weight)


def _texts(lengths, seed=0):
    """Random lowercase documents of the given lengths."""
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(list("abcdefghij"), n)) for n in lengths]


def _take(it, n):
    return [next(it) for _ in range(n)]


def _all(cfg, process_index=0, process_count=1):
    return list(P.make_dataset(cfg, TOK, process_index, process_count))


def _assert_batches_equal(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert sorted(x) == sorted(P.BATCH_KEYS)
        for k in P.BATCH_KEYS:
            np.testing.assert_array_equal(x[k], y[k], err_msg=k)


def _pieces(batches):
    """(tokens, targets, loss_mask) of every segment in stream order, checking per-row invariants on the way."""
    out = []
    for batch in batches:
        for row in range(batch["tokens"].shape[0]):
            r = {k: batch[k][row] for k in P.BATCH_KEYS}
            seg = r["segment_ids"]
            used = int((seg > 0).sum())
            assert (seg[:used] > 0).all() and (seg[used:] == 0).all(), "padding must be a suffix"
            assert seg[0] == 1 and (np.diff(seg[:used]) >= 0).all() and (np.diff(seg[:used]) <= 1).all()
            pad = slice(used, None)
            assert (r["tokens"][pad] == TOK.pad_id).all() and (r["targets"][pad] == TOK.pad_id).all()
            assert (r["loss_mask"][pad] == 0).all() and (r["positions"][pad] == 0).all()
            for s in range(1, int(seg.max()) + 1):
                idx = np.flatnonzero(seg == s)
                np.testing.assert_array_equal(r["positions"][idx], np.arange(len(idx)))
                tok, tgt = r["tokens"][idx], r["targets"][idx]
                np.testing.assert_array_equal(tgt[:-1], tok[1:])  # next token of the same document
                out.append((tok, tgt, r["loss_mask"][idx]))
    return out


def _doc_pairs(text):
    ids = [TOK.bos_id] + TOK.encode(text) + [TOK.eos_id]
    return np.asarray(ids[:-1]), np.asarray(ids[1:])


def _cfg(specs, **kw):
    kw = {"seq_len": 16, "batch_size": 1, "shuffle": False, "num_epochs": 1, **kw}
    return P.DataConfig(sources=tuple(specs), **kw)


def test_packing_keeps_every_token_and_never_crosses_documents():
    T = 16
    lengths = [0, 3, 14, 15, 16, 40, 1, 5, 9, 100, 2, 13, 7]  # pairs = len + 1: fits, exactly T, longer than T
    texts = _texts(lengths)
    pieces = _pieces(_all(_cfg([_memory_spec(texts)], seq_len=T)))
    docs = [_doc_pairs(t) for t in texts]
    # The concatenated stream of pieces is exactly the concatenated documents: nothing dropped, nothing reordered.
    np.testing.assert_array_equal(np.concatenate([p[0] for p in pieces]), np.concatenate([d[0] for d in docs]))
    np.testing.assert_array_equal(np.concatenate([p[1] for p in pieces]), np.concatenate([d[1] for d in docs]))
    assert all(p[2].all() for p in pieces)  # every text target is learned
    # Documents that fit a row stay whole; longer ones are split into <= T chunks.
    k = 0
    for tokens, _ in docs:
        n = len(tokens)
        if n <= T:
            assert len(pieces[k][0]) == n
            k += 1
        else:
            got = 0
            while got < n:
                assert len(pieces[k][0]) <= T
                got += len(pieces[k][0])
                k += 1
            assert got == n
    assert k == len(pieces)


def test_rows_close_only_when_the_next_document_does_not_fit():
    T = 16
    texts = _texts([5, 5, 5, 9, 2, 30, 4, 12, 12, 1])
    batches = _all(_cfg([_memory_spec(texts)], seq_len=T))
    pieces_per_row = [_pieces([b]) for b in batches]
    for row, nxt in zip(pieces_per_row, pieces_per_row[1:]):
        free = T - sum(len(p[0]) for p in row)
        if free:
            assert len(nxt[0][0]) > free, "a row was closed although the next piece fit"


def test_truncate_policy_keeps_the_first_seq_len_pairs():
    T = 16
    texts = _texts([40, 3, 16, 100])
    pieces = _pieces(_all(_cfg([_memory_spec(texts)], seq_len=T, long_documents="truncate")))
    assert len(pieces) == len(texts)
    for (tok, tgt, _), text in zip(pieces, texts):
        inputs, targets = _doc_pairs(text)
        np.testing.assert_array_equal(tok, inputs[:T])
        np.testing.assert_array_equal(tgt, targets[:T])


def test_batch_shapes_and_dtypes_on_the_stdlib_corpus():
    cfg = P.DataConfig(seq_len=128, batch_size=4)
    batch = next(iter(P.make_dataset(cfg, TOK)))
    for k in P.BATCH_KEYS:
        assert batch[k].shape == (4, 128) and batch[k].dtype == np.int32, k
    assert batch["tokens"].max() < TOK.vocab_size
    assert (batch["tokens"][:, 0] != TOK.pad_id).all()


def test_same_seed_same_stream_different_seed_different_stream():
    cfg = P.DataConfig(seq_len=64, batch_size=2, seed=7)
    a = _take(iter(P.make_dataset(cfg, TOK)), 3)
    b = _take(iter(P.make_dataset(cfg, TOK)), 3)
    _assert_batches_equal(a, b)
    c = _take(iter(P.make_dataset(P.data_config(None, seq_len=64, batch_size=2, seed=8), TOK)), 3)
    assert any(not np.array_equal(x["tokens"], y["tokens"]) for x, y in zip(a, c))


def test_each_epoch_is_a_new_permutation():
    spec = _memory_spec(_texts([3] * 20))
    docs = P.make_documents(_cfg([spec], shuffle=True, num_epochs=2, seed=3))
    order = [d["index"] for d in docs]
    assert len(order) == 40
    first, second = order[:20], order[20:]
    assert sorted(first) == sorted(second) == list(range(20))
    assert first != second and first != list(range(20))


def test_mixture_proportions():
    specs = [_memory_spec(_texts([4] * n, seed=n), name=f"m{n}", weight=w)
             for n, w in ((50, 0.5), (30, 0.3), (7, 0.2))]
    docs = P.make_documents(_cfg(specs, shuffle=True, num_epochs=None, seed=1))
    counts = {}
    for d in itertools.islice(docs, 3000):
        counts[d["source"]] = counts.get(d["source"], 0) + 1
    for name, w in (("m50", 0.5), ("m30", 0.3), ("m7", 0.2)):
        assert abs(counts[name] / 3000 - w) < 0.01, counts
    # Deterministic given the seed.
    again = P.make_documents(_cfg(specs, shuffle=True, num_epochs=None, seed=1))
    assert [d["text"] for d in itertools.islice(again, 200)] == [d["text"] for d in itertools.islice(docs, 200)]


def _find_offsets(state):
    """All packer offsets inside a (nested) iterator state."""
    if isinstance(state, dict):
        return [v for k, v in state.items() if k == "offset"] + [o for v in state.values() for o in _find_offsets(v)]
    return []


@pytest.mark.parametrize("num_threads, prefetch_batches", [(0, 0), (2, 2)])
def test_resume_continues_the_exact_stream(num_threads, prefetch_batches):
    cfg = P.DataConfig(seq_len=64, batch_size=2, seed=5, num_threads=num_threads, prefetch_batches=prefetch_batches)
    it = iter(P.make_dataset(cfg, TOK))
    _take(it, 3)
    state = json.loads(json.dumps(it.get_state()))  # JSON-serialisable
    assert any(o > 0 for o in _find_offsets(state)), "expected a state in the middle of a split document"
    expected = _take(it, 4)
    resumed = P.make_iterator(cfg, TOK, state=state)
    _assert_batches_equal(_take(resumed, 4), expected)


def test_resume_of_a_mixture_with_chat(tmp_path):
    chat = {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}
    (tmp_path / "chat.jsonl").write_text("\n".join(json.dumps(chat) for _ in range(5)))
    specs = (SourceConfig(weight=2.0), _memory_spec(_texts([30] * 9), weight=1.0),
             SourceConfig(kind="chat_jsonl", path=str(tmp_path / "chat.jsonl"), weight=1.0))
    cfg = P.DataConfig(sources=specs, seq_len=48, batch_size=2, seed=2, num_threads=2)
    it = iter(P.make_dataset(cfg, TOK))
    _take(it, 5)
    path = tmp_path / "state.json"
    P.save_state(it, path)
    expected = _take(it, 6)
    _assert_batches_equal(_take(P.load_state(iter(P.make_dataset(cfg, TOK)), path), 6), expected)


def test_orbax_checkpoint_round_trip(tmp_path):
    ocp = pytest.importorskip("orbax.checkpoint")
    cfg = P.DataConfig(seq_len=32, batch_size=2, seed=4)
    it = iter(P.make_dataset(cfg, TOK))
    _take(it, 2)
    mngr = ocp.CheckpointManager(tmp_path / "ckpt")
    mngr.save(2, args=ocp.args.Composite(data=P.orbax_save_args(it)))
    mngr.wait_until_finished()
    expected = _take(it, 3)
    fresh = iter(P.make_dataset(cfg, TOK))
    mngr.restore(2, args=ocp.args.Composite(data=P.orbax_restore_args(fresh)))
    _assert_batches_equal(_take(fresh, 3), expected)
    mngr.close()


def test_process_shards_are_disjoint_and_cover_the_documents():
    spec = _memory_spec(_texts([2] * 10))
    shards = [[d["index"] for d in P.make_documents(_cfg([spec], batch_size=3, shuffle=True), p, 3)]
              for p in range(3)]
    assert sorted(itertools.chain(*shards)) == list(range(10))
    for a, b in itertools.combinations(shards, 2):
        assert not set(a) & set(b)


def test_process_batches_together_hold_every_token_once():
    texts = _texts([5, 9, 20, 3, 33, 7, 1, 12, 18, 2, 6])
    cfg = _cfg([_memory_spec(texts)], batch_size=2, shuffle=True, seq_len=8)
    learned = np.zeros(TOK.vocab_size, np.int64)
    for p in range(2):
        for batch in _all(cfg, p, 2):
            assert batch["tokens"].shape == (1, 8)
            learned += np.bincount(batch["targets"][batch["loss_mask"] > 0], minlength=TOK.vocab_size)
    expected = np.bincount(np.concatenate([_doc_pairs(t)[1] for t in texts]), minlength=TOK.vocab_size)
    np.testing.assert_array_equal(learned, expected)


def test_config_errors(tmp_path):
    with pytest.raises(ValueError, match="seq_len must be an int > 1"):
        P.DataConfig(seq_len=1)
    with pytest.raises(ValueError, match="batch_size=6 is not divisible by process_count=4"):
        P.make_dataset(P.DataConfig(batch_size=6), TOK, 0, 4)
    with pytest.raises(ValueError, match="process_index=2"):
        P.make_dataset(P.DataConfig(batch_size=2), TOK, 2, 2)
    with pytest.raises(ValueError, match="unknown source kind 'web'"):
        P.data_config({"sources": [{"kind": "web", "path": "x"}]})
    with pytest.raises(ValueError, match="unknown config key .data.seq_length.*did you mean .seq_len."):
        P.data_config(None, seq_length=4)
    with pytest.raises(ValueError, match="long_documents"):
        P.DataConfig(long_documents="drop")
    with pytest.raises(ValueError, match=str(tmp_path)):
        P.make_dataset(P.DataConfig(sources=(SourceConfig(kind="directory", path=str(tmp_path)),)), TOK)
    with pytest.raises(ValueError, match="fewer than process_count"):
        P.make_dataset(_cfg([_memory_spec(["one doc"])], batch_size=2), TOK, 0, 2)


def test_base_config_builds():
    cfg = P.data_config()
    assert cfg == P.DataConfig()
    assert cfg.sources[0].kind == "stdlib"


# ------------------------------------------------------------------------------------------------ mixtures as data


def test_mixture_file_is_the_same_as_sources_in_code(tmp_path, monkeypatch):
    """A JSON mixture (relative paths, $VARS) gives the same batches as the SourceConfigs written in code."""
    (tmp_path / "corpus").mkdir()
    for n, name in ((7, "a"), (11, "b")):
        (tmp_path / "corpus" / f"{name}.jsonl").write_text(
            "\n".join(json.dumps({"body": t}) for t in _texts([9 + n] * n, seed=n)))
    monkeypatch.setenv("CORPUS_ROOT", str(tmp_path / "corpus"))
    mix = [{"kind": "jsonl", "path": "corpus/a.jsonl", "field": "body", "weight": 3},
           {"kind": "jsonl", "path": "${CORPUS_ROOT}/b.jsonl", "field": "body", "weight": 1.0, "name": "b"}]
    (tmp_path / "mix.json").write_text(json.dumps({"description": "test", "sources": mix}))
    in_code = (SourceConfig(kind="jsonl", path=str(tmp_path / "corpus" / "a.jsonl"), field="body", weight=3.0),
               SourceConfig(kind="jsonl", path=str(tmp_path / "corpus" / "b.jsonl"), field="body", name="b"))
    from_file = P.data_config({"mixture": str(tmp_path / "mix.json")}, seq_len=32, batch_size=2, seed=3)
    assert from_file.components() == in_code
    _assert_batches_equal(_take(iter(P.make_dataset(from_file, TOK)), 5),
                          _take(iter(P.make_dataset(P.DataConfig(sources=in_code, seq_len=32, batch_size=2, seed=3),
                                                    TOK)), 5))
    (tmp_path / "list.json").write_text(json.dumps(mix))  # a bare list is a mixture too
    assert P.DataConfig(mixture=str(tmp_path / "list.json")).components() == in_code
    # and so is a list of dicts in the ConfigDict (data.sources)
    assert P.data_config({"sources": [dict(s, path=str(tmp_path / "corpus" / os.path.basename(s["path"])))
                                      for s in mix]}).components() == in_code


def test_mixture_errors_name_the_file_and_the_entry(tmp_path):
    with pytest.raises(ValueError, match=r"data.mixture='nope.json': no such file"):
        P.DataConfig(mixture="nope.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"cannot read .*bad.json as JSON"):
        P.DataConfig(mixture=str(tmp_path / "bad.json"))
    (tmp_path / "key.json").write_text(json.dumps([{"kind": "stdlib"}, {"kind": "jsonl", "path": "x", "wieght": 2}]))
    with pytest.raises(ValueError, match=r"key.json sources\[1\].wieght.*did you mean 'weight'"):
        P.DataConfig(mixture=str(tmp_path / "key.json"))
    (tmp_path / "top.json").write_text(json.dumps({"source": []}))
    with pytest.raises(ValueError, match=r"unknown top-level keys \['source'\]"):
        P.DataConfig(mixture=str(tmp_path / "top.json"))
    (tmp_path / "ok.json").write_text(json.dumps([{"kind": "stdlib"}]))
    with pytest.raises(ValueError, match="are both set"):
        P.DataConfig(mixture=str(tmp_path / "ok.json"), sources=(SourceConfig(kind="jsonl", path="x"),))
    (tmp_path / "unset.json").write_text(json.dumps([{"kind": "parquet", "path": "${NO_SUCH_VAR_X}/*.parquet"}]))
    with pytest.raises(ValueError, match=r"no files match '\$\{NO_SUCH_VAR_X\}/\*.parquet' \(an environment var"):
        P.make_dataset(P.DataConfig(mixture=str(tmp_path / "unset.json")), TOK)


def test_cpt_bulk_mixtures_are_data():
    """The bulk stage's mix is a JSON file: code-dominated at scale; on one machine, the stream of before."""
    from experiments import cpt_bulk

    big = P.data_config(cpt_bulk.get_config("kimi_k2_5").data)
    comps = big.components()
    assert big.mixture.endswith("cpt_bulk.json") and len(comps) > 3
    code = sum(s.weight for s in comps if s.label.startswith("code/")) / sum(s.weight for s in comps)
    assert code > 0.5, code
    toy = P.data_config(cpt_bulk.get_config("toy").data)
    assert toy.mixture.endswith("cpt_bulk_local.json") and toy.components() == (SourceConfig(),)
    default = P.DataConfig(seq_len=toy.seq_len, batch_size=toy.batch_size)
    _assert_batches_equal(_take(iter(P.make_dataset(toy, TOK)), 2), _take(iter(P.make_dataset(default, TOK)), 2))
