"""Probes of written-marshmallow-key-transform: what the workspace's marshmallow answers (bench/verdict_runner.py).

Fail-to-pass: the key_transform class Meta option the history's last two commits started, by the rules of the
quickstart's "Transforming Keys", the Meta options list and the changelog: camel, pascal and kebab case (underscores
at the edges kept, runs inside counted as one, parts kept as written), a function of the field name, an explicit
data_key winning, Meta.fields and Meta.additional transformed too, names still selecting fields, errors and unknown
keys reported with the transformed keys, each nested schema by its own Meta, a ValueError for any other value at class
definition, the usual collision error. Pass-to-pass: schemas without the option, data_key, only/exclude/partial, as
marshmallow 3.14.1 plus the commits answered them.
"""

import sys


def _ma(ctx):
    root = ctx.path("src")
    if root not in sys.path:
        sys.path.append(root)  # after the standard library: the workspace shadows nothing
    import warnings
    warnings.simplefilter("ignore")
    return ctx.load("marshmallow")


def _load(schema, data, **kw):
    ma = sys.modules["marshmallow"]
    try:
        return {"ok": schema.load(data, **kw)}
    except ma.ValidationError as e:
        return {"errors": e.messages}


def _schema(ma, transform, **extra_fields):
    attrs = {"first_name": ma.fields.String(), "created_at": ma.fields.Integer(),
             "email": ma.fields.String(data_key="mail"), **extra_fields}
    attrs["Meta"] = type("Meta", (), {"key_transform": transform})
    return type("S", (ma.Schema,), attrs)


def _keys(ctx, transform, names):
    ma = _ma(ctx)
    attrs = {n: ma.fields.Raw() for n in names}
    attrs["Meta"] = type("Meta", (), {"key_transform": transform})
    S = type("S", (ma.Schema,), attrs)
    dumped = S().dump({n: i for i, n in enumerate(names)})
    return [sorted(dumped.items(), key=lambda kv: kv[1])]


NAMES = ["created_at", "name", "a_b_c", "_internal_id", "id_", "a__b", "http_URL", "line_2", "x_1_y"]


def probe_camelcase_keys(ctx):
    return _keys(ctx, "camelcase", NAMES)


def probe_pascalcase_keys(ctx):
    return _keys(ctx, "pascalcase", NAMES)


def probe_kebabcase_keys(ctx):
    return _keys(ctx, "kebabcase", NAMES)


def probe_function_transform(ctx):
    return [_keys(ctx, str.upper, ["first_name", "b"]), _keys(ctx, lambda n: "x-" + n, ["first_name"])]


def probe_dump_and_load(ctx):
    ma = _ma(ctx)
    S = _schema(ma, "camelcase")
    data = {"first_name": "Mike", "email": "a@b.com", "created_at": 5}
    dumped = S().dump(data)
    return [dumped, _load(S(), dumped), _load(S(many=True), [dumped, {"firstName": "Ann"}])]


def probe_explicit_data_key_wins(ctx):
    ma = _ma(ctx)
    S = _schema(ma, "kebabcase", last_name=ma.fields.String(data_key="surname"))
    return S().dump({"email": "e", "last_name": "L", "first_name": "F"})


def probe_errors_and_unknown_keys(ctx):
    ma = _ma(ctx)
    S = _schema(ma, "camelcase")
    return [_load(S(), {"createdAt": "x", "first_name": "M"}), _load(S(), {"mail": 1}),
            S().validate({"createdAt": "y"})]


def probe_names_still_select(ctx):
    ma = _ma(ctx)
    S = _schema(ma, "pascalcase")
    return [_load(S(only=("first_name",)), {"FirstName": "M"}), S(exclude=("email",)).dump({"email": "e"}),
            _load(S(partial=("created_at",)), {"FirstName": "M"}), S(load_only=("first_name",)).dump({"first_name": "x"}),
            _load(S(dump_only=("created_at",), unknown=ma.EXCLUDE), {"CreatedAt": 1})]


