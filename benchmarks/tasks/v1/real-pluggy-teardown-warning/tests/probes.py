"""Probes of real-pluggy-teardown-warning: what the workspace's pluggy answers (bench/verdict_runner.py).

Fail-to-pass (pluggy 1.4.0, ported from its testing/test_warnings.py, test_hookcaller.py and
test_pluginmanager.py): an old-style hookwrapper that raises during teardown makes pluggy warn with
PluggyTeardownRaisedWarning (a PluggyWarning, itself a UserWarning; both shown as pluggy's), naming the plugin, the
hook and the exception, at the line that called the hook, and the exception still propagates; new-style wrappers do
not warn; PluginManager.unblock(name) unblocks and says whether the name was blocked; call_extra puts the extra
functions after the tryfirst implementations (regressed in 1.1.0, #441); plugins registered by an implementation
during a call join only later calls (#438), and a historic call gives them the call at once. Pass-to-pass: hook
calling, wrappers, historic hooks, blocking and validation as pluggy 1.3.0 answered them.
"""

import os
import re
import sys


def _pl(ctx):
    """The workspace's pluggy (src layout), never an installed copy."""
    root = ctx.path("src")
    if root not in sys.path:  # after the standard library, before any installed copy of the package
        site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
        sys.path.insert(site[0] if site else len(sys.path), root)
    pluggy = ctx.load("pluggy")
    if not os.path.realpath(pluggy.__file__).startswith(os.path.realpath(root) + os.sep):
        raise ImportError("pluggy came from %s, not the workspace" % pluggy.__file__)
    return pluggy


def _pm(ctx, spec_kwargs=None):
    """A PluginManager for project "example" with one hook, my_hook(arg=None)."""
    pluggy = _pl(ctx)
    hookspec = pluggy.HookspecMarker("example")

    class Api:
        @hookspec(**(spec_kwargs or {}))
        def my_hook(self, arg):
            raise NotImplementedError()

    pm = pluggy.PluginManager("example")
    pm.add_hookspecs(Api)
    return pluggy, pm, pluggy.HookimplMarker("example")


def _warned(fn):
    """(what fn did, [(category name, message, file name)] of the warnings it issued)."""
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            did = ["returned", fn()]
        except Exception as e:  # noqa: BLE001 - which error propagated is the answer
            did = ["raised", type(e).__name__]
    return did, [(type(w.message).__name__, str(w.message), os.path.basename(w.filename)) for w in caught]


def probe_warning_classes(ctx):
    p = _pl(ctx)
    return [issubclass(p.PluggyTeardownRaisedWarning, p.PluggyWarning), issubclass(p.PluggyWarning, UserWarning),
            p.PluggyWarning.__module__, p.PluggyTeardownRaisedWarning.__module__,
            "PluggyWarning" in p.__all__, "PluggyTeardownRaisedWarning" in p.__all__]


def _teardown_plugins(hookimpl):
    class Plugin1:
        @hookimpl
        def my_hook(self, arg):
            return 1

    class Plugin2:
        @hookimpl(hookwrapper=True)
        def my_hook(self, arg):
            yield
            1 / 0

    class Plugin3:
        @hookimpl(hookwrapper=True)
        def my_hook(self, arg):
            yield

    return Plugin1, Plugin2, Plugin3


def probe_teardown_raised_warning(ctx):
    p, pm, hookimpl = _pm(ctx)
    p1, p2, p3 = _teardown_plugins(hookimpl)
    pm.register(p1(), "plugin1")
    pm.register(p2(), "plugin2")
    pm.register(p3(), "plugin3")
    did, warns = _warned(lambda: pm.hook.my_hook(arg=1))
    pattern = r"\bplugin2\b.*\bmy_hook\b.*\n.*ZeroDivisionError"
    return [did, [(cat, bool(re.search(pattern, msg)), where) for cat, msg, where in warns],
            [isinstance(cat, str) and cat == "PluggyTeardownRaisedWarning" for cat, _, _ in warns]]


def probe_teardown_warning_names_the_plugin(ctx):
    p, pm, hookimpl = _pm(ctx)

    class Outer:
        @hookimpl(hookwrapper=True, tryfirst=True)
        def my_hook(self, arg):
            outcome = yield
            outcome.get_result()

    class Broken:
        @hookimpl(hookwrapper=True)
        def my_hook(self, arg):
            yield
            raise KeyError("teardown")

    class Impl:
        @hookimpl
        def my_hook(self, arg):
            return arg

    pm.register(Impl(), "impl")
    pm.register(Broken(), "the-broken-one")
    pm.register(Outer(), "outer")
    did, warns = _warned(lambda: pm.hook.my_hook(arg=5))
    return [did, [cat for cat, _, _ in warns], ["the-broken-one" in m and "my_hook" in m and "KeyError" in m
                                               and "teardown" in m for _, m, _ in warns]]


