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
