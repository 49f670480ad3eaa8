"""seqio bridge: a tiny seqio.Task over an in-memory tf.data source feeds the same packer."""

import itertools

import numpy as np
import pytest

seqio = pytest.importorskip("seqio")
tf = pytest.importorskip("tensorflow")

from composer2_jax.data import pipeline as P  # noqa: E402
from composer2_jax.data import seqio_bridge as B  # noqa: E402
from composer2_jax.data.sources import SourceConfig  # noqa: E402
from composer2_jax.data.tokenizer import ByteTokenizer  # noqa: E402

TOK = ByteTokenizer()
TEXTS = [f"document {i}: " + "ab" * i for i in range(12)]


def _source(feature="targets", values=TEXTS):
    """A seqio FunctionDataSource over an in-memory tf.data dataset of `values` under `feature`."""
    def dataset_fn(split, shuffle_files, seed=None):
        return tf.data.Dataset.from_tensor_slices({feature: values})

    return seqio.FunctionDataSource(dataset_fn, splits=["train"])


def _features(feature="targets", dtype=tf.string, rank=0):
    """One passthrough-vocabulary output feature."""
    return {feature: seqio.Feature(seqio.PassThroughVocabulary(size=0), add_eos=False, dtype=dtype, rank=rank)}


def _task(name, feature="targets", values=TEXTS, dtype=tf.string, rank=0):
    """An unregistered seqio.Task with no preprocessors."""
    return seqio.Task(name, source=_source(feature, values), output_features=_features(feature, dtype, rank),
                      preprocessors=[])


@pytest.fixture(scope="module")
def registered():
    name = "composer2_test_data_seqio_task"
    seqio.TaskRegistry.add(name, source=_source("text"), output_features=_features("text"), preprocessors=[])
    yield name
    seqio.TaskRegistry.remove(name)


def test_documents_from_a_task_object():
    docs = list(B.SeqioDocuments(_task("obj_task"), shuffle=False, num_epochs=1))
    assert [d["text"] for d in docs] == TEXTS
    assert docs[3] == {"text": TEXTS[3], "source": "seqio:obj_task", "index": 3}


def test_documents_from_a_registered_name(registered):
    docs = list(B.SeqioDocuments(registered, shuffle=False, num_epochs=1))
    assert [d["text"] for d in docs] == TEXTS
    with pytest.raises(ValueError, match="no registered task or mixture named 'missing_task'"):
        B.SeqioDocuments("missing_task")


def test_process_shards_are_disjoint_and_cover():
    task = _task("shard_task")
    shards = [[d["text"] for d in B.SeqioDocuments(task, seed=3, num_epochs=1, shard=B.ProcessShard(p, 3))]
              for p in range(3)]
    assert sorted(itertools.chain(*shards)) == sorted(TEXTS)
    for a, b in itertools.combinations(shards, 2):
        assert not set(a) & set(b)


def test_a_process_shard_out_of_range_is_refused():
    with pytest.raises(ValueError, match=r"process shard 3 of 3; expected 0 <= index < count"):
        B.SeqioDocuments(_task("bad_shard_task"), shard=B.ProcessShard(3, 3))


def test_pipeline_batches_and_exact_resume():
    spec = SourceConfig(kind="seqio", provider=_task("pipe_task"))
    cfg = P.DataConfig(sources=(spec,), seq_len=16, batch_size=2, seed=1)
    it = iter(P.make_dataset(cfg, TOK))
    first = [next(it) for _ in range(3)]
    assert first[0]["tokens"].shape == (2, 16) and first[0]["tokens"][0, 0] == TOK.bos_id
    state = it.get_state()
    expected = [next(it) for _ in range(4)]
    resumed = P.make_iterator(cfg, TOK, state=state)
    for a, b in zip([next(resumed) for _ in range(4)], expected):
        for k in P.BATCH_KEYS:
            np.testing.assert_array_equal(a[k], b[k])
    # The streamed documents are the task's texts, tokenized and packed.
    stream = TOK.decode(np.concatenate([b["tokens"][b["segment_ids"] > 0] for b in first]))
    assert any(t[:10] in stream for t in TEXTS)


def test_mixture_with_a_random_access_source():
    spec = SourceConfig(kind="seqio", provider=_task("mix_task"), weight=1.0)
    cfg = P.DataConfig(sources=(spec, SourceConfig(weight=1.0)), seq_len=32, batch_size=1, seed=0)
    docs = list(itertools.islice(P.make_documents(cfg), 20))
    assert {d["source"] for d in docs} == {"seqio:mix_task", "stdlib"}


def test_token_id_features_are_refused():
    task = _task("ids_task", values=[[1, 2, 3]], dtype=tf.int32, rank=1)
    with pytest.raises(ValueError, match="not text"):
        next(iter(B.SeqioDocuments(task, shuffle=False, num_epochs=1)))


def test_documents_from_a_mixture():
    other = [f"other {i}" for i in range(12)]
    mix = seqio.Mixture("composer2_test_mix", [(_task("mix_a"), 1.0), (_task("mix_b", values=other), 1.0)],
                        default_rate=None)
    docs = [d["text"] for d in itertools.islice(B.SeqioDocuments(mix, seed=0, num_epochs=None), 40)]
    assert set(docs) <= set(TEXTS) | set(other)
    assert set(docs) & set(TEXTS) and set(docs) & set(other)
    again = [d["text"] for d in itertools.islice(B.SeqioDocuments(mix, seed=0, num_epochs=None), 40)]
    assert again == docs
