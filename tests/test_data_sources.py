"""Document sources: the stdlib corpus, local directories, JSONL, ArrayRecord, and start-up errors."""

import ast
import json
import os

import pytest

from composer2_jax.data import sources as S


@pytest.fixture(scope="module")
def stdlib():
    return S.stdlib_source()


def test_stdlib_corpus_is_python_source(stdlib):
    assert len(stdlib) > 500, stdlib
    paths = [stdlib._paths[i] for i in range(len(stdlib))]
    assert paths == sorted(paths)
    assert not any("site-packages" in p or "__pycache__" in p for p in paths)
    assert "os.py" in paths and "json/__init__.py" in paths
    doc = stdlib[paths.index("os.py")]
    assert set(doc) >= {"text", "path", "source", "index"}
    assert doc["path"] == "os.py" and doc["source"] == "stdlib"
    ast.parse(doc["text"])  # it is Python
    assert "def " in stdlib[len(stdlib) // 2]["text"] or "import" in stdlib[len(stdlib) // 2]["text"]


def test_stdlib_order_is_deterministic(stdlib):
    again = S.stdlib_source()
    assert len(again) == len(stdlib) and again._paths == stdlib._paths
    assert again.skipped == stdlib.skipped


def test_directory_skips_and_counts_bad_files(tmp_path):
    (tmp_path / "b.py").write_text("print('b')\n")
    (tmp_path / "a.py").write_text("x = 'é'\n", encoding="utf-8")
    (tmp_path / "latin1.py").write_bytes("x = 'é'\n".encode("latin-1"))
    (tmp_path / "blob.py").write_bytes(b"\x00\x01\x02")
    (tmp_path / "empty.py").write_text("  \n")
    (tmp_path / "notes.txt").write_text("not matched")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "c.py").write_text("c = 1\n")
    (tmp_path / "site-packages").mkdir()
    (tmp_path / "site-packages" / "dep.py").write_text("dep = 1\n")
    src = S.DirectorySource(str(tmp_path), "*.py")
    assert [src[i]["path"] for i in range(len(src))] == ["a.py", "b.py", os.path.join("pkg", "c.py")]
    assert src[0]["text"] == "x = 'é'\n"
    assert src.skipped == {"non_utf8": 1, "binary": 1, "empty": 1} and src.num_skipped == 3


def test_empty_sources_fail_at_start_naming_the_path(tmp_path):
    with pytest.raises(ValueError, match=str(tmp_path)):
        S.DirectorySource(str(tmp_path), "*.py")
    with pytest.raises(ValueError, match="not a directory"):
        S.DirectorySource(str(tmp_path / "missing"))
    pattern = str(tmp_path / "*.jsonl")
    with pytest.raises(ValueError, match="no files match"):
        S.JsonlSource(pattern)
    (tmp_path / "blank.jsonl").write_text("\n \n")
    with pytest.raises(ValueError, match="hold no records"):
        S.JsonlSource(pattern)
    with pytest.raises(ValueError, match="no files match"):
        S.ArrayRecordSource(str(tmp_path / "*.array_record"))
    with pytest.raises(ValueError, match="empty"):
        S.InMemorySource([])


def test_jsonl_text_field(tmp_path):
    lines = [json.dumps({"body": f"doc {i}", "id": i}) for i in range(5)]
    (tmp_path / "a.jsonl").write_text("\n".join(lines[:3]) + "\n\n")
    (tmp_path / "b.jsonl").write_text("\n".join(lines[3:]))  # no trailing newline
    src = S.JsonlSource(str(tmp_path / "*.jsonl"), field="body")
    assert len(src) == 5
    assert [src[i]["text"] for i in range(5)] == [f"doc {i}" for i in range(5)]
    assert src[4]["path"].endswith("b.jsonl")
    with pytest.raises(ValueError, match="field 'text'"):
        S.JsonlSource(str(tmp_path / "a.jsonl"))[0]


def test_jsonl_chat_records(tmp_path):
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    (tmp_path / "c.jsonl").write_text(json.dumps({"messages": msgs, "tools": [{"name": "ls"}]}) + "\n")
    doc = S.make_source(S.SourceConfig(kind="chat_jsonl", path=str(tmp_path / "c.jsonl")))[0]
    assert doc["messages"] == msgs and doc["tools"] == [{"name": "ls"}]


def test_array_record_text_and_json(tmp_path):
    from array_record.python.array_record_module import ArrayRecordWriter

    texts = ["alpha", "βeta", "gamma\n"]
    w = ArrayRecordWriter(str(tmp_path / "t.array_record"), "group_size:1")
    for t in texts:
        w.write(t.encode("utf-8"))
    w.close()
    w = ArrayRecordWriter(str(tmp_path / "j.array_record"), "group_size:1")
    for t in texts:
        w.write(json.dumps({"content": t}).encode())
    w.close()
    src = S.make_source(S.SourceConfig(kind="array_record", path=str(tmp_path / "t.array_record")))
    assert [src[i]["text"] for i in range(len(src))] == texts
    src = S.ArrayRecordSource(str(tmp_path / "j.array_record"), "json", field="content")
    assert [src[i]["text"] for i in range(len(src))] == texts
    with pytest.raises(ValueError, match="record_format"):
        S.ArrayRecordSource(str(tmp_path / "j.array_record"), "parquet")


