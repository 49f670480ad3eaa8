"""Probes of written-marshmallow-load-aliases: what the workspace's marshmallow answers (bench/verdict_runner.py).

Fail-to-pass: field aliases (the history's last commit) by the rules of the quickstart's "Accepting Other Keys on
Load": an alias is never an unknown field and INCLUDE does not copy it, the field's own key wins and then the aliases
in declared order, errors stay under the field's own key, an alias colliding with another loaded field's keys is
refused when the schema is built. Pass-to-pass: dumping (never wrong), loading without aliases, unknown handling of
real unknown keys, data_key collisions, validators, as marshmallow 3.14.1 plus the commit answered them.
"""

import sys


def _ma(ctx):
    root = ctx.path("src")
    if root not in sys.path:
        sys.path.append(root)  # after the standard library: the workspace shadows nothing
    return ctx.load("marshmallow")


def _load(schema, data, **kw):
    ma = sys.modules["marshmallow"]
    try:
        return {"ok": schema.load(data, **kw)}
    except ma.ValidationError as e:
        return {"errors": e.messages}


def _user(ma, **opts):
    class UserSchema(ma.Schema):
        name = ma.fields.String(aliases=["fullName", "full_name"])
        email = ma.fields.Email(data_key="emailAddress", aliases="email")
        age = ma.fields.Integer(aliases=["years"], load_default=0)

    return UserSchema(**opts)


def probe_alias_under_raise(ctx):
    ma = _ma(ctx)
    return [_load(_user(ma), {"fullName": "Mike", "email": "a@b.com"}),
            _load(_user(ma), {"full_name": "Ann", "years": "7"})]


def probe_alias_under_include(ctx):
    ma = _ma(ctx)
    return [_load(_user(ma, unknown=ma.INCLUDE), {"fullName": "Mike", "email": "a@b.com", "years": 3}),
            _load(_user(ma), {"full_name": "Ann"}, unknown=ma.INCLUDE)]


def probe_alias_under_exclude(ctx):
    ma = _ma(ctx)
    return _load(_user(ma, unknown=ma.EXCLUDE), {"fullName": "Mike", "email": "a@b.com", "nick": "m"})


def probe_real_unknown_keys_still_reported(ctx):
    ma = _ma(ctx)
    return [_load(_user(ma), {"fullName": "Mike", "nick": "M", "emailaddress": "x"}),
            _load(_user(ma, unknown=ma.INCLUDE), {"fullName": "Mike", "nick": "M"})]


def probe_own_key_wins(ctx):
    ma = _ma(ctx)
    s = _user(ma)
    return [_load(s, {"full_name": "c", "fullName": "b", "name": "a"}), _load(s, {"full_name": "c", "fullName": "b"}),
            _load(s, {"name": "a", "full_name": "c"}), _load(s, {"email": "x@y.z", "emailAddress": "a@b.com"})]


def probe_errors_under_own_key(ctx):
    ma = _ma(ctx)
    return [_load(_user(ma), {"email": "nope", "years": "x"}),
            _load(_user(ma, many=True), [{"fullName": 5}, {"emailAddress": "a@b.com"}, {"years": []}])]


def probe_errors_with_unknown_keys(ctx):
    ma = _ma(ctx)
    return _load(_user(ma), {"email": "nope", "zzz": 1})


def probe_required_through_alias(ctx):
    ma = _ma(ctx)

    class S(ma.Schema):
        code = ma.fields.String(required=True, aliases=["id", "key"])

    return [_load(S(), {"key": "k1"}), _load(S(), {}), _load(S(), {"id": None})]


def probe_nested_aliases(ctx):
    ma = _ma(ctx)

    class Inner(ma.Schema):
        name = ma.fields.String(aliases="fullName", required=True)

    class Outer(ma.Schema):
        inner = ma.fields.Nested(Inner, aliases="child")
        items = ma.fields.List(ma.fields.Nested(Inner), aliases=["entries"])

    return [_load(Outer(), {"child": {"fullName": "x"}, "entries": [{"name": "y"}, {"fullName": "z"}]}),
            _load(Outer(), {"child": {"fullName": 1}}), _load(Outer(), {"child": {"fullName": "x", "n": 1}})]


def probe_collisions_refused(ctx):
    ma = _ma(ctx)
    out = []
    for aliases in ("f1", ["x", "f5"], "old", None, "f4", ["f2", "two"]):
        class S(ma.Schema):
            f1 = ma.fields.Field()
            f2 = ma.fields.Field(aliases=aliases)
            f3 = ma.fields.Field(data_key="f5", aliases=["old"])
            f4 = ma.fields.Field(dump_only=True)
        try:
            S()
            out.append("built")
        except ValueError:
            out.append("ValueError")
    return out


def probe_data_key_collisions_unchanged(ctx):
    ma = _ma(ctx)
    out = []
    for data_key in ("f1", "f5", None):
        class S(ma.Schema):
            f1 = ma.fields.Field()
            f2 = ma.fields.Field(data_key=data_key)
            f3 = ma.fields.Field(data_key="f5")
            f4 = ma.fields.Field(data_key="f1", load_only=True)
        try:
            S()
            out.append("built")
        except ValueError:
            out.append("ValueError")
    return out


def probe_dump_uses_own_key(ctx):
    ma = _ma(ctx)
    return [_user(ma).dump({"name": "Mike", "email": "a@b.com", "age": 3}),
            _user(ma, many=True).dump([{"name": "A"}, {"email": "c@d.e"}])]


def probe_validates_hook(ctx):
    ma = _ma(ctx)

    class S(ma.Schema):
        email = ma.fields.String(data_key="emailAddress", aliases="email")

        @ma.validates("email")
        def check(self, value):
            if "@" not in value:
                raise ma.ValidationError("Needs an @.")

    return [_load(S(), {"email": "nope"}), _load(S(), {"email": "a@b"}), S().validate({"email": "x"})]


def probe_partial(ctx):
    ma = _ma(ctx)

    class S(ma.Schema):
        name = ma.fields.String(required=True, aliases="fullName")
        age = ma.fields.Integer(required=True)

    return [_load(S(), {"fullName": "x"}, partial=True), _load(S(), {"fullName": "x"}, partial=("age",)),
            _load(S(), {"age": 1}, partial=("name",))]


def probe_schema_validate_method(ctx):
    ma = _ma(ctx)
    return [_user(ma).validate({"fullName": "Mike", "years": 3}), _user(ma).validate({"years": "x", "nick": 1})]


def probe_aliases_attribute(ctx):
    ma = _ma(ctx)
    return [list(ma.fields.String(aliases=v).aliases) for v in (None, "a", ["a", "b"])]


def probe_plain_schemas(ctx):
    ma = _ma(ctx)

    class S(ma.Schema):
        name = ma.fields.String(data_key="Name")
        when = ma.fields.Date()
        tags = ma.fields.List(ma.fields.String())

    return [_load(S(), {"Name": "n", "when": "2020-01-02", "tags": ["a"]}), _load(S(), {"name": "n"}),
            _load(S(unknown=ma.INCLUDE), {"Name": "n", "x": 1}), S().dump({"name": "n", "tags": ["b"]}),
            _load(S(), {"when": "nope"})]


def probe_version(ctx):
    return _ma(ctx).__version__