def probe_no_warning_without_teardown_error(ctx):
    p, pm, hookimpl = _pm(ctx)

    class Old:
        @hookimpl(hookwrapper=True)
        def my_hook(self, arg):
            outcome = yield
            outcome.force_result([outcome.get_result()[0] * 10])

    class New:
        @hookimpl(wrapper=True)
        def my_hook(self, arg):
            result = yield
            if arg == "boom":
                raise ValueError("new-style teardown")
            return result + [2]

    class Impl:
        @hookimpl
        def my_hook(self, arg):
            return 1

    pm.register(Impl(), "impl")
    pm.register(New(), "new")
    pm.register(Old(), "old")
    _, pm2, _ = _pm(ctx)  # a new-style wrapper alone: its teardown error is the hook's error, not a warning case
    pm2.register(Impl(), "impl")
    pm2.register(New(), "new")
    return [_warned(lambda: pm.hook.my_hook(arg=1)), _warned(lambda: pm2.hook.my_hook(arg="boom"))]


def probe_teardown_warning_with_firstresult(ctx):
    p, pm, hookimpl = _pm(ctx, {"firstresult": True})

    class Impl:
        @hookimpl
        def my_hook(self, arg):
            return arg

    class Broken:
        @hookimpl(hookwrapper=True)
        def my_hook(self, arg):
            yield
            raise RuntimeError("late")

    pm.register(Impl(), "impl")
    pm.register(Broken(), "broken")
    did, warns = _warned(lambda: pm.hook.my_hook(arg=3))
    return [did, [(cat, "broken" in m and "RuntimeError" in m, where) for cat, m, where in warns]]


def probe_unblock(ctx):
    p, pm, hookimpl = _pm(ctx)

    class A:
        pass

    a = A()
    pm.register(a, "somename")
    pm.set_blocked("somename")
    out = [pm.is_blocked("somename"), pm.unblock("someothername"), pm.unblock("somename"),
           pm.is_blocked("somename"), pm.unblock("somename"), pm.register(A(), "somename")]
    pm.set_blocked("later")
    out += [pm.register(A(), "later"), pm.unblock("later"), pm.register(A(), "later"),
            pm.unblock("later"), sorted(n for n, _ in pm.list_name_plugin())]
    return out


def probe_call_extra_order(ctx):
    p, pm, hookimpl = _pm(ctx)
    order = []

    def impl(tag, **opts):
        class Plugin:
            @hookimpl(**opts)
            def my_hook(self, arg):
                order.append(tag)
                return tag
        return Plugin()

    def wrapper(tag, **opts):
        class Plugin:
            @hookimpl(wrapper=True, **opts)
            def my_hook(self, arg):
                order.append(tag + "pre")
                result = yield
                order.append(tag + "post")
                return result
        return Plugin()

    for plugin in (impl("1", tryfirst=True), impl("2"), impl("3", trylast=True), wrapper("4", tryfirst=True),
                   wrapper("5"), wrapper("6", trylast=True)):
        pm.register(plugin)

    def extra1(arg):
        order.append("extra1")
        return "extra1"

    def extra2(arg):
        order.append("extra2")
        return "extra2"

    result = pm.hook.my_hook.call_extra([extra1, extra2], {"arg": "test"})
    return [order, result]


def probe_call_extra_simple(ctx):
    p, pm, hookimpl = _pm(ctx)

    class Plain:
        @hookimpl
        def my_hook(self, arg):
            return "plain"

    class First:
        @hookimpl(tryfirst=True)
        def my_hook(self, arg):
            return "first"

    class Wrap:
        @hookimpl(hookwrapper=True, tryfirst=True)
        def my_hook(self, arg):
            outcome = yield
            outcome.force_result(outcome.get_result() + ["wrapped"])

    pm.register(Plain())
    out = [pm.hook.my_hook.call_extra([lambda arg: "x"], {"arg": 0})]
    pm.register(First())
    out.append(pm.hook.my_hook.call_extra([lambda arg: "x"], {"arg": 0}))
    pm.register(Wrap())
    out.append(pm.hook.my_hook.call_extra([lambda arg: "x", lambda arg: "y"], {"arg": 0}))
    return out