def test_source_config_errors():
    with pytest.raises(ValueError, match="unknown source kind 'hdfs'"):
        S.SourceConfig(kind="hdfs", path="x")
    with pytest.raises(ValueError, match="needs a path"):
        S.SourceConfig(kind="jsonl")
    with pytest.raises(ValueError, match="weight"):
        S.SourceConfig(weight=0.0)


def test_custom_source_kind():
    src = S.InMemorySource(["a", {"text": "b", "lang": "x"}], name="m")
    assert S.make_source(S.SourceConfig(kind="source", provider=src)) is src
    assert src[1] == {"text": "b", "lang": "x", "source": "m", "index": 1}
    with pytest.raises(ValueError, match="needs provider"):
        S.SourceConfig(kind="source")


# ------------------------------------------------------------------------------------------ parquet, hf datasets


def _write_parquet(path, columns, row_group_size):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(columns), str(path), row_group_size=row_group_size)


def test_parquet_text_rows_across_files_and_row_groups(tmp_path):
    import pyarrow.parquet as pq

    texts = [f"def f{i}():\n    return {i}\n" for i in range(23)]
    _write_parquet(tmp_path / "a.parquet", {"content": texts[:10], "id": list(range(10))}, row_group_size=4)
    _write_parquet(tmp_path / "b.parquet", {"content": texts[10:], "id": list(range(10, 23))}, row_group_size=5)
    assert pq.ParquetFile(str(tmp_path / "a.parquet")).metadata.num_row_groups == 3
    src = S.make_source(S.SourceConfig(kind="parquet", path=str(tmp_path / "*.parquet"), field="content"))
    assert isinstance(src, S.ParquetSource) and len(src) == 23
    order = [22, 0, 5, 13, 9, 10, 3, 17]  # random access in any order
    assert [src[i]["text"] for i in order] == [texts[i] for i in order]
    assert [src[i]["text"] for i in range(23)] == texts
    assert src[12]["path"].endswith("b.parquet") and src[12]["index"] == 12
    assert len(src._rows._cache) <= src._rows.cache_parts  # row groups are read one at a time, a few kept
    fresh = S.ParquetSource(str(tmp_path / "*.parquet"), "content")
    assert fresh[5]["text"] == texts[5] and list(fresh._rows._cache) == [1]  # only a.parquet's 2nd row group
    assert fresh[14]["text"] == texts[14] and list(fresh._rows._cache) == [1, 3]  # b.parquet's first
    assert len(fresh._rows._cache[3]["content"]) == 5  # a row group's rows, one column
    # a comma-separated list of files is one source; reads survive pickling (grain worker processes)
    import pickle

    both = S.ParquetSource(f"{tmp_path / 'b.parquet'},{tmp_path / 'a.parquet'}", "content")
    assert [both[i]["text"] for i in range(23)] == texts  # files in sorted path order
    assert pickle.loads(pickle.dumps(both))[20]["text"] == texts[20]


def test_parquet_chat_records(tmp_path):
    msgs = [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello", "name": None}],
            [{"role": "user", "content": "ls"}, {"role": "assistant", "content": "ok", "name": "bot"}]]
    tools = [json.dumps([{"name": "ls"}]), None]
    _write_parquet(tmp_path / "c.parquet", {"messages": msgs, "tools": tools}, row_group_size=1)
    src = S.make_source(S.SourceConfig(kind="chat_parquet", path=str(tmp_path / "c.parquet")))
    assert src[0]["messages"] == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert src[0]["tools"] == [{"name": "ls"}] and "tools" not in src[1]
    assert src[1]["messages"][1] == {"role": "assistant", "content": "ok", "name": "bot"}


def test_parquet_errors_name_the_file_and_columns(tmp_path):
    _write_parquet(tmp_path / "a.parquet", {"body": ["x"], "id": [1]}, row_group_size=1)
    with pytest.raises(ValueError, match=r"no column 'text'.*columns present: \['body', 'id'\]") as e:
        S.ParquetSource(str(tmp_path / "a.parquet"))
    assert str(tmp_path / "a.parquet") in str(e.value)
    with pytest.raises(ValueError, match="no files match"):
        S.ParquetSource(str(tmp_path / "*.pq"))
    (tmp_path / "empty.parquet").write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty\.parquet is empty \(0 bytes\)"):
        S.ParquetSource(str(tmp_path / "empty.parquet"))
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 this is not parquet at all")
    with pytest.raises(ValueError, match=r"bad\.parquet is not a readable Parquet file"):
        S.ParquetSource(str(tmp_path / "bad.parquet"), "body")
    _write_parquet(tmp_path / "none.parquet", {"body": [None, "y"]}, row_group_size=2)
    src = S.ParquetSource(str(tmp_path / "none.parquet"), "body")
    with pytest.raises(ValueError, match=r"none\.parquet row group 0 row 0: text field 'body' must be a string"):
        src[0]
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": pa.array([], pa.string())}), str(tmp_path / "zero.parquet"))
    with pytest.raises(ValueError, match="hold no rows"):
        S.ParquetSource(str(tmp_path / "zero.parquet"))
    with pytest.raises(ValueError, match="needs a path"):
        S.SourceConfig(kind="parquet")


