"""Probes of written-jsonpath-flatten-digit-keys: what the workspace's jsonpath answers (bench/verdict_runner.py).

Fail-to-pass (the commit's own contract, in its module docstring and README entry): `unflatten(flatten(data)) ==
data` for any JSON-like data, objects whose keys are digits ("200", "0", "01", "2024") included, at the top, nested
and inside arrays; each container is the type of its own entry; a mapping out of document order (a member before
its parent's entry, an array item that is not the next index) raises ValueError. Pass-to-pass: flatten's output and
escaping, round trips of ordinary documents, the errors unflatten already raised, and jsonpath's JSONPath, JSON
Pointer, JSON Patch and query API as python-jsonpath 1.2.0 answered them.

Answers are the rebuilt documents (or the raised exception's class name), so a list padded with None is visible.
"""

import os
import sys


def _jp(ctx):
    """The workspace's jsonpath (imported from the repository root, never an installed copy)."""
    root = ctx.path(".")
    if root not in sys.path:  # after the standard library, before any installed copy of the package
        site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
        sys.path.insert(site[0] if site else len(sys.path), root)
    mod = ctx.load("jsonpath")
    if not os.path.realpath(mod.__file__).startswith(os.path.realpath(root) + os.sep):
        raise ImportError("jsonpath came from %s, not the workspace" % mod.__file__)
    return mod


def _round(ctx, data):
    jp = _jp(ctx)
    try:
        return jp.unflatten(jp.flatten(data))
    except Exception as e:  # noqa: BLE001 -- the class is the answer
        return {"raised": type(e).__name__}


def _un(ctx, flat):
    jp = _jp(ctx)
    try:
        return jp.unflatten(flat)
    except Exception as e:  # noqa: BLE001
        return {"raised": type(e).__name__}


SPEC = {
    "openapi": "3.0.0",
    "paths": {
        "/pets/{id}": {
            "get": {
                "parameters": [{"name": "id", "in": "path", "required": True}],
                "responses": {
                    "200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}},
                    "404": {"description": "not found"},
                    "default": {"description": "error"},
                },
            }
        }
    },
}


# -- fail-to-pass: digit keys ----------------------------------------------------------------------------------------

def probe_api_description_round_trip(ctx):
    return _round(ctx, SPEC)


def probe_status_code_keys_at_top(ctx):
    return [_round(ctx, {"200": "ok", "404": "missing"}), _round(ctx, {"500": {}})]


def probe_zero_and_one_keys(ctx):
    return [_round(ctx, {"0": "a", "1": "b"}), _round(ctx, {"0": []}), _round(ctx, {"x": {"0": {"1": 2}}})]


def probe_year_keys_inside_arrays(ctx):
    return _round(ctx, [{"2023": 1.5, "2024": 2.5}, {"1999": None}])


def probe_mixed_digit_and_word_keys(ctx):
    return [_round(ctx, {"1": "x", "a": "y"}), _round(ctx, {"b": {"3": True, "c": False}})]


def probe_leading_zero_keys(ctx):
    return [_round(ctx, {"01": 1, "007": "bond"}), _round(ctx, {"z": {"00": []}})]


def probe_digit_keyed_empty_containers(ctx):
    return [_round(ctx, {"7": {}}), _round(ctx, {"7": []}), _round(ctx, [{}, {"42": {}}])]


def probe_many_numbered_members(ctx):
    data = {"pages": {str(i): [i, {"next": str(i + 3)}] for i in range(0, 30, 3)}, "order": list(range(12))}
    return _round(ctx, data)


def probe_hand_written_mapping_with_digit_keys(ctx):
    return _un(ctx, {"": {}, "/codes": {}, "/codes/404": "missing", "/codes/200": "ok", "/list": [],
                     "/list/0": "a", "/list/1": {}, "/list/1/10": "ten"})


def probe_member_without_parent_entry(ctx):
    return [_un(ctx, {"": {}, "/a/b": 1}), _un(ctx, {"": [], "/0/x": 1})]