def _register_while_calling(ctx, historic):
    p, pm, hookimpl = _pm(ctx, {"historic": historic})

    def plugin(value, **opts):
        class Plugin:
            @hookimpl(**opts)
            def my_hook(self, arg):
                return value
        return Plugin()

    class Registrar:
        def __init__(self):
            self.done = False

        @hookimpl
        def my_hook(self, arg):
            if not self.done:
                pm.register(plugin(4, tryfirst=True))
                pm.register(plugin(5))
                pm.register(plugin(6, trylast=True))
                self.done = True
            return 2

    pm.register(plugin(1))
    pm.register(Registrar())
    pm.register(plugin(3))
    if not historic:
        return [pm.hook.my_hook(arg=0), pm.hook.my_hook(arg=0)]
    first, second = [], []
    pm.hook.my_hook.call_historic(first.append, {"arg": 0})
    pm.hook.my_hook.call_historic(second.append, {"arg": 0})
    return [first, second]


def probe_register_while_calling(ctx):
    return _register_while_calling(ctx, False)


def probe_register_while_calling_historic(ctx):
    return _register_while_calling(ctx, True)


def probe_call_order_and_firstresult(ctx):
    out = []
    for spec in ({}, {"firstresult": True}):
        p, pm, hookimpl = _pm(ctx, spec)
        for value, opts in ((1, {}), (2, {"trylast": True}), (3, {}), (None, {"tryfirst": True})):
            class Plugin:
                @hookimpl(**opts)
                def my_hook(self, arg, value=value):
                    return value
            pm.register(Plugin())
        out.append(pm.hook.my_hook(arg=0))
    return out


def probe_wrappers(ctx):
    p, pm, hookimpl = _pm(ctx)

    class Impl:
        @hookimpl
        def my_hook(self, arg):
            if arg == "fail":
                raise ValueError("impl")
            return arg

    class New:
        @hookimpl(wrapper=True)
        def my_hook(self, arg):
            try:
                result = yield
            except ValueError:
                return ["recovered"]
            return result + ["new"]

    class Old:
        @hookimpl(hookwrapper=True)
        def my_hook(self, arg):
            outcome = yield
            if outcome.exception is None:
                outcome.force_result(outcome.get_result() + ["old"])

    pm.register(Impl())
    pm.register(New())
    pm.register(Old())
    return [pm.hook.my_hook(arg="a"), pm.hook.my_hook(arg="fail")]


def probe_historic_later_registration(ctx):
    p, pm, hookimpl = _pm(ctx, {"historic": True})
    seen = []

    class Plugin:
        @hookimpl
        def my_hook(self, arg):
            return arg * 2

    pm.hook.my_hook.call_historic(seen.append, {"arg": 21})
    pm.register(Plugin())
    pm.register(Plugin())
    return [seen, p.HookCaller.__name__ in dir(p)]


def probe_blocking_and_names(ctx):
    p, pm, hookimpl = _pm(ctx)

    class Plugin:
        @hookimpl
        def my_hook(self, arg):
            return 1

    a = Plugin()
    name = pm.register(a, "a")
    pm.set_blocked("b")
    out = [name, pm.register(Plugin(), "b"), pm.is_blocked("b"), pm.get_name(a), pm.has_plugin("a"),
           pm.is_registered(a), pm.hook.my_hook(arg=0)]
    pm.unregister(name="a")
    out += [pm.has_plugin("a"), pm.hook.my_hook(arg=0), len(pm.get_plugins())]
    return out


def probe_validation(ctx):
    p, pm, hookimpl = _pm(ctx)

    class Bad:
        @hookimpl
        def my_hook(self, arg, extra):
            return 1

    class BadWrapper:
        @hookimpl(hookwrapper=True)
        def my_hook(self, arg):
            return 1

    errors = []
    for plugin in (Bad(), BadWrapper()):
        try:
            pm.register(plugin)
            errors.append(None)
        except p.PluginValidationError as e:
            errors.append(["PluginValidationError", "my_hook" in str(e)])
    return errors


def probe_result_api(ctx):
    p = _pl(ctx)
    ok = p.Result.from_call(lambda: 7)
    bad = p.Result.from_call(lambda: 1 / 0)
    return [ok.get_result(), ok.exception, type(bad.exception).__name__, ctx.raises(ZeroDivisionError, bad.get_result)]