def test_hf_dataset_saved_to_disk(tmp_path):
    datasets = pytest.importorskip("datasets")
    texts = [f"print({i})\n" for i in range(2500)]  # > one writer batch (1000 rows): several record batches
    datasets.Dataset.from_dict({"text": texts, "n": list(range(2500))}).save_to_disk(str(tmp_path / "ds"),
                                                                                     max_shard_size="20KB")
    src = S.make_source(S.SourceConfig(kind="hf_dataset", path=str(tmp_path / "ds")))
    assert isinstance(src, S.HFDatasetSource) and len(src) == 2500 and len(src.files) > 1
    order = [2499, 0, 1000, 999, 1234, 7]
    assert [src[i]["text"] for i in order] == [texts[i] for i in order]
    assert [src[i]["text"] for i in range(len(src))] == texts
    import pickle

    assert pickle.loads(pickle.dumps(src))[1500]["text"] == texts[1500]


def test_hf_dataset_dict_splits_and_chat(tmp_path):
    datasets = pytest.importorskip("datasets")
    msgs = [[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}] for i in range(4)]
    dd = datasets.DatasetDict(train=datasets.Dataset.from_dict({"messages": msgs[:3]}),
                              validation=datasets.Dataset.from_dict({"messages": msgs[3:]}))
    dd.save_to_disk(str(tmp_path / "dd"))
    train = S.make_source(S.SourceConfig(kind="chat_hf_dataset", path=str(tmp_path / "dd")))
    val = S.make_source(S.SourceConfig(kind="chat_hf_dataset", path=str(tmp_path / "dd"), split="validation"))
    assert [train[i]["messages"] for i in range(len(train))] == msgs[:3]
    assert len(val) == 1 and val[0]["messages"] == msgs[3] and val.split == "validation"
    with pytest.raises(ValueError, match=r"no split 'test'; splits present: \['train', 'validation'\]"):
        S.HFDatasetSource(str(tmp_path / "dd"), "messages", split="test", chat=True)
    with pytest.raises(ValueError, match=r"no column 'text' \(the text field\); columns present: \['messages'\]"):
        S.HFDatasetSource(str(tmp_path / "dd"))


def test_hf_dataset_errors_name_the_directory_and_file(tmp_path):
    datasets = pytest.importorskip("datasets")
    with pytest.raises(ValueError, match="is not a directory"):
        S.HFDatasetSource(str(tmp_path / "missing"))
    (tmp_path / "plain").mkdir()
    with pytest.raises(ValueError, match="neither state.json"):
        S.HFDatasetSource(str(tmp_path / "plain"))
    datasets.Dataset.from_dict({"text": ["a", "b"]}).save_to_disk(str(tmp_path / "ds"))
    arrow = next((tmp_path / "ds").glob("*.arrow"))
    arrow.write_bytes(b"")
    with pytest.raises(ValueError, match=f"{arrow} is empty"):
        S.HFDatasetSource(str(tmp_path / "ds"))
    arrow.write_bytes(b"garbage, not arrow" * 10)
    with pytest.raises(ValueError, match=f"{arrow} is not a readable Arrow file"):
        S.HFDatasetSource(str(tmp_path / "ds"))


def test_hf_dataset_reads_without_the_datasets_package(tmp_path):
    """The reader needs only pyarrow: an IPC stream written by hand with a state.json is a dataset."""
    import pyarrow as pa

    (tmp_path / "ds").mkdir()
    table = pa.table({"text": ["one", "two", "three"]})
    with pa.OSFile(str(tmp_path / "ds" / "data-00000-of-00001.arrow"), "wb") as f:
        with pa.ipc.new_stream(f, table.schema) as w:
            w.write_table(table, max_chunksize=2)
    (tmp_path / "ds" / "state.json").write_text(json.dumps({"_data_files": [{"filename":
                                                                              "data-00000-of-00001.arrow"}],
                                                            "_fingerprint": "abc"}))
    src = S.HFDatasetSource(str(tmp_path / "ds"))
    assert [src[i]["text"] for i in range(3)] == ["one", "two", "three"]
    assert src.fingerprint()["fingerprint"] == "abc"