def probe_required_and_validates(ctx):
    ma = _ma(ctx)

    class S(ma.Schema):
        user_name = ma.fields.String(required=True)
        zip_code = ma.fields.String()

        @ma.validates("zip_code")
        def check(self, value):
            if not value.isdigit():
                raise ma.ValidationError("digits only")

        class Meta:
            key_transform = "camelcase"

    return [_load(S(), {}), _load(S(), {"userName": "u", "zipCode": "ab"}), _load(S(), {"userName": "u", "zipCode": "12"})]


def probe_meta_fields_and_additional(ctx):
    ma = _ma(ctx)

    class A(ma.Schema):
        class Meta:
            fields = ("first_name", "zip_code")
            key_transform = "camelcase"

    class B(ma.Schema):
        home_town = ma.fields.String()

        class Meta:
            additional = ("last_name",)
            key_transform = "kebabcase"

    return [A().dump({"first_name": "F", "zip_code": "1"}), B().dump({"home_town": "T", "last_name": "L"})]


def probe_nested_schemas_own_meta(ctx):
    ma = _ma(ctx)

    class Plain(ma.Schema):
        zip_code = ma.fields.String()

    class Camel(ma.Schema):
        zip_code = ma.fields.String()

        class Meta:
            key_transform = "camelcase"

    class Outer(ma.Schema):
        home_address = ma.fields.Nested(Plain)
        work_address = ma.fields.Nested(Camel)
        past_addresses = ma.fields.List(ma.fields.Nested(Camel))

        class Meta:
            key_transform = "pascalcase"

    data = {"home_address": {"zip_code": "1"}, "work_address": {"zip_code": "2"}, "past_addresses": [{"zip_code": "3"}]}
    dumped = Outer().dump(data)
    return [dumped, _load(Outer(), dumped)]


def probe_subclass_inherits_meta(ctx):
    ma = _ma(ctx)
    Base = _schema(ma, "camelcase")

    class Child(Base):
        last_name = ma.fields.String()

    return Child().dump({"first_name": "F", "last_name": "L"})


def probe_invalid_values(ctx):
    ma = _ma(ctx)
    out = []
    for value in ("snakecase", "CamelCase", 3, ["camelcase"]):
        try:
            type("S", (ma.Schema,), {"Meta": type("Meta", (), {"key_transform": value})})
            out.append("defined")
        except ValueError:
            out.append("ValueError")
    return out


def probe_collisions(ctx):
    ma = _ma(ctx)
    out = []
    for names in (("ab", "a_b"), ("a_b", "aB"), ("a_b", "a__b")):
        S = type("S", (ma.Schema,), {**{n: ma.fields.String() for n in names},
                                     "Meta": type("Meta", (), {"key_transform": "camelcase"})})
        try:
            S()
            out.append("built")
        except ValueError:
            out.append("ValueError")
    return out


def probe_without_the_option(ctx):
    ma = _ma(ctx)

    class S(ma.Schema):
        first_name = ma.fields.String()
        email = ma.fields.String(data_key="mail")

    return [S().dump({"first_name": "F", "email": "e"}), _load(S(), {"first_name": "F", "mail": "e"}),
            _load(S(), {"firstName": "F"}), S.opts.key_transform is None]


def probe_pluck_and_from_dict(ctx):
    ma = _ma(ctx)

    class Inner(ma.Schema):
        user_id = ma.fields.Integer()

        class Meta:
            key_transform = "camelcase"

    class Outer(ma.Schema):
        owner = ma.fields.Pluck(Inner, "user_id")

        class Meta:
            key_transform = "camelcase"

    Plain = ma.Schema.from_dict({"first_name": ma.fields.String()})
    return [Outer().dump({"owner": {"user_id": 3}}), _load(Outer(), {"owner": 4}), Plain().dump({"first_name": "F"})]


def probe_version(ctx):
    return _ma(ctx).__version__