def probe_array_gap(ctx):
    return [_un(ctx, {"": [], "/3": 1}), _un(ctx, {"": {}, "/l": [], "/l/0": "a", "/l/2": "c"})]


def probe_out_of_document_order(ctx):
    return [_un(ctx, {"/a": 1, "": {}}), _un(ctx, {"": [], "/1": "b", "/0": "a"})]


# -- pass-to-pass: the rest of the feature -----------------------------------------------------------------------------

def probe_flatten_example(ctx):
    jp = _jp(ctx)
    return [list(jp.flatten({"a": [1, {"b": None}], "c/d": "x"}).items()),
            list(jp.flatten({"b": 1, "a": 2}).items()), list(jp.flatten([]).items()),
            list(jp.flatten("s").items())]


def probe_flatten_escapes_keys(ctx):
    jp = _jp(ctx)
    return list(jp.flatten({"application/json": 1, "a~b": {"~1": 2, "x/y/z": [3]}}))


def probe_ordinary_round_trips(ctx):
    docs = [{}, [], "scalar", 5, None, {"users": [{"name": "Sue", "tags": []}, {"name": "John", "meta": {}}]},
            [[1, 2], [], [{"x": 1.5}]], {"a~b": {"c/d": {"~1": True, "~01": "t"}}}]
    return [_round(ctx, d) for d in docs]


def probe_round_trip_copies(ctx):
    jp = _jp(ctx)
    data = {"a": {"b": [1]}, "c": []}
    flat = jp.flatten(data)
    out = jp.unflatten(flat)
    out["a"]["b"].append(2)
    out["c"].append(0)
    return [data, flat["/a/b"], flat["/c"], out["a"] is not data["a"]]


def probe_errors_already_raised(ctx):
    return [_un(ctx, {"/a": 1}), _un(ctx, {}), _un(ctx, {"": {}, "/a": 1, "/a/b": 2}), _un(ctx, {"": 3})]


def probe_flattened_pointers_resolve(ctx):
    jp = _jp(ctx)
    data = {"k/1": {"~x": [10, {"200": "ok"}]}, "n": None}
    out = []
    for pointer, value in jp.flatten(data).items():
        if pointer and not isinstance(value, (dict, list)):
            out.append([pointer, jp.JSONPointer(pointer).resolve(data)])
    return out


# -- pass-to-pass: the library around it -------------------------------------------------------------------------------

DATA = {"users": [{"name": "Sue", "score": 100}, {"name": "John", "score": 86},
                  {"name": "Sally", "score": 84}, {"name": "Jane", "score": 55}], "a/b": {"~c": 1}}


def probe_jsonpath_findall(ctx):
    jp = _jp(ctx)
    return [jp.findall("$.users[?@.score > 85].name", DATA), jp.findall("$..score", DATA),
            [m.path for m in jp.finditer("$.users[1:3]", DATA)], jp.compile("$.users[-1].name").findall(DATA)]


def probe_json_pointer(ctx):
    jp = _jp(ctx)
    p = jp.JSONPointer("/users/1/name")
    return [p.resolve(DATA), jp.resolve("/a~1b/~0c", DATA), str(jp.JSONPointer.from_parts(["a/b", "~c"])),
            str(p.parent()), p.exists(DATA), jp.JSONPointer("/users/9").exists(DATA),
            ctx.raises(jp.JSONPointerIndexError, jp.resolve, "/users/9", DATA)]


def probe_json_patch(ctx):
    jp = _jp(ctx)
    data = {"some": {"other": "thing"}}
    jp.patch.apply([{"op": "add", "path": "/some/foo", "value": {"bar": []}},
                    {"op": "copy", "from": "/some/other", "path": "/some/foo/else"},
                    {"op": "add", "path": "/some/foo/bar/-", "value": 1},
                    {"op": "remove", "path": "/some/other"}], data)
    return data


def probe_query_api(ctx):
    jp = _jp(ctx)
    q = jp.query("$.users[*].name", DATA)
    return [list(q.skip(1).limit(2).values()), list(jp.query("$.users[*].score", DATA).tail(2).values()),
            list(jp.query("$.users[*]", DATA).locations())[:2]]
